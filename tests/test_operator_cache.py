"""The operator's nodes and pods from berth's reflector (berth.operator.cache), and the refresh that
writes the counts only once the cluster is listed and only from the active replica of a peering
(berth.operator.peering)."""

from __future__ import annotations

import asyncio
import datetime as dt

from berth.cluster.kubeapi import ApiError, Credentials, KubeClient
from berth.operator import peering, refresh
from berth.operator.cache import NOT_DONE, OperatorCache
from tests.api_server import api_server
from tests.builders import node, pod
from tests.test_live_cache import FakeApi, Feed, _until, _with_rv


def _unschedulable(name: str, namespace: str, rv: int) -> dict:
    obj = _with_rv(pod(name, namespace=namespace, phase="Pending", labels={"app": "web"}), rv)
    obj["spec"]["schedulerName"] = "berth-scheduler"
    obj["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}
    ]
    return obj


def test_the_cache_lists_and_watches_nodes_and_pods_and_keeps_the_waiting_ones_apart():
    async def scenario() -> None:
        api = FakeApi()
        api.lists["/api/v1/nodes"] = [[_with_rv(node("n1"), 1), _with_rv(node("n2"), 1)]]
        api.lists["/api/v1/pods"] = [
            [
                _with_rv(pod("a", namespace="shop", node="n1"), 2),
                _with_rv(pod("b", namespace="bank", node="n2"), 3),
                _unschedulable("w", "shop", 4),
            ]
        ]
        feed = Feed()
        api.watches["/api/v1/pods"] = [feed, "hang"]
        marked: list[str] = []
        async with api_server(api.handler) as url:
            cache = OperatorCache(KubeClient(Credentials(server=url, ssl_context=False)), mark=marked.append)
            await cache.start()
            await _until(cache.ready)
            assert sorted(cache.nodes) == ["n1", "n2"]
            assert sorted(p.name for p in cache.pods_of("shop")) == ["a", "w"]
            assert [w.name for w in cache.waiting_by_namespace()["shop"]] == ["w"]
            # Pods that are done are not listed at all.
            assert all(
                q.get("fieldSelector") == NOT_DONE for path, q in api.requests if path == "/api/v1/pods"
            )
            marked.clear()
            feed.send("MODIFIED", _with_rv(pod("w", namespace="shop", node="n2", labels={"app": "web"}), 5))
            feed.send("DELETED", _with_rv(pod("b", namespace="bank", node="n2"), 6))
            done = _with_rv(pod("a", namespace="shop", node="n1", phase="Succeeded"), 7)
            feed.send("MODIFIED", done)
            await _until(lambda: not cache.pods.get("bank") and len(list(cache.pods_of("shop"))) == 1)
            assert [p.node_name for p in cache.pods_of("shop")] == ["n2"]  # w, bound now
            assert cache.waiting_by_namespace() == {}
            assert set(marked) == {"shop", "bank"}
            await cache.stop()

    asyncio.run(scenario())


def test_an_operator_of_some_namespaces_lists_the_pods_of_those_only():
    cache = OperatorCache(None, ("shop", "bank"))  # type: ignore[arg-type]
    paths = [r.kind.path for r in cache.reflectors]
    assert paths == ["/api/v1/nodes", "/api/v1/namespaces/shop/pods", "/api/v1/namespaces/bank/pods"]


def _peer(priority: int, seconds_ago: float, lifetime: int = 60) -> dict:
    seen = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    return {"priority": priority, "lifetime": lifetime, "lastseen": seen.isoformat()}


def test_a_replica_leads_its_peering_as_kopf_decides_it():
    assert peering.leads({"me@1": _peer(50, 1)}, 50)
    assert peering.leads({"me@1": _peer(50, 1), "other@2": _peer(10, 1)}, 50)
    assert not peering.leads({"me@1": _peer(50, 1), "other@2": _peer(90, 1)}, 50)  # a higher one
    assert not peering.leads({"me@1": _peer(50, 1), "other@2": _peer(50, 1)}, 50)  # a tie: both pause
    assert peering.leads({"me@1": _peer(50, 1), "other@2": _peer(90, 120)}, 50)  # the higher one is dead
    assert not peering.leads({"other@2": _peer(10, 1)}, 50)  # not listed yet: kopf has not started
    assert not peering.leads({"me@1": {"priority": 50}}, 50)  # no lastseen: not alive


def test_the_replica_is_active_without_a_peering_and_paused_when_its_object_is_missing():
    class Client:
        def __init__(self, answer) -> None:
            self.answer, self.paths = answer, []

        async def get(self, path):
            self.paths.append(path)
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    assert asyncio.run(peering.active(Client({}), None, 5))  # type: ignore[arg-type]
    missing = Client(ApiError("not found", status=404))
    assert not asyncio.run(peering.active(missing, "berth", 5))  # type: ignore[arg-type]
    leading = Client({"status": {"me": _peer(5, 1)}})
    assert asyncio.run(peering.active(leading, "berth", 5, ("shop",)))  # type: ignore[arg-type]
    assert leading.paths == ["/apis/kopf.dev/v1/namespaces/shop/kopfpeerings/berth"]


def test_the_refresh_writes_nothing_until_listed_and_while_paused_and_keeps_its_marks():
    async def scenario() -> None:
        written: list[str] = []

        class Client:
            async def patch(self, path, body):
                written.append(path)

        state = {"ready": False, "active": False}

        async def active() -> bool:
            return state["active"]

        def stale(namespaces):
            return [(ns, "p", {"governedPods": 1}) for ns in namespaces]

        refresh._marked.clear()
        refresh.mark("shop")
        loop = asyncio.create_task(
            refresh.run(Client(), stale, lambda: ["shop"], 0.01, ready=lambda: state["ready"], active=active)
        )
        await asyncio.sleep(0.05)
        state["ready"] = True
        await asyncio.sleep(0.05)  # listed, but paused
        assert written == [] and refresh._marked == {"shop"}
        state["active"] = True
        await _until(lambda: written)
        assert written == [refresh.status_path("shop", "p")] and refresh._marked == set()
        loop.cancel()

    asyncio.run(scenario())
