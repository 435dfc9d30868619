"""berth's answer to kube-scheduler's preempt verb and what follows it (berth.extender.preempt): the
fewest victims under kube's filters and berth's rules, no second preemption while the victims go, and
the events that say what berth chose."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from berth.cluster.convert import pod_from_k8s
from berth.configure import default_pipeline
from berth.extender.app import build_extender
from berth.extender.placer import Writes
from berth.extender.preempt import VICTIMS_GOING_SECONDS
from berth.extender.serve import SnapshotCluster
from tests.builders import node, view
from tests.policy_builders import app, placement_policy
from tests.test_preemption import HIGH, OFFLINE, ONLINE, PREEMPTOR, _pod, _three_nodes


def test_the_preempt_verb_answers_with_berths_victims_and_drops_what_berth_refuses():
    v = view(
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        _pod("filler-1", 1, node="n1", cpu="1500m"),
        _pod("batch", 1, node="n1", cpu="100m", tags=["batch"]),
        _pod("filler-2", 1, node="n2", cpu="1500m"),
        _pod("batch-high", 500, node="n2", cpu="100m", tags=["batch"]),
    )

    async def nothing(*_: Any) -> None:
        return None

    app = build_extender(
        SnapshotCluster(v),
        rules=ONLINE,
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=nothing, record=nothing),
    )
    client = TestClient(app)
    body = {
        "Pod": PREEMPTOR,
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "uid-filler-1"}], "NumPDBViolations": 0},
            "n2": {"Pods": [{"UID": "uid-filler-2"}], "NumPDBViolations": 0},
        },
    }
    answer = client.post("/preempt", json=body).json()
    assert answer == {
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "uid-batch"}, {"UID": "uid-filler-1"}], "NumPDBViolations": 0}
        }
    }


def test_the_preempt_verb_answers_one_victim_where_kubes_and_berths_reasons_overlap():
    app = build_extender(
        SnapshotCluster(view(*_three_nodes())),
        rules=ONLINE,
        with_kube=OFFLINE,
        writes=Writes(bind=_nothing, record=_nothing),
    )
    client = TestClient(app)
    for kubes in ("uid-filler-n2", "uid-batch-n2-a"):
        body = {
            "Pod": HIGH,
            "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": kubes}], "NumPDBViolations": 0}},
        }
        answer = client.post("/preempt", json=body).json()
        assert answer == {
            "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "uid-batch-n2-a"}], "NumPDBViolations": 0}}
        }


def test_no_victims_are_proposed_where_the_pod_fits_without_evictions():
    v = view(node("n1", cpu="4"), _pod("small", 10, node="n1", cpu="500m"))
    app = build_extender(
        SnapshotCluster(v), rules=ONLINE, with_kube=OFFLINE, writes=Writes(bind=_nothing, record=_nothing)
    )
    client = TestClient(app)
    body = {
        "Pod": HIGH,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-small"}], "NumPDBViolations": 0}},
    }
    assert not client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]


async def _nothing(*_: Any) -> None:
    return None


def test_a_pod_nominated_to_a_node_keeps_the_room_preemption_freed_there():
    """kube-scheduler counts nominated pods for its own filters; berth counts them for its rules: a
    lower-priority pod of the same app does not take the node preempted for the nominated one."""
    web = app("web")
    v = view(
        node("n1"),
        node("n2"),
        _pod("old", 1, node="n2", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    nominated = _pod("first", 100, labels=web)
    nominated["status"] = {"phase": "Pending", "nominatedNodeName": "n1"}
    v.add_pod(pod_from_k8s(nominated))

    async def nothing(*_: Any) -> None:
        return None

    extender = build_extender(
        SnapshotCluster(v),
        rules=ONLINE,
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=nothing, record=nothing),
    )
    client = TestClient(extender)
    lower = _pod("later", 10, labels=web)
    assert client.post("/filter", json={"Pod": lower, "NodeNames": ["n1", "n2"]}).json()["NodeNames"] == []
    higher = _pod("more-urgent", 200, labels=web)
    assert client.post("/filter", json={"Pod": higher, "NodeNames": ["n1", "n2"]}).json()["NodeNames"] == [
        "n1"
    ]
    # the nominated pod is still pending and nominated: only the pod filter chose is reserved on n1
    assert v.pod("default/first").node_name == "" and list(v.state("n1").pods) == ["default/more-urgent"]


def test_a_refusal_that_only_berths_rules_make_names_the_lower_priority_pods_that_block():
    events: list[tuple[str, str]] = []

    async def nothing(*_: Any) -> None:
        return None

    async def record(p: Any, evs: Any) -> None:
        events.extend((e.reason, e.message) for e in evs)

    v = view(
        node("n1"),
        _pod("batch", 1, node="n1", tags=["batch"]),
        _pod("other", 1, namespace="team-b", node="n1"),
    )
    app = build_extender(
        SnapshotCluster(v),
        rules=ONLINE,
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=nothing, record=record),
    )
    client = TestClient(app)
    urgent = _pod("urgent", 100, affinity={"require_without_tag": ["batch"]})
    assert client.post("/filter", json={"Pod": urgent, "NodeNames": ["n1"]}).json()["NodeNames"] == []
    ((reason, message),) = events
    assert reason == "FailedPlacement"
    assert "lower-priority pods block it only under berth's rules (on n1: batch)" in message
    assert "team-b" not in message and "other" not in message
    # a pod that may not preempt gets no such note
    events.clear()
    calm = _pod("calm", 100, affinity={"require_without_tag": ["batch"]}, spec={"preemptionPolicy": "Never"})
    client.post("/filter", json={"Pod": calm, "NodeNames": ["n1"]})
    assert events and "lower-priority" not in events[0][1]


def test_the_preemptor_and_the_victims_berth_added_are_told_once_kube_nominated_it():
    events: list[tuple[str, str, str]] = []

    async def record(p: Any, evs: Any) -> None:
        events.extend((p.name, e.reason, e.message) for e in evs)

    v = view(*_three_nodes())
    app = build_extender(
        SnapshotCluster(v), rules=ONLINE, with_kube=OFFLINE, writes=Writes(bind=_nothing, record=record)
    )
    client = TestClient(app)
    body = {
        "Pod": HIGH,
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "uid-batch-n1-a"}], "NumPDBViolations": 0},
            "n2": {"Pods": [{"UID": "uid-filler-n2"}], "NumPDBViolations": 0},
        },
    }
    client.post("/preempt", json=body)
    assert events == []  # kube has not chosen a node yet
    nominated = {**HIGH, "status": {"phase": "Pending", "nominatedNodeName": "n2"}}
    client.post("/filter", json={"Pod": nominated, "NodeNames": ["n0", "n1", "n2"]})
    told = {(name, reason): message for name, reason, message in events}
    assert set(told) == {("batch-n2-a", "PreemptedForBerthRule"), ("web-high", "BerthPreemption")}
    assert told["batch-n2-a", "PreemptedForBerthRule"].startswith(
        "evicted on n2 for web-high (priority 1000): with this pod there, berth refuses it: "
        "tags/require_without_tag:"
    )
    assert told["web-high", "BerthPreemption"].startswith(
        "preempting on n2, berth chose the victims: added batch-n2-a (tags/require_without_tag:"
    )
    assert "spared filler-n2, which kube-scheduler's dry run chose" in told["web-high", "BerthPreemption"]
    # told once
    client.post("/filter", json={"Pod": nominated, "NodeNames": ["n0", "n1", "n2"]})
    assert len([e for e in events if e[1] == "BerthPreemption"]) == 1


def test_nothing_is_told_where_berth_agreed_with_kubes_victims():
    events: list[Any] = []

    async def record(p: Any, evs: Any) -> None:
        events.extend(evs)

    v = view(node("n1", cpu="2"), _pod("filler", 1, node="n1", cpu="1500m"))
    app = build_extender(
        SnapshotCluster(v), rules=ONLINE, with_kube=OFFLINE, writes=Writes(bind=_nothing, record=record)
    )
    client = TestClient(app)
    plain = _pod("urgent", 100, cpu="1")
    body = {
        "Pod": plain,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-filler"}], "NumPDBViolations": 0}},
    }
    client.post("/preempt", json=body)
    client.post(
        "/filter", json={"Pod": {**plain, "status": {"nominatedNodeName": "n1"}}, "NodeNames": ["n1"]}
    )
    assert [e.reason for e in events if e.reason in ("BerthPreemption", "PreemptedForBerthRule")] == []


def _asked_to_preempt(kube_victims: dict[str, str]) -> tuple[Any, TestClient, dict[str, Any]]:
    """The three nodes, a placer over them, and kube-scheduler's preempt call for HIGH with one
    victim (its uid) per node."""
    v = view(*_three_nodes())
    app = build_extender(
        SnapshotCluster(v), rules=ONLINE, with_kube=OFFLINE, writes=Writes(bind=_nothing, record=_nothing)
    )
    body = {
        "Pod": HIGH,
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid}], "NumPDBViolations": 0} for node, uid in kube_victims.items()
        },
    }
    return v, TestClient(app), body


def test_no_second_preemption_while_the_victims_of_the_first_are_going():
    """kube-scheduler v1.38 may ask again before the nomination or the victims' end reaches its cache;
    a second answer would evict on another node too."""
    import msgspec

    v, client, body = _asked_to_preempt({"n0": "uid-batch-n0-a", "n2": "uid-filler-n2"})
    first = client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]
    assert first["n2"]["Pods"] == [{"UID": "uid-batch-n2-a"}]
    # kube evicted on n2: the victim is going
    v.add_pod(msgspec.structs.replace(v.pod("default/batch-n2-a"), deleting=True))
    assert not client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]
    v.remove_pod("default/batch-n2-a")  # gone from the view, perhaps not yet from kube's cache
    assert not client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]
    # Long after, a new preemption is a new question.
    preemption = client.app.state.placer.preemption
    later = preemption.clock() + VICTIMS_GOING_SECONDS + 1
    preemption.clock = lambda: later
    again = client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]
    assert "n0" in again


def test_the_node_kube_made_room_on_is_accepted_before_the_watch_shows_the_victims_gone():
    """kube-scheduler deletes the victims berth named and nominates the pod; its cache may show them
    gone before berth's watch does. Its next attempt asks berth about the nominated node: berth counts
    those victims as gone there (it would otherwise refuse the node, and kube would preempt again on
    another), and answers no second preemption."""
    v, client, body = _asked_to_preempt({"n1": "uid-plain-n1-a", "n2": "uid-filler-n2"})
    first = client.post("/preempt", json=body).json()["NodeNameToMetaVictims"]
    assert first["n2"]["Pods"] == [{"UID": "uid-batch-n2-a"}]
    # kube's own filters pass n2 once its cache shows the victim gone (n0 and n1 stay full)
    names = {"NodeNames": ["n2"]}
    # Not nominated: the view holds batch-n2-a, which the pod's rule refuses to share a node with.
    assert client.post("/filter", json={"Pod": HIGH, **names}).json()["NodeNames"] == []
    # kube chose n2: the view still holds batch-n2-a (the watch is behind), the decision does not.
    nominated = {**HIGH, "status": {"phase": "Pending", "nominatedNodeName": "n2"}}
    assert client.post("/filter", json={"Pod": nominated, **names}).json()["NodeNames"] == ["n2"]
    assert v.pod("default/batch-n2-a") is not None  # only the decision left it out
    assert not client.post("/preempt", json={**body, "Pod": nominated}).json()["NodeNameToMetaVictims"]


def test_victims_count_as_gone_only_on_the_nominated_node_and_only_for_a_while():
    _, client, body = _asked_to_preempt({"n2": "uid-filler-n2"})
    client.post("/preempt", json=body)
    names = {"NodeNames": ["n2"]}
    elsewhere = {**HIGH, "status": {"phase": "Pending", "nominatedNodeName": "n1"}}
    assert client.post("/filter", json={"Pod": elsewhere, **names}).json()["NodeNames"] == []
    preemption = client.app.state.placer.preemption
    later = preemption.clock() + VICTIMS_GOING_SECONDS + 1
    preemption.clock = lambda: later
    nominated = {**HIGH, "status": {"phase": "Pending", "nominatedNodeName": "n2"}}
    assert client.post("/filter", json={"Pod": nominated, **names}).json()["NodeNames"] == []
