"""The live cache against a scripted API server: resume, bookmarks, relist on 410, readiness."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json

import httpx

from berth.cluster import live
from berth.cluster.convert import pod_from_k8s
from berth.cluster.kubeapi import ApiError, Credentials, KubeClient
from berth.cluster.live import WORKLOADS, LiveCluster
from tests.api_server import api_server
from tests.builders import node, pod


def _with_rv(obj, rv):
    obj = json.loads(json.dumps(obj))
    obj["metadata"]["resourceVersion"] = str(rv)
    obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
    return obj


class Feed(httpx.AsyncByteStream):
    """A watch stream whose events the test sends when it wants them (`send`), so the test decides
    which comes first: a watch event or a bind's answer."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue = asyncio.Queue()

    def send(self, kind: str, obj: dict) -> None:
        self.queue.put_nowait(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    def end(self) -> None:
        self.queue.put_nowait(b"")

    async def __aiter__(self):
        while chunk := await self.queue.get():
            yield chunk


def is_list(query: dict[str, str]) -> bool:
    """A list's request: a GET without watch, or a watch that sends the current objects first."""
    return "watch" not in query or query.get("sendInitialEvents") == "true"


def is_watch(query: dict[str, str]) -> bool:
    """A watch's request for changes only, from a resourceVersion."""
    return query.get("watch") == "true" and "sendInitialEvents" not in query


class FakeApi:
    """Lists and watches by a script, single objects from `objects` (an object, or a status code to
    answer with); records every request's query. A list is served as a 1.34 server does when asked
    for a streaming list (the objects as ADDED events, then the bookmark that ends them), or refused
    as a server without it refuses it (`streams = False`: then read page by page)."""

    def __init__(self) -> None:
        self.streams = True
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.lists: dict[str, list[list[dict]]] = {"/api/v1/nodes": [], "/api/v1/pods": []}
        self.watches: dict[str, list] = {"/api/v1/nodes": [], "/api/v1/pods": []}
        for _, _, path in WORKLOADS:  # none unless a test lists some
            self.lists[path] = [[]]
            self.watches[path] = []
        self.objects: dict[str, dict | int] = {}

    def handler(self, request: httpx.Request) -> httpx.Response:
        path, query = request.url.path, dict(request.url.params)
        self.requests.append((path, query))
        if path.startswith("/apis/berth.dev"):
            return httpx.Response(404, json={"kind": "Status", "code": 404, "message": "not found"})
        if path in self.objects:
            found = self.objects[path]
            if isinstance(found, int):
                return httpx.Response(found, json={"kind": "Status", "code": found, "message": "no"})
            return httpx.Response(200, json=found)
        if query.get("sendInitialEvents") == "true":
            if not self.streams:
                message = (
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
                )
                return httpx.Response(422, json={"kind": "Status", "code": 422, "message": message})
            items, rv = self._listed(path)
            end = {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}
            events = [{"type": "ADDED", "object": i} for i in items]
            events.append({"type": "BOOKMARK", "object": {"metadata": end}})
            return httpx.Response(200, content="\n".join(json.dumps(e) for e in events).encode() + b"\n")
        if query.get("watch") == "true":
            script = self.watches[path]
            step = script.pop(0) if script else "hang"
            if step == "hang":
                return httpx.Response(200, stream=_Hang())
            if isinstance(step, Feed):
                return httpx.Response(200, stream=step)
            if isinstance(step, int):
                return httpx.Response(step, json={"kind": "Status", "code": step, "message": "expired"})
            return httpx.Response(200, content="\n".join(json.dumps(e) for e in step).encode() + b"\n")
        items, rv = self._listed(path)
        return httpx.Response(200, json={"kind": "List", "metadata": {"resourceVersion": rv}, "items": items})

    def _listed(self, path: str) -> tuple[list[dict], str]:
        """The next list of `path` scripted (the last one again once it is the only one left)."""
        pages = self.lists[path]
        items = pages.pop(0) if len(pages) > 1 else pages[0]
        return items, str(max((int(i["metadata"]["resourceVersion"]) for i in items), default=1))


class _Hang(httpx.AsyncByteStream):
    async def __aiter__(self):
        await asyncio.sleep(3600)
        yield b""


async def _until(condition, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def _cache(api: FakeApi, **kw) -> LiveCluster:
    """A cache over a real HTTP server on 127.0.0.1 that answers by the script; stopping the cache
    stops the server."""
    servers = contextlib.AsyncExitStack()
    url = await servers.enter_async_context(api_server(api.handler))
    cache = LiveCluster(KubeClient(Credentials(server=url, ssl_context=False)), **kw)
    stop = cache.stop

    async def stop_all() -> None:
        await stop()
        await servers.aclose()

    cache.stop = stop_all  # type: ignore[method-assign]
    return cache


def test_the_cache_lists_then_watches_from_the_list_version_and_applies_events():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1", tags=["web"]), 7)]]
        api.watches["/api/v1/pods"] = [
            [
                {"type": "ADDED", "object": _with_rv(pod("b", node="n1", tags=["web"]), 8)},
                {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "12"}}},
            ],
            "hang",
        ]
        cache = await _cache(api)
        await cache.start()
        await _until(lambda: cache.ready() and cache.view.state("n1").tag_count("default", "web") == 2)
        await _until(lambda: len([q for p, q in api.requests if p == "/api/v1/pods" and is_watch(q)]) >= 2)
        watches = [q for p, q in api.requests if p == "/api/v1/pods" and is_watch(q)]
        assert watches[0]["resourceVersion"] == "7"
        assert watches[0]["allowWatchBookmarks"] == "true"
        assert watches[1]["resourceVersion"] == "12"  # resumed after the bookmark, no relist
        assert len([q for p, q in api.requests if p == "/api/v1/pods" and is_list(q)]) == 1
        await cache.stop()

    asyncio.run(scenario())


