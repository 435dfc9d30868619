"""berth serve --follow-lease: berth places and binds only as the sidecar of the scheduler that leads."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.testclient import TestClient

from berth.cluster.kubeapi import ApiError
from berth.cluster.leadership import Leadership
from berth.configure import default_pipeline
from berth.extender.app import build_extender
from berth.extender.placer import NOT_LEADING, Writes
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, view


class Leases:
    """A client whose Lease is what the test says (None: there is none yet)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None

    async def get(self, path: str) -> dict[str, Any]:
        if self.lease is None:
            raise ApiError("not found", status=404)
        return self.lease

    def hold(self, holder: str, renewed: str, duration: int = 15) -> None:
        self.lease = {
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}
        }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _leadership(leases: Leases, clock: Clock, relists: list[int]) -> Leadership:
    async def relist() -> None:
        relists.append(1)

    return Leadership(leases, "berth-system", "berth-scheduler", "pod-a", on_lead=relist, clock=clock)  # type: ignore[arg-type]


def test_berth_leads_with_its_scheduler_lists_again_when_it_takes_over_and_lets_go_when_it_lapses():
    leases, clock, relists = Leases(), Clock(), []
    following = _leadership(leases, clock, relists)

    async def scenario() -> None:
        await following.step()
        assert not following.may_filter() and not following.may_bind()  # no Lease yet
        leases.hold("pod-b_1234", "t1")
        await following.step()
        assert not following.may_filter()  # the other replica's scheduler leads
        leases.hold("pod-a_5678", "t2")
        await following.step()
        assert following.may_filter() and following.may_bind() and relists == [1]
        clock.now += 10
        leases.hold("pod-a_5678", "t3")  # renewed
        await following.step()
        assert following.may_filter() and relists == [1]  # still the same term: no new list
        clock.now += 16  # no renewal seen for longer than the lease's duration: the scheduler is gone
        await following.step()
        assert not following.may_filter() and not following.may_bind()
        leases.hold("pod-b_1234", "t4")
        await following.step()
        assert not following.may_bind()

    asyncio.run(scenario())


def test_a_replica_whose_scheduler_does_not_lead_refuses_filter_and_bind_with_an_error():
    class Lapsed:
        def may_filter(self) -> bool:
            return False

        def may_bind(self) -> bool:
            return False

    async def nothing(*_: Any) -> None:
        return None

    app = build_extender(
        SnapshotCluster(view(node("n1"))),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=nothing, record=nothing),
        leadership=Lapsed(),
    )
    client = TestClient(app)
    new = pod("p", uid="u")
    assert client.post("/filter", json={"Pod": new, "NodeNames": ["n1"]}).json()["Error"] == NOT_LEADING
    bind = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    assert client.post("/bind", json=bind).json() == {"Error": NOT_LEADING}


def test_the_fence_pod_is_named_namespace_slash_name_and_goes_with_the_lease(capsys):
    from berth.cli import main

    assert main(["serve", "--fence-pod", "berth-system/berth-scheduler-0"]) == 2
    assert "--fence-pod goes with --follow-lease" in capsys.readouterr().err
    assert main(["serve", "--follow-lease", "berth-system/berth-scheduler", "--fence-pod", "pod-0"]) == 2
    assert "--fence-pod should be NAMESPACE/NAME, found 'pod-0'" in capsys.readouterr().err
    assert main(["serve", "--follow-lease", "berth-scheduler/"]) == 2
    assert "--follow-lease should be NAMESPACE/NAME, found 'berth-scheduler/'" in capsys.readouterr().err
