"""What the live cache counts on a node while bindings are in flight: a binding the watch has shown is
never forgotten, however long the pod stays Pending; a reservation stands only for a binding not shown
yet and is undone only when the API server says the pod is not bound (or is gone).

Each test orders the watch's events and the bind's answers as they can race in a real cluster. The
reservation time is shortened to a few tens of milliseconds, and each test then waits many times
longer, so "Pending far beyond the reservation time" is what every test here goes through.
"""

from __future__ import annotations

import asyncio

import msgspec

from berth.cluster import live
from berth.cluster.convert import pod_from_k8s
from berth.cluster.live import LiveCluster
from tests.builders import node, pod
from tests.test_live_cache import FakeApi, Feed, _cache, _until, _with_rv, is_list

RESERVE = 0.03  # seconds
LONG = 0.4  # many reservation times, many verification rounds
POD_PATH = "/api/v1/namespaces/default/pods/p"


def _pending(rv: int, node_name: str | None = None) -> dict:
    """Pod p of the web group as the API server has it: Pending (no kubelet has started it), bound to
    `node_name` or not bound."""
    return _with_rv(pod("p", uid="uid-p", node=node_name, tags=["web"], phase="Pending"), rv)


async def _started(api: FakeApi, pods: list[dict]) -> tuple[LiveCluster, Feed]:
    api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5), _with_rv(node("n2"), 5)]]
    api.lists["/api/v1/pods"] = [pods]
    feed = Feed()
    api.watches["/api/v1/pods"] = [feed, "hang"]
    cache = await _cache(api, reservation_seconds=RESERVE, verify_every=RESERVE / 3)
    await cache.start()
    await _until(cache.ready)
    return cache, feed


def _web_on(cache: LiveCluster, name: str) -> int:
    return cache.view.state(name).tag_count("default", "web")


def _next_pod_reserved(cache: LiveCluster) -> None:
    """The next pod of the burst, placed on the other node long after p."""
    cache.reserve(pod_from_k8s(_with_rv(pod("q", uid="uid-q", tags=["web"], phase="Pending"), 20)), "n2")


def _gets(api: FakeApi) -> int:
    return sum(1 for path, _ in api.requests if path == POD_PATH)


def test_a_binding_the_watch_shows_before_the_bind_answers_is_never_forgotten():
    # The race that lost bindings: the watch shows the pod bound, then the bind's answer arrives and
    # berth reserved the pod again; that reservation, never confirmed, later unbound the pod in the view.
    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")  # at filter
        feed.send("MODIFIED", _pending(10, "n1"))  # the binding, stored and watched
        await _until(lambda: cache.reservations() == 0)
        cache.reserve(p, "n1")  # the bind's answer, after the watch event
        assert cache.reservations() == 0
        await asyncio.sleep(LONG)
        _next_pod_reserved(cache)
        assert cache.view.pod("default/p").node_name == "n1"
        assert _web_on(cache, "n1") == 1
        assert _gets(api) == 0  # nothing to ask the API server about
        await cache.stop()

    asyncio.run(scenario())