def test_the_list_is_read_as_a_stream_of_the_current_pods_and_the_watch_goes_on_from_its_end():
    # At 150,000 pods kube-apiserver spent 23 to 25 s of CPU making pages of 500, 9 to 14 s streaming.
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1", tags=["web"]), 7)]]
        api.watches["/api/v1/pods"] = ["hang"]
        cache = await _cache(api)
        await cache.start()
        await _until(
            lambda: cache.ready() and any(is_watch(q) for p, q in api.requests if p == "/api/v1/pods")
        )
        asked = [q for p, q in api.requests if p == "/api/v1/pods"]
        assert [is_list(q) for q in asked] == [True, False]
        assert asked[0]["sendInitialEvents"] == "true" and asked[0]["resourceVersionMatch"] == "NotOlderThan"
        assert asked[0]["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
        assert asked[1]["resourceVersion"] == "7"  # from the bookmark that ended the list
        assert cache.view.state("n1").tag_count("default", "web") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_a_server_without_streaming_lists_is_listed_page_by_page_and_asked_once(caplog):
    async def scenario():
        api = FakeApi()
        api.streams = False
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1"), 7)], [_with_rv(pod("b", node="n1"), 9)]]
        api.watches["/api/v1/pods"] = [410, "hang"]
        cache = await _cache(api)
        await cache.start()
        await _until(lambda: cache.ready() and cache.view.pod("default/b") is not None)
        streamed = [q for p, q in api.requests if p == "/api/v1/pods" and q.get("sendInitialEvents")]
        paged = [q for p, q in api.requests if p == "/api/v1/pods" and "watch" not in q]
        assert len(streamed) == 1 and len(paged) == 2  # the relist after 410 did not ask again
        assert cache.view.pod("default/a") is None
        await cache.stop()

    with caplog.at_level("INFO", logger="berth.cache"):
        asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if "page by page" in r.getMessage()]
    assert len([m for m in said if m.startswith("pods:")]) == 1
    assert "WatchList feature gate" in said[0]


