"""The pods berth refused, asked to be tried again once a pod of their namespace left its node
(berth.extender.requeue)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.testclient import TestClient

from berth.cluster.convert import pod_from_k8s
from berth.cluster.per_pod import PodStates
from berth.extender.app import build_extender
from berth.extender.placer import Writes
from berth.extender.requeue import RETRY_AT_MOST, RETRY_EVERY, Requeue
from berth.extender.serve import SnapshotCluster
from tests.builders import node, view
from tests.test_preemption import OFFLINE, ONLINE, _pod


async def _nothing(*_: Any) -> None:
    return None


def test_the_pods_berth_refused_are_retried_once_a_pod_of_their_namespace_left_its_node():
    """kube-scheduler retries a refused pod on the neighbour's deletion, maybe before berth's view has
    it; berth asks again once its view does (Placer.pod_left)."""

    retried: list[tuple[str, str]] = []

    async def retry(p: Any, why: str) -> None:
        retried.append((p.name, why))

    v = view(
        node("n1"), _pod("batch", 1, node="n1", tags=["batch"]), _pod("other-ns", 1, namespace="b", node="n1")
    )
    app = build_extender(
        SnapshotCluster(v),
        rules=ONLINE,
        with_kube=OFFLINE,
        writes=Writes(bind=_nothing, record=_nothing, retry=retry),
    )
    placer = app.state.placer
    client = TestClient(app)
    waiting = _pod("web", 1, affinity={"require_without_tag": ["batch"]})
    assert client.post("/filter", json={"Pod": waiting, "NodeNames": ["n1"]}).json()["NodeNames"] == []
    v.add_pod(pod_from_k8s(waiting))  # pending, as the watch shows it

    async def leave(key: str) -> None:
        gone = v.remove_pod(key)
        placer.pod_left(gone)
        await asyncio.sleep(0)
        await asyncio.gather(*placer.background)

    asyncio.run(leave("b/other-ns"))  # another namespace: berth's rules did not count it
    assert retried == []
    asyncio.run(leave("default/batch"))
    assert retried == [("web", "pod batch left node n1")]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _requeue(v, retried: list, clock: _Clock) -> tuple[Requeue, list]:
    spawned: list = []

    async def retry(p: Any, why: str) -> None:
        retried.append(p.name)

    requeue = Requeue(SnapshotCluster(v), retry, PodStates(), spawned.append, clock)
    return requeue, spawned


def _run(spawned: list) -> None:
    async def drain() -> None:
        while spawned:
            await spawned.pop(0)

    asyncio.run(drain())


def test_a_pod_is_retried_at_most_once_per_retry_every_and_at_most_retry_at_most_per_leaving_pod():
    v = view(node("n1"), _pod("batch", 1, node="n1"), _pod("batch-2", 1, node="n1"))
    waiting = [pod_from_k8s(_pod(f"w-{i}", 1)) for i in range(RETRY_AT_MOST + 5)]
    for p in waiting:
        v.add_pod(p)
    retried: list[str] = []
    clock = _Clock()
    requeue, spawned = _requeue(v, retried, clock)
    for p in waiting:
        requeue.refused(p)
    requeue.pod_left(v.remove_pod("default/batch"))
    _run(spawned)
    assert len(retried) == RETRY_AT_MOST
    clock.now += RETRY_EVERY / 2  # too soon for those; the five left over go now
    requeue.pod_left(v.remove_pod("default/batch-2"))
    _run(spawned)
    assert len(retried) == RETRY_AT_MOST + 5 and len(set(retried)) == RETRY_AT_MOST + 5


def test_a_refused_pod_placed_or_gone_since_is_not_retried_and_not_kept():
    v = view(node("n1"), _pod("batch", 1, node="n1"), _pod("batch-2", 1, node="n1"))
    placed, gone = pod_from_k8s(_pod("placed", 1)), pod_from_k8s(_pod("gone", 1))
    v.add_pod(placed)
    v.add_pod(gone)
    retried: list[str] = []
    requeue, spawned = _requeue(v, retried, _Clock())
    requeue.refused(placed)
    requeue.refused(gone)
    v.add_pod(pod_from_k8s(_pod("placed", 1, node="n1")))
    v.remove_pod("default/gone")
    requeue.pod_left(v.remove_pod("default/batch"))
    _run(spawned)
    assert retried == []
    assert requeue._refused.in_namespace("default") == []