def test_a_binding_the_watch_shows_after_the_bind_answers_confirms_the_reservation():
    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")  # at filter
        cache.reserve(p, "n1")  # the bind's answer
        assert _web_on(cache, "n1") == 1
        feed.send("MODIFIED", _pending(10, "n1"))
        await _until(lambda: cache.reservations() == 0)
        await asyncio.sleep(LONG)
        _next_pod_reserved(cache)
        assert cache.view.pod("default/p").node_name == "n1"
        assert _web_on(cache, "n1") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_the_bind_and_the_watch_confirming_a_reservation_leave_the_node_as_the_decision_saw_it():
    # What the decision and bind's check read of n1 stays as it was at the reservation, so the next
    # pod's memos and bind's "nothing changed" check hold; a watched pod that differs does change it.
    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")  # at filter
        generation, held = cache.view.state("n1").generation, cache.view.pod("default/p")
        cache.reserve(p, "n1")  # the bind's answer
        feed.send("MODIFIED", _pending(10, "n1"))
        await _until(lambda: cache.reservations() == 0)
        assert cache.view.state("n1").generation == generation
        # The same record, at the resourceVersion the watch showed (a relist then passes over it).
        assert cache.view.pod("default/p") == msgspec.structs.replace(held, version="10")
        relabelled = _pending(11, "n1")
        relabelled["metadata"]["labels"] = {"tier": "gold"}
        feed.send("MODIFIED", relabelled)
        await _until(lambda: cache.view.pod("default/p").labels == {"tier": "gold"})
        assert cache.view.state("n1").generation > generation
        assert _web_on(cache, "n1") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_a_relist_between_the_bind_and_the_watch_event_keeps_the_reservation_until_the_binding_shows():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5), _with_rv(node("n2"), 5)]]
        # The relist after the 410 was served from before the binding: the pod is listed unbound.
        api.lists["/api/v1/pods"] = [[_pending(9)], [_pending(9)]]
        feed = Feed()
        first = Feed()
        api.watches["/api/v1/pods"] = [first, feed, "hang"]
        cache = await _cache(api, reservation_seconds=60, verify_every=RESERVE)
        await cache.start()
        await _until(cache.ready)
        cache.reserve(pod_from_k8s(_pending(9)), "n1")
        first.send("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
        await _until(lambda: ("/api/v1/pods", {}) not in api.requests and _lists(api) == 2)
        await asyncio.sleep(0.05)
        assert cache.view.pod("default/p").node_name == "n1"  # still reserved after the relist
        assert cache.reservations() == 1
        feed.send("MODIFIED", _pending(10, "n1"))
        await _until(lambda: cache.reservations() == 0)
        assert _web_on(cache, "n1") == 1
        await cache.stop()

    asyncio.run(scenario())


def _lists(api: FakeApi) -> int:
    return sum(1 for path, q in api.requests if path == "/api/v1/pods" and is_list(q))


def test_a_relist_that_shows_the_binding_confirms_it_and_it_stays_after_the_reservation_time():
    async def scenario():
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 5), _with_rv(node("n2"), 5)]]
        api.lists["/api/v1/pods"] = [[_pending(9)], [_pending(12, "n1")]]
        first = Feed()
        api.watches["/api/v1/pods"] = [first, "hang"]
        cache = await _cache(api, reservation_seconds=RESERVE, verify_every=RESERVE / 3)
        await cache.start()
        await _until(cache.ready)
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")
        first.send("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
        await _until(lambda: cache.reservations() == 0)
        cache.reserve(p, "n1")  # a bind answer that comes after the relist
        await asyncio.sleep(LONG)
        assert cache.view.pod("default/p").node_name == "n1"
        assert _web_on(cache, "n1") == 1
        await cache.stop()

    asyncio.run(scenario())


def test_pods_listed_bound_and_pending_count_on_their_nodes_far_beyond_the_reservation_time():
    async def scenario():
        api = FakeApi()
        listed = [
            _with_rv(pod(f"w{i}", uid=f"u{i}", node="n1", tags=["web"], phase="Pending"), 9) for i in range(3)
        ]
        cache, _feed = await _started(api, listed)
        await asyncio.sleep(LONG)
        assert _web_on(cache, "n1") == 3
        assert _web_on(cache, "n2") == 0
        await cache.stop()

    asyncio.run(scenario())


def test_an_unconfirmed_reservation_is_kept_while_the_api_server_does_not_answer_then_asked_again():
    async def scenario():
        api = FakeApi()
        api.objects[POD_PATH] = 503  # the API server cannot say
        cache, _feed = await _started(api, [_pending(9)])
        cache.reserve(pod_from_k8s(_pending(9)), "n1")
        await _until(lambda: _gets(api) >= 3)
        assert cache.view.pod("default/p").node_name == "n1"  # counting one too many is the safe side
        assert cache.reservations() == 1
        api.objects[POD_PATH] = _pending(11, "n1")  # the binding was stored; the watch just lags
        await _until(lambda: cache.reservations() == 0)
        await asyncio.sleep(LONG)
        assert cache.view.pod("default/p").node_name == "n1"
        # An older unbound copy the watch delivers late does not unbind a pod the API server showed bound.
        _feed.send("MODIFIED", _pending(10))
        await asyncio.sleep(0.05)
        assert cache.view.pod("default/p").node_name == "n1"
        await cache.stop()

    asyncio.run(scenario())


def test_a_reservation_is_undone_when_the_api_server_says_the_pod_is_not_bound():
    # A filter reservation for a pod the scheduler never bound (it failed elsewhere in its cycle).
    async def scenario():
        api = FakeApi()
        api.objects[POD_PATH] = _pending(9)
        cache, _feed = await _started(api, [_pending(9)])
        cache.reserve(pod_from_k8s(_pending(9)), "n1")
        assert _web_on(cache, "n1") == 1
        await _until(lambda: cache.reservations() == 0)
        assert cache.view.pod("default/p").node_name == ""
        assert _web_on(cache, "n1") == 0
        await cache.stop()

    asyncio.run(scenario())


def test_a_reservation_of_a_pod_that_is_gone_is_undone_and_leaves_no_ghost():
    async def scenario():
        api = FakeApi()
        api.objects[POD_PATH] = 404
        cache, _feed = await _started(api, [_pending(9)])
        cache.reserve(pod_from_k8s(_pending(9)), "n1")
        await _until(lambda: cache.reservations() == 0)
        assert cache.view.pod("default/p") is None
        assert _web_on(cache, "n1") == 0
        await cache.stop()

    asyncio.run(scenario())


def test_a_bind_answer_that_arrives_after_the_pod_was_deleted_adds_no_ghost():
    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")
        feed.send("DELETED", _pending(10, "n1"))
        await _until(lambda: cache.view.pod("default/p") is None)
        cache.reserve(p, "n1")
        assert cache.view.pod("default/p") is None
        assert _web_on(cache, "n1") == 0
        await cache.stop()

    asyncio.run(scenario())


def test_the_uids_of_deleted_pods_are_let_go_once_no_bind_answer_can_still_come(monkeypatch):
    monkeypatch.setattr(live, "GONE_SECONDS", LONG)

    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        feed.send("DELETED", _pending(10))
        await _until(lambda: cache.view.pod("default/p") is None)
        assert cache.remembered_gone() == 1
        # No more deletions: the cache's own rounds let the uid go, it does not wait for the next one.
        await _until(lambda: cache.remembered_gone() == 0, timeout=LONG * 10)
        await cache.stop()

    asyncio.run(scenario())


def test_release_undoes_a_reservation_but_never_a_binding_the_watch_has_shown():
    async def scenario():
        api = FakeApi()
        cache, feed = await _started(api, [_pending(9)])
        p = pod_from_k8s(_pending(9))
        cache.reserve(p, "n1")
        cache.release(p)  # the bind check failed: nothing was bound
        assert _web_on(cache, "n1") == 0
        feed.send("MODIFIED", _pending(10, "n2"))  # bound meanwhile by another attempt
        await _until(lambda: _web_on(cache, "n2") == 1)
        cache.release(p)  # a late failure of an older attempt
        assert cache.view.pod("default/p").node_name == "n2"
        await cache.stop()

    asyncio.run(scenario())