def test_a_list_stream_that_ends_before_its_last_object_is_not_taken_as_the_list():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1"), 7)]]
        cut = api.handler

        def cut_once(request: httpx.Request) -> httpx.Response:
            answer = cut(request)
            query = dict(request.url.params)
            if request.url.path == "/api/v1/pods" and query.get("sendInitialEvents") and not cut_once.done:
                cut_once.done = True
                first = answer.content.split(b"\n")[0]  # the pod, then the stream closes
                return httpx.Response(200, content=first + b"\n")
            return answer

        cut_once.done = False
        api.handler = cut_once  # type: ignore[method-assign]
        cache = await _cache(api)
        await cache.start()
        await _until(lambda: cut_once.done)
        await asyncio.sleep(0.1)
        assert not cache.ready()  # one pod sent, but not the end of the list
        await _until(cache.ready, timeout=10)
        assert cache.view.pod("default/a") is not None
        await cache.stop()

    asyncio.run(scenario())


def test_a_410_relists_and_drops_what_was_deleted_in_the_gap():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [
            [_with_rv(pod("a", node="n1", tags=["web"]), 7), _with_rv(pod("b", node="n1", tags=["web"]), 8)],
            [_with_rv(pod("b", node="n1", tags=["web"]), 20)],
        ]
        api.watches["/api/v1/pods"] = [410, "hang"]
        cache = await _cache(api)
        await cache.start()
        await _until(lambda: cache.view.pod("default/a") is None and cache.ready())
        assert cache.view.state("n1").tag_count("default", "web") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_the_cache_is_not_ready_before_it_has_listed_and_the_policy_crd_may_be_absent():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[]]
        cache = await _cache(api)
        assert not cache.ready()
        await cache.start()
        await _until(cache.ready)
        await cache.stop()

    asyncio.run(scenario())


def test_the_cache_reads_workloads_for_kubes_spreading_and_serves_without_those_it_may_not_list(caplog):
    """ReplicaSets listed give the pods they own kube's default spreading selector; Services and
    Namespaces berth may not list (403) leave the cache ready, with a warning naming what to grant."""

    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[]]
        replicaset = {
            "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "9"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }
        api.lists["/apis/apps/v1/replicasets"] = [[replicaset]]
        api.objects["/api/v1/services"] = 403
        api.objects["/api/v1/namespaces"] = 403
        cache = await _cache(api)
        await cache.start()
        await _until(cache.ready)
        owned = pod_from_k8s(
            {
                "metadata": {
                    "name": "web-1-x",
                    "namespace": "shop",
                    "labels": {"app": "web"},
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}],
                },
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
        )
        selector = cache.view.default_selector(owned)
        assert selector is not None and selector.matches({"app": "web"}) and not selector.matches({})
        await cache.stop()

    asyncio.run(scenario())
    assert any(
        "services: not allowed to list" in r.message and "grant list and watch" in r.message
        for r in caplog.records
    )


def test_a_reservation_counts_the_pod_until_the_watch_shows_it_bound():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5), _with_rv(node("n2"), 5)]]
        api.lists["/api/v1/pods"] = [[]]
        pending = _with_rv(pod("p", tags=["web"]), 9)
        api.watches["/api/v1/pods"] = [[{"type": "ADDED", "object": pending}], "hang"]
        cache = await _cache(api)
        cache.reserve(pod_from_k8s(pending), "n2")
        await cache.start()
        await _until(lambda: cache.ready() and cache.view.pod("default/p") is not None)
        await asyncio.sleep(0.05)
        # The watch still shows the pod unbound: the reservation keeps it on n2.
        assert cache.view.state("n2").tag_count("default", "web") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_the_bearer_token_never_appears_in_errors_or_logs(caplog):
    token = "s3cr3t-token-value"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {token}"
        return httpx.Response(500, json={"kind": "Status", "code": 500, "message": "etcd is down"})

    async def scenario():
        async with api_server(handler) as url:
            client = KubeClient(Credentials(server=url, ssl_context=False, token=token))
            try:
                await client.get("/api/v1/nodes")
            except Exception as exc:
                return str(exc)
            finally:
                await client.aclose()
        return ""

    with caplog.at_level("DEBUG"):
        message = asyncio.run(scenario())
    assert "500 etcd is down" in message
    assert token not in message
    assert token not in caplog.text


