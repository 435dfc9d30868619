"""Preemption that respects berth's rules (berth.analysis.preemption and the extender's preempt verb)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from berth.analysis.preemption import select_victims
from berth.cluster.convert import pod_from_k8s
from berth.configure import default_pipeline
from berth.extender.app import build_extender
from berth.extender.placer import Writes
from berth.extender.preempt import VICTIMS_GOING_SECONDS
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, view
from tests.policy_builders import app, placement_policy

ONLINE = default_pipeline(kube_filters=False)
# The chain the preempt verb finds victims with: kube's filters as berth models them, and berth's rules.
OFFLINE = default_pipeline(kube_filters=True)


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
    chosen = select_victims(pod_from_k8s(PREEMPTOR), v, OFFLINE, {"n1": ["uid-filler"]}, seed=1)
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
    assert select_victims(pod_from_k8s(PREEMPTOR), v, OFFLINE, {"n1": ["uid-filler"]}, seed=1) == {}


def test_a_node_berth_accepts_once_kubes_victims_are_gone_keeps_them():
    v = view(
        node("n1", cpu="2"), _pod("filler", 1, node="n1", cpu="1500m"), _pod("keep", 1, node="n1", cpu="100m")
    )
    chosen = select_victims(pod_from_k8s(PREEMPTOR), v, OFFLINE, {"n1": ["uid-filler"]}, seed=1)
    assert _victims(chosen) == {"n1": ["filler"]}


def test_one_per_host_evicts_the_lower_priority_pod_of_the_same_app_and_version():
    web = app("web")
    v = view(
        node("only"),
        _pod("old", 1, node="only", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    assert _victims(select_victims(new, v, OFFLINE, {"only": []}, seed=1)) == {"only": ["old"]}


def test_max_n_per_host_evicts_the_fewest_and_least_important():
    web = app("web")
    v = view(
        node("only"),
        _pod("low", 1, node="only", labels=web),
        _pod("lower", 0, node="only", labels=web),
        placement_policy("two", {"type": "MAX_N_PER_HOST", "max": 2}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    # Two of the app on the node, at most two allowed: one must go, the least important.
    assert _victims(select_victims(new, v, OFFLINE, {"only": []}, seed=1)) == {"only": ["lower"]}


def test_a_pod_of_equal_or_higher_priority_is_never_a_victim():
    web = app("web")
    v = view(
        node("only"),
        _pod("peer", 50, node="only", labels=web),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    new = pod_from_k8s(_pod("new", 50, labels=web))
    assert select_victims(new, v, OFFLINE, {"only": []}, seed=1) == {}


def test_pods_a_budget_protects_are_put_back_first_and_their_violations_counted():
    web = app("web")
    guarded = {**web, "tier": "guarded"}
    v = view(
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
    chosen = select_victims(new, v, OFFLINE, {"only": []}, seed=1)
    assert _victims(chosen) == {"only": ["free"]} and chosen["only"].pdb_violations == 0
    # With both needed gone, the guarded one is evicted and counted.
    tight = view(
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
    both = select_victims(new, tight, OFFLINE, {"only": []}, seed=1)
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


def _three_nodes() -> list[dict[str, Any]]:
    """Three 4-CPU nodes with low-priority pods of 1.8 CPU: two tagged batch on n0, two untagged on n1,
    one tagged and one untagged filler on n2."""
    return [
        node("n0", cpu="4"),
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        _pod("batch-n0-a", 10, node="n0", cpu="1800m", tags=["batch"]),
        _pod("batch-n0-b", 10, node="n0", cpu="1800m", tags=["batch"]),
        _pod("plain-n1-a", 10, node="n1", cpu="1800m"),
        _pod("plain-n1-b", 10, node="n1", cpu="1800m"),
        _pod("batch-n2-a", 10, node="n2", cpu="1800m", tags=["batch"]),
        _pod("filler-n2", 10, node="n2", cpu="1800m"),
    ]


HIGH = _pod("web-high", 1000, cpu="1500m", affinity={"require_without_tag": ["batch"]})


def test_kubes_victim_is_reprieved_when_the_pod_berths_rule_needs_gone_frees_the_room():
    v = view(*_three_nodes())
    proposed = {"n0": ["uid-batch-n0-a"], "n1": ["uid-plain-n1-a"], "n2": ["uid-filler-n2"]}
    chosen = select_victims(pod_from_k8s(HIGH), v, OFFLINE, proposed, seed=1)
    # n2: evicting batch-n2-a (the rule needs it gone) frees 1.8 CPU, enough: the filler stays.
    # n0: both carry the excluded tag. n1: one of the two of equal priority, as kube needs.
    found = _victims(chosen)
    assert found["n0"] == ["batch-n0-a", "batch-n0-b"] and found["n2"] == ["batch-n2-a"]
    assert len(found["n1"]) == 1
    assert {p.name for p in v.state("n2").pods.values()} == {"batch-n2-a", "filler-n2"}


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


def test_where_berths_rules_do_not_block_the_victims_are_those_kube_would_pick():
    # kube's SelectVictimsOnNode on its own filters: every lower pod off, put back the most important
    # first; the least important that must go are the victims, never more.
    v = view(
        node("n1", cpu="4"),
        _pod("a", 30, node="n1", cpu="1"),
        _pod("b", 20, node="n1", cpu="1"),
        _pod("c", 10, node="n1", cpu="1"),
        _pod("d", 5, node="n1", cpu="500m"),
        _pod("peer", 1000, node="n1", cpu="200m"),
    )
    plain = pod_from_k8s(_pod("new", 1000, cpu="1500m"))
    chosen = select_victims(plain, v, OFFLINE, {"n1": ["uid-c", "uid-d"]}, seed=1)
    # 4 - 0.2 (peer) - 1.5 = 2.3 CPU for the others: a and b fit back (2), c does not, d does (2.5?
    # no: 2 + 0.5 = 2.5 > 2.3), so c and d go, as kube's dry run said.
    assert _victims(chosen) == {"n1": ["c", "d"]}
    assert chosen["n1"].pods[0].name == "c"  # the most important victim first


def test_a_budget_protected_kube_victim_is_put_back_before_the_others():
    v = view(
        node("n1", cpu="4"),
        _pod("guarded", 10, node="n1", cpu="1800m", labels={"tier": "guarded"}),
        _pod("free", 10, node="n1", cpu="1800m"),
    )
    v.upsert_workload(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"tier": "guarded"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    plain = pod_from_k8s(_pod("new", 1000, cpu="1500m"))
    chosen = select_victims(plain, v, OFFLINE, {"n1": ["uid-guarded"]}, seed=1)
    assert _victims(chosen) == {"n1": ["free"]} and chosen["n1"].pdb_violations == 0


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


def test_simulate_says_where_preemption_would_place_a_pod_nothing_fits_and_exits_1(tmp_path, capsys):
    import yaml

    from berth.cli import main
    from tests.builders import k8s_list

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(k8s_list(*_three_nodes())))
    preemptor = tmp_path / "pod.yaml"
    preemptor.write_text(yaml.safe_dump(HIGH))
    args = ["simulate", "--cluster", str(cluster), "--pod", str(preemptor), "--seed", "1"]
    assert main(args) == 1  # not placed without preemption
    out = capsys.readouterr().out
    assert "not placed (409)" in out
    # n1 and n2 cost one victim each (n2's the batch pod, not kube's filler); kube's order, then the name
    assert "WouldPreempt: would preempt on n1: plain-n1-b (priority 10)" in out
    assert "PreemptionCandidate" not in out
    assert main([*args, "--detail"]) == 1
    detail = capsys.readouterr().out
    assert "PreemptionCandidate: n2: batch-n2-a (priority 10)" in detail
    assert "PreemptionCandidate: n0: batch-n0-a (priority 10), batch-n0-b (priority 10)" in detail
    never = {**HIGH, "spec": {**HIGH["spec"], "preemptionPolicy": "Never"}}
    preemptor.write_text(yaml.safe_dump(never))
    assert main(args) == 1
    assert "WouldPreempt" not in capsys.readouterr().out


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


def test_the_pods_berth_refused_are_retried_once_a_pod_of_their_namespace_left_its_node():
    """kube-scheduler retries a refused pod on the neighbour's deletion, maybe before berth's view has
    it; berth asks again once its view does (Placer.pod_left)."""
    import asyncio

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
