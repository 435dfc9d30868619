"""Preemption that respects berth's rules (berth.preemption and the extender's preempt verb)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from berth.cluster.convert import pod_from_k8s
from berth.extender.app import create_app
from berth.extender.placer import Placer
from berth.extender.serve import SnapshotCluster
from berth.pipeline import default_pipeline
from berth.preemption import select_victims
from tests.builders import node, pod, view
from tests.policy_builders import app, placement_policy, policy_view

ONLINE = default_pipeline(offline=False)


def _pod(name: str, priority: int, **kw: Any) -> dict[str, Any]:
    spec = dict(kw.pop("spec", None) or {})
    spec["priority"] = priority
    return pod(name, uid=f"uid-{name}", spec=spec, **kw)


def _victims(result: dict[str, Any]) -> dict[str, list[str]]:
    return {node: sorted(p.key.split("/")[1] for p in v.pods) for node, v in result.items()}


PREEMPTOR = _pod("urgent", 100, cpu="1", affinity={"require_without_tag": ["batch"]})


def test_a_lower_priority_pod_that_blocks_only_under_berths_rule_becomes_a_victim():
    v = view(
        node("n1", cpu="2"),
        _pod("filler", 1, node="n1", cpu="1500m"),
        _pod("batch", 1, node="n1", cpu="100m", tags=["batch"]),
    )
    # kube's dry run frees the CPU only; berth also needs the pod carrying the excluded tag gone.
    chosen = select_victims(pod_from_k8s(PREEMPTOR), v, ONLINE, {"n1": ["uid-filler"]}, seed=1)
    assert _victims(chosen) == {"n1": ["batch", "filler"]}
    # the view is as it was
    assert {p.name for p in v.state("n1").pods.values()} == {"filler", "batch"}


def test_no_victim_is_evicted_on_a_node_berth_refuses_anyway():
    """kube would evict the low-priority filler, but a higher-priority neighbour carries the excluded
    tag: the node is dropped, and the filler survives."""
    v = view(
        node("n1", cpu="2"),
        _pod("filler", 1, node="n1", cpu="1500m"),
        _pod("batch", 500, node="n1", cpu="100m", tags=["batch"]),
    )
    assert select_victims(pod_from_k8s(PREEMPTOR), v, ONLINE, {"n1": ["uid-filler"]}, seed=1) == {}


def test_a_node_berth_accepts_once_kubes_victims_are_gone_keeps_them():
    v = view(
        node("n1", cpu="2"), _pod("filler", 1, node="n1", cpu="1500m"), _pod("keep", 1, node="n1", cpu="100m")
    )
    chosen = select_victims(pod_from_k8s(PREEMPTOR), v, ONLINE, {"n1": ["uid-filler"]}, seed=1)
    assert _victims(chosen) == {"n1": ["filler"]}


def test_one_per_host_evicts_the_lower_priority_pod_of_the_same_app_and_version():
    web = app("web")
    v = policy_view(
        node("only"),
        _pod("old", 1, node="only", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    assert _victims(select_victims(new, v, ONLINE, {"only": []}, seed=1)) == {"only": ["old"]}


def test_max_n_per_host_evicts_the_fewest_and_least_important():
    web = app("web")
    v = policy_view(
        node("only"),
        _pod("low", 1, node="only", labels=web),
        _pod("lower", 0, node="only", labels=web),
        placement_policy("two", {"type": "MAX_N_PER_HOST", "max": 2}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    # Two of the app on the node, at most two allowed: one must go, the least important.
    assert _victims(select_victims(new, v, ONLINE, {"only": []}, seed=1)) == {"only": ["lower"]}


def test_a_pod_of_equal_or_higher_priority_is_never_a_victim():
    web = app("web")
    v = policy_view(
        node("only"),
        _pod("peer", 50, node="only", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    assert select_victims(new, v, ONLINE, {"only": []}, seed=1) == {}


def test_pods_a_budget_protects_are_put_back_first_and_their_violations_counted():
    web = app("web")
    guarded = {**web, "tier": "guarded"}
    v = policy_view(
        node("only"),
        _pod("guarded", 1, node="only", labels=guarded),
        _pod("free", 1, node="only", labels=web),
        placement_policy("one", {"type": "MAX_N_PER_HOST", "max": 2}),
    )
    v.upsert_workload(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"tier": "guarded"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    chosen = select_victims(new, v, ONLINE, {"only": []}, seed=1)
    assert _victims(chosen) == {"only": ["free"]} and chosen["only"].pdb_violations == 0
    # With both needed gone, the guarded one is evicted and counted.
    tight = policy_view(
        node("only"),
        _pod("guarded", 1, node="only", labels=guarded),
        _pod("free", 1, node="only", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    tight.upsert_workload(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"tier": "guarded"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    both = select_victims(new, tight, ONLINE, {"only": []}, seed=1)
    assert _victims(both) == {"only": ["free", "guarded"]} and both["only"].pdb_violations == 1


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

    placer = Placer(
        SnapshotCluster(v),
        online=ONLINE,
        offline=default_pipeline(offline=True),
        binder=nothing,
        recorder=nothing,
    )
    client = TestClient(create_app(placer))
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


def test_a_pod_nominated_to_a_node_keeps_the_room_preemption_freed_there():
    """kube-scheduler counts nominated pods for its own filters; berth counts them for its rules: a
    lower-priority pod of the same app does not take the node preempted for the nominated one."""
    web = app("web")
    v = policy_view(
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

    placer = Placer(
        SnapshotCluster(v),
        online=ONLINE,
        offline=default_pipeline(offline=True),
        binder=nothing,
        recorder=nothing,
    )
    client = TestClient(create_app(placer))
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
    placer = Placer(
        SnapshotCluster(v),
        online=ONLINE,
        offline=default_pipeline(offline=True),
        binder=nothing,
        recorder=record,
    )
    client = TestClient(create_app(placer))
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