class _Paged:
    """An API client whose pod list comes in pages, each page asked for only once the one before is
    taken: `seen` records how many pods the view held when each page was asked for."""

    def __init__(self, pages: list[list[dict]]) -> None:
        self.pod_pages = pages
        self.cache: LiveCluster | None = None
        self.seen: list[int] = []

    async def pages(self, path, params=None, limit=500):
        if path != "/api/v1/pods":
            yield ([_with_rv(node("n1"), 1)] if path == "/api/v1/nodes" else []), "1"
            return
        for i, page in enumerate(self.pod_pages):
            assert self.cache is not None
            self.seen.append(sum(1 for _ in self.cache.view.pods()))
            yield page, "9" if i == len(self.pod_pages) - 1 else ""

    async def watch(self, path, params, **kwargs):
        if params.get("sendInitialEvents"):  # as a server without streaming lists answers
            raise ApiError("sendInitialEvents is forbidden for watch", status=422)
        await asyncio.Event().wait()
        yield {}

    async def aclose(self) -> None:
        return None


def test_a_list_is_taken_into_the_view_page_by_page_and_a_relist_forgets_what_it_no_longer_lists():
    # The whole decoded list and the view are never held side by side: at 150,000 pods that was a
    # gigabyte at the start of berth serve.
    async def scenario():
        pods = [_with_rv(pod(f"p{i}", node="n1"), 2 + i) for i in range(6)]
        client = _Paged([pods[:2], pods[2:4], pods[4:]])
        cache = LiveCluster(client)  # type: ignore[arg-type]
        client.cache = cache
        await cache.start()
        await _until(cache.ready)
        assert client.seen == [0, 2, 4]
        assert sum(1 for _ in cache.view.pods()) == 6
        client.pod_pages, client.seen = [pods[:2], pods[2:3]], []
        pods_reflector = next(r for r in cache.reflectors if r.kind.name == "pods")
        await pods_reflector._relist()
        assert sorted(p.name for p in cache.view.pods()) == ["p0", "p1", "p2"]
        await cache.stop()

    asyncio.run(scenario())


def test_a_relist_converts_again_only_the_pods_whose_resource_version_moved(monkeypatch):
    # A takeover without a fence lists 150,000 pods again: the ones the watch showed at the version
    # listed are passed over, what changed while the watch was away is taken in.
    async def scenario():
        pods = [_with_rv(pod(f"p{i}", node="n1"), 2 + i) for i in range(4)]
        client = _Paged([pods])
        cache = LiveCluster(client)  # type: ignore[arg-type]
        client.cache = cache
        await cache.start()
        await _until(cache.ready)
        converted: list[str] = []
        convert = live.pod_from_k8s

        def counting(obj, **kw):
            converted.append(obj["metadata"]["name"])
            return convert(obj, **kw)

        monkeypatch.setattr(live, "pod_from_k8s", counting)
        moved = _with_rv(pod("p1", node="n2", labels={"tier": "gold"}), 20)  # changed meanwhile
        again = _with_rv(pod("p2", node="n1"), 21)  # recreated under the same name: a new uid
        again["metadata"]["uid"] = "uid-p2-again"
        client.pod_pages = [[pods[0], moved, again]]
        pods_reflector = next(r for r in cache.reflectors if r.kind.name == "pods")
        await pods_reflector._relist()
        assert sorted(converted) == ["p1", "p2"]
        assert cache.view.pod("default/p1").node_name == "n2"
        assert cache.view.pod("default/p1").labels == {"tier": "gold"}
        assert cache.view.pod("default/p2").uid == "uid-p2-again"
        assert cache.view.pod("default/p3") is None  # deleted while the watch was away
        assert cache.view.pod("default/p0").version == "2"
        await cache.stop()

    asyncio.run(scenario())


def test_the_collector_is_held_off_while_a_list_is_read_and_started_again_after(monkeypatch):
    # Full collections walk every object the view holds: 51 of them during a list of 150,000 pods.
    async def scenario():
        pods = [_with_rv(pod(f"p{i}", node="n1"), 2 + i) for i in range(3)]
        client = _Paged([pods[:2], pods[2:]])
        cache = LiveCluster(client)  # type: ignore[arg-type]
        client.cache = cache
        enabled: list[bool] = []
        apply = cache._apply_pod

        def recording(obj):
            enabled.append(gc.isenabled())
            apply(obj)

        monkeypatch.setattr(cache, "_apply_pod", recording)
        for kind in cache.kinds:
            if kind.name == "pods":
                kind.apply = cache._apply_pod
        await cache.start()
        await _until(cache.ready)
        assert enabled == [False, False, False]
        assert gc.isenabled()
        await cache.stop()

    assert gc.isenabled()
    asyncio.run(scenario())


class _Fenced(FakeApi):
    """A FakeApi that stores the status patch of berth's own pod and shows it on the pod watch (`feed`),
    after whatever the old leader stored before it (`before`); `answer`: the patch's status code."""

    OWN = "/api/v1/namespaces/berth-system/pods/berth-a/status"

    def __init__(self, feed: Feed, before: list[dict], answer: int = 200, shown: bool = True) -> None:
        super().__init__()
        self.feed, self.before, self.answer, self.shown = feed, before, answer, shown
        self.patches: list[dict] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH" and request.url.path == self.OWN:
            self.requests.append((request.url.path, {}))
            if self.answer != 200:
                return httpx.Response(
                    self.answer, json={"kind": "Status", "code": self.answer, "message": "no"}
                )
            body = json.loads(request.content)
            self.patches.append(body)
            own = _with_rv(pod("berth-a", namespace="berth-system", node="n1"), 30)
            own["status"]["conditions"] = body["status"]["conditions"]
            for obj in self.before:
                self.feed.send("MODIFIED", obj)
            if self.shown:
                self.feed.send("MODIFIED", own)
            return httpx.Response(200, json=own)
        return super().handler(request)


def _lists(api: FakeApi, path: str) -> int:
    return len([q for p, q in api.requests if p == path and is_list(q)])


def test_a_replica_taking_the_lease_catches_up_by_its_fence_without_listing_again():
    # The old leader bound b just before it died; the watch shows that before the fence, so once the
    # fence is back the view has b where the old leader put it, and nothing was listed again.
    async def scenario():
        feed = Feed()
        bound_by_old_leader = _with_rv(pod("b", node="n1", tags=["web"]), 20)
        api = _Fenced(feed, [bound_by_old_leader])
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1", tags=["web"]), 7)]]
        api.watches["/api/v1/pods"] = [feed, "hang"]
        cache = await _cache(api, fence_pod=("berth-system", "berth-a"))
        await cache.start()
        await _until(cache.ready)
        await cache.catch_up()
        assert cache.view.state("n1").tag_count("default", "web") == 2
        assert cache.catch_ups == 1
        assert _lists(api, "/api/v1/pods") == 1 and _lists(api, "/api/v1/nodes") == 1
        condition = api.patches[0]["status"]["conditions"][0]
        assert condition["type"] == "berth.dev/LeaseTaken" and condition["reason"] == "CaughtUp"
        await cache.stop()

    asyncio.run(scenario())


def test_without_its_fence_back_in_time_or_without_a_fence_pod_the_replica_lists_again(caplog):
    async def listed_again(**kw) -> tuple[int, int]:
        feed = Feed()
        answer, shown = kw.pop("answer", 200), kw.pop("shown", True)
        api = _Fenced(feed, [], answer=answer, shown=shown)
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5)]]
        api.lists["/api/v1/pods"] = [[_with_rv(pod("a", node="n1"), 7)]]
        api.watches["/api/v1/pods"] = [feed, "hang"]
        cache = await _cache(api, catch_up_seconds=0.3, **kw)
        await cache.start()
        await _until(cache.ready)
        await cache.catch_up()
        await cache.stop()
        return _lists(api, "/api/v1/pods") - 1, cache.catch_ups

    fence = {"fence_pod": ("berth-system", "berth-a")}
    assert asyncio.run(listed_again()) == (1, 0)  # no fence pod: the list, as before
    assert asyncio.run(listed_again(shown=False, **fence)) == (1, 0)  # the fence never came back
    assert "not seen in 0.3 s" in caplog.text
    assert asyncio.run(listed_again(answer=403, **fence)) == (1, 0)  # not allowed to write it
    assert asyncio.run(listed_again(**fence)) == (0, 1)
