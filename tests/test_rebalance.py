"""`berth rebalance`: the plan (which pods move where, which stay and why), the planned target that
steers a replacement, and the evictions through a scripted API server."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import httpx
import pytest
import yaml

from berth import annotations as ann
from berth.analysis.preemption import overlay
from berth.analysis.rebalance import Limits, plan
from berth.cli import main
from berth.cluster.convert import pod_from_k8s
from berth.cluster.kubeapi import Credentials, KubeClient
from berth.cluster.planned import target_annotation
from berth.configure import build_pipeline
from berth.engine import decide
from berth.evict import EVICTIONS, evict
from tests.alloc_helpers import cn, vm
from tests.api_server import api_server
from tests.builders import k8s_list, view

APP = "app.kubernetes.io/name"
RULES, PLACEMENT = build_pipeline(None, kube_filters=False), build_pipeline(None, kube_filters=True)


def policy(name: str, tree: dict[str, Any], selector: dict[str, str], namespace: str = "shop") -> dict:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector}, "policy": tree},
    }


ONE_PER_HOST = policy("one", {"type": "ONE_PER_HOST"}, {APP: "web"})


def web(name: str, node: str, *, started: str = "2026-12-01T10:00:00Z", owner: str | None = "web-5d8", **kw):
    obj = vm(
        name, namespace="shop", node=node, labels={APP: "web", "pod-template-hash": "5d8"}, uid=f"u-{name}"
    )
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    obj["status"]["startTime"] = started
    for key, value in kw.items():
        if key == "annotations":
            obj["metadata"]["annotations"].update(value)
        elif key == "controller_kind":
            obj["metadata"]["ownerReferences"][0]["kind"] = value
        elif key == "priority_class":
            obj["spec"]["priorityClassName"] = value
        elif key == "deleting":
            obj["metadata"]["deletionTimestamp"] = "2026-12-01T11:00:00Z"
    return obj


def _view(*objects: dict[str, Any]):
    v = view(*objects)
    for obj in objects:
        if obj["kind"] == "PlacementPolicy":
            v.upsert_policy(obj)
    return v


def _plan(*objects, **kw):
    return plan(_view(*objects), RULES, PLACEMENT, **kw)


def test_one_of_each_pair_under_one_per_host_moves_to_a_free_node_and_the_other_stays():
    found = _plan(
        *(cn(f"n{i}") for i in range(1, 5)),
        ONE_PER_HOST,
        web("web-a", "n1", started="2026-12-01T10:00:00Z"),
        web("web-b", "n1", started="2026-12-01T10:05:00Z"),
        web("web-c", "n2", started="2026-12-01T10:00:00Z"),
        web("web-d", "n2", started="2026-12-01T09:00:00Z"),
    )
    # The youngest of each pair moves; its partner's node then breaks nothing.
    assert sorted((m.pod, m.node) for m in found.moves) == [("shop/web-b", "n1"), ("shop/web-c", "n2")]
    targets = [m.target for m in found.moves]
    assert sorted(targets) == ["n3", "n4"]  # the free nodes, one each: the other move is counted
    assert all(m.rules == ("policy/placement-policy",) for m in found.moves)
    assert all("ONE_PER_HOST" in m.reasons[0] for m in found.moves)
    kept = {k.pod: k.why for k in found.kept}
    assert set(kept) == {"shop/web-a", "shop/web-d"}
    assert all("breaks no rule once the moves above are made" in why for why in kept.values())
    assert not found.clean


def test_nothing_is_moved_when_no_node_would_take_the_replacement():
    found = _plan(
        cn("n1"), cn("n2"), ONE_PER_HOST, web("web-a", "n1"), web("web-b", "n1"), web("web-c", "n2")
    )
    assert found.moves == []
    assert len(found.kept) == 2
    assert all("no node would take its replacement" in k.why for k in found.kept)


def test_the_moves_of_the_round_are_counted_when_the_next_target_is_chosen():
    # Three on n1, one free node: the first replacement takes n2, nothing is left for the second.
    found = _plan(
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        web("web-a", "n1", started="2026-12-01T10:00:00Z"),
        web("web-b", "n1", started="2026-12-01T10:01:00Z"),
        web("web-c", "n1", started="2026-12-01T10:02:00Z"),
        limits=Limits(per_node=5),
    )
    assert [(m.pod, m.target) for m in found.moves] == [("shop/web-c", "n2")]
    kept = {k.pod: k.why for k in found.kept}
    assert "no node would take its replacement" in kept["shop/web-b"]


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"owner": None}, "no controller would replace it"),
        ({"controller_kind": "DaemonSet"}, "DaemonSet"),
        ({"controller_kind": "Node"}, "static (mirror) pod"),
        ({"priority_class": "system-cluster-critical"}, "system pods are not moved"),
        ({"annotations": {ann.REBALANCE: "never"}}, 'berth.dev/rebalance: "never"'),
    ],
)
def test_pods_that_must_not_be_evicted_stay_with_the_reason(extra, why):
    found = _plan(
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        web("web-old", "n1", started="2026-12-01T09:00:00Z", annotations={ann.REBALANCE: "never"}),
        web("web-new", "n1", started="2026-12-01T10:00:00Z", **extra),
    )
    assert found.moves == []
    kept = {k.pod: k.why for k in found.kept}
    assert why in kept["shop/web-new"]


def test_a_bare_pod_moves_with_include_bare():
    objects = (
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        web("web-a", "n1", owner=None),
        web("web-b", "n1", owner=None),
    )
    assert _plan(*objects).moves == []
    assert len(_plan(*objects, include_bare=True).moves) == 1


def test_a_bare_pod_left_in_place_says_whether_a_node_would_take_it():
    pair = (ONE_PER_HOST, web("web-a", "n1", owner=None), web("web-b", "n1", owner=None))
    kept = {k.pod: k.why for k in _plan(cn("n1"), cn("n2"), *pair).kept}
    assert kept["shop/web-b"].endswith("; with it, it would go to n2")
    # One node: nowhere else to go, and the plan says why, not only that no controller replaces it.
    kept = {k.pod: k.why for k in _plan(cn("n1"), *pair).kept}
    assert "no controller would replace it" in kept["shop/web-b"]
    assert "; and no node would take it: no node satisfies the PlacementPolicy" in kept["shop/web-b"]


def test_the_limits_per_round_per_node_and_per_namespace_hold():
    pairs = [cn(f"n{i}") for i in range(1, 9)]
    pods = [
        web(f"web-{i}{s}", f"n{i}", started=f"2026-12-01T10:0{j}:00Z")
        for i in range(1, 4)
        for j, s in enumerate("ab")
    ]
    assert len(_plan(*pairs, ONE_PER_HOST, *pods).moves) == 3
    capped = _plan(*pairs, ONE_PER_HOST, *pods, limits=Limits(per_round=2))
    assert len(capped.moves) == 2
    assert any("round's limit of 2" in k.why for k in capped.kept)
    per_ns = _plan(*pairs, ONE_PER_HOST, *pods, limits=Limits(per_namespace=1))
    assert len(per_ns.moves) == 1
    assert any("in namespace shop is reached" in k.why for k in per_ns.kept)
    three = [web(f"web-{s}", "n1", started=f"2026-12-01T10:0{j}:00Z") for j, s in enumerate("abc")]
    per_node = _plan(*pairs, ONE_PER_HOST, *three)
    assert len(per_node.moves) == 1
    assert any("from node n1 is reached" in k.why for k in per_node.kept)


def test_a_clean_cluster_plans_nothing_and_another_namespace_is_left_alone():
    found = _plan(cn("n1"), cn("n2"), ONE_PER_HOST, web("web-a", "n1"), web("web-b", "n2"))
    assert found.clean and found.checked == 2
    busy = (cn("n1"), cn("n2"), ONE_PER_HOST, web("web-a", "n1"), web("web-b", "n1"))
    assert _plan(*busy, namespaces=["other"]).checked == 0
    assert len(_plan(*busy, namespaces=["shop"]).moves) == 1


# -- the planned target steers the replacement --------------------------------------------------------
def _going(name: str, node: str, target: str, *, seconds: int = 60) -> dict[str, Any]:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return web(
        name,
        node,
        deleting=True,
        annotations={ann.REBALANCE_TARGET: target_annotation(target, until, ("r",))},
    )


def _replacement(name: str = "web-new", template: str = "5d8") -> Any:
    obj = web(name, "")
    obj["spec"].pop("nodeName", None)
    obj["metadata"]["labels"]["pod-template-hash"] = template
    return pod_from_k8s(obj)


def _chosen(v, pod) -> str | None:
    return decide(pod, v, PLACEMENT, seed=1).chosen


def test_the_replacement_goes_to_the_planned_node_and_the_target_is_used_up_once_bound():
    nodes = [cn("n1"), cn("n2"), cn("n3", memory="64Gi")]  # n3 ranks first for any pod
    v = _view(*nodes, _going("web-a", "n1", "n2"))
    assert len(v.planned) == 1
    decision = decide(_replacement(), v, PLACEMENT, seed=1)
    assert decision.chosen == "n2"
    assert any(e.reason == "RebalanceTarget" for e in decision.events)
    # Bound there, the target is used: the next pod of the template is placed as any other.
    v.add_pod(pod_from_k8s(web("web-new", "n2")))
    assert len(v.planned) == 0
    assert _chosen(v, _replacement("web-next")) == "n3"


def test_questions_about_a_bound_pod_of_the_template_leave_the_planned_target():
    """A question is not news of the cluster: a recheck at bind (decide takes the pod itself off its
    node and puts it back) and preemption's what-if (victims off, then back) leave the target for the
    replacement, where adding the pod back as news would have used it up."""
    nodes = [cn("n1"), cn("n2"), cn("n3", memory="64Gi")]
    bound = pod_from_k8s(web("web-b", "n2"))
    v = _view(*nodes, web("web-b", "n2"), _going("web-a", "n1", "n2"))
    assert len(v.planned) == 1
    assert decide(bound, v, RULES, candidates=["n2"], seed=1).chosen == "n2"
    with overlay(v, remove=[bound]):
        assert v.pod(bound.key) is None
    assert v.pod(bound.key) is not None and len(v.planned) == 1
    assert _chosen(v, _replacement()) == "n2"


def test_only_the_same_controller_and_template_is_steered_and_only_until_the_deadline():
    nodes = [cn("n1"), cn("n2"), cn("n3", memory="64Gi")]
    assert _chosen(_view(*nodes, _going("web-a", "n1", "n2")), _replacement(template="other")) == "n3"
    assert _chosen(_view(*nodes, _going("web-a", "n1", "n2", seconds=-5)), _replacement()) == "n3"


def test_a_planned_node_that_a_rule_refuses_now_is_not_taken():
    nodes = [cn("n1"), cn("n2"), cn("n3", memory="64Gi")]
    # n2 got a pod of the app since the plan: ONE_PER_HOST refuses it, and n3 is taken.
    v = _view(*nodes, ONE_PER_HOST, _going("web-a", "n1", "n2"), web("web-z", "n2"))
    assert _chosen(v, _replacement()) == "n3"


def test_a_malformed_planned_target_plans_nothing():
    obj = web("web-a", "n1", deleting=True, annotations={ann.REBALANCE_TARGET: "{nope"})
    assert len(_view(cn("n1"), obj).planned) == 0


def test_a_pod_placed_on_its_planned_node_comes_last_in_the_next_round():
    record = json.dumps({"node": "n1", "planned": True})
    found = _plan(
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        # moved here by the last round, and younger than the pod placed by hand since
        web("web-moved", "n1", started="2026-12-01T10:05:00Z", annotations={ann.PLACEMENT_RECORD: record}),
        web("web-hand", "n1", started="2026-12-01T10:01:00Z"),
    )
    assert [m.pod for m in found.moves] == ["shop/web-hand"]


# -- the CLI ------------------------------------------------------------------------------------------
def _cluster(tmp_path, *objects) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(k8s_list(*objects)))
    return str(path)


def test_the_cli_prints_the_plan_and_exits_as_audit_does(tmp_path, capsys):
    busy = _cluster(
        tmp_path,
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        web("web-a", "n1"),
        web("web-b", "n1", started="2026-12-01T11:00:00Z"),
    )
    assert main(["rebalance", "--cluster", busy, "-A"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("1 to move, 1 left in place (2 pod(s) checked); dry run: --apply evicts")
    assert "~ shop/web-b: n1 -> n2" in out
    assert "= shop/web-a on n1: its node breaks no rule once the moves above are made" in out
    assert main(["rebalance", "--cluster", busy, "-n", "shop", "-o", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["moves"][0] | {"reasons": []} == {
        "pod": "shop/web-b",
        "from": "n1",
        "to": "n2",
        "owner": "ReplicaSet/web-5d8",
        "rules": ["policy/placement-policy"],
        "reasons": [],
    }
    assert data["applied"] is False
    clean = _cluster(tmp_path, cn("n1"), cn("n2"), ONE_PER_HOST, web("web-a", "n1"), web("web-b", "n2"))
    assert main(["rebalance", "--cluster", clean, "-A"]) == 0
    assert capsys.readouterr().out.startswith("clean: 2 pod(s) checked")


def test_rebalance_acts_on_the_current_namespace_unless_told_otherwise_as_kubectl(tmp_path, capsys):
    busy = _cluster(
        tmp_path,
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        web("web-a", "n1"),
        web("web-b", "n1", started="2026-12-01T11:00:00Z"),
    )
    # a snapshot's current namespace is default: shop's pods are not touched
    assert main(["rebalance", "--cluster", busy]) == 0
    assert capsys.readouterr().out.startswith("clean: 0 pod(s) checked")
    assert main(["rebalance", "--cluster", busy, "-n", "shop"]) == 1
    assert "~ shop/web-b: n1 -> n2" in capsys.readouterr().out


def test_the_plan_says_when_a_budget_would_refuse_the_eviction_now(tmp_path, capsys):
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {APP: "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    busy = _cluster(
        tmp_path,
        cn("n1"),
        cn("n2"),
        ONE_PER_HOST,
        budget,
        web("web-a", "n1"),
        web("web-b", "n1", started="2026-12-01T11:00:00Z"),
    )
    assert main(["rebalance", "--cluster", busy, "-n", "shop"]) == 1
    out = capsys.readouterr().out
    assert (
        "! PodDisruptionBudget shop/web allows no disruption now (0 allowed, 0 used by the moves above)"
        in out
    )
    assert main(["rebalance", "--cluster", busy, "-n", "shop", "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["moves"][0]["budget"].startswith(
        "PodDisruptionBudget shop/web"
    )


def test_apply_needs_a_live_cluster(tmp_path, capsys):
    cluster = _cluster(tmp_path, cn("n1"))
    assert main(["rebalance", "--cluster", cluster, "--apply"]) == 2
    assert "--apply evicts pods of a live cluster: it goes with --live" in capsys.readouterr().err


# -- evictions ----------------------------------------------------------------------------------------
def test_evictions_write_the_target_first_skip_a_pod_a_budget_protects_and_count_outcomes():
    found = _plan(
        *(cn(f"n{i}") for i in range(1, 5)),
        ONE_PER_HOST,
        web("web-a", "n1"),
        web("web-b", "n1", started="2026-12-01T11:30:00Z"),
        web("web-c", "n2"),
        web("web-d", "n2", started="2026-12-01T11:00:00Z"),
    )
    seen: list[tuple[str, str, dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        seen.append((request.method, request.url.path, body))
        if request.url.path.endswith("/web-d/eviction"):
            return httpx.Response(
                429,
                json={
                    "kind": "Status",
                    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                    "reason": "TooManyRequests",
                },
            )
        return httpx.Response(201 if request.method == "POST" else 200, json={})

    async def run():
        async with api_server(handler) as url:
            client = KubeClient(Credentials(server=url, ssl_context=False))
            try:
                return await evict(client, found.moves)
            finally:
                await client.aclose()

    before = EVICTIONS.labels(rule="policy/placement-policy", outcome="budget")._value.get()
    outcomes = {o.move.pod: o.outcome for o in asyncio.run(run())}
    assert outcomes == {"shop/web-b": "evicted", "shop/web-d": "budget"}
    assert EVICTIONS.labels(rule="policy/placement-policy", outcome="budget")._value.get() == before + 1
    calls = [(m, p) for m, p, _ in seen]
    b = "/api/v1/namespaces/shop/pods/web-b"
    # The target is on the pod before the eviction; the events name the rule and the target.
    assert calls[:2] == [("PATCH", b), ("POST", f"{b}/eviction")]
    patch = seen[0][2]["metadata"]
    assert patch["uid"] == "u-web-b"
    assert json.loads(patch["annotations"][ann.REBALANCE_TARGET])["node"] == found.moves[0].target
    events = [body for m, p, body in seen if p.endswith("/events")]
    assert {e["involvedObject"]["kind"] for e in events} == {"Pod", "ReplicaSet"}
    assert all(
        "policy/placement-policy" in e["message"] and found.moves[0].target in e["message"] for e in events
    )
    # The pod the budget protects keeps no target: a later deletion must not steer anything.
    d = "/api/v1/namespaces/shop/pods/web-d"
    assert calls[-1] == ("PATCH", d)
    assert seen[-1][2]["metadata"]["annotations"] == {ann.REBALANCE_TARGET: None}


def test_a_what_if_policy_plans_the_moves_it_would_cause(tmp_path, capsys):
    # no policy in the cluster: two web pods share n1, and only the what-if's ONE_PER_HOST moves one
    busy = _cluster(
        tmp_path, cn("n1"), cn("n2"), web("web-a", "n1"), web("web-b", "n1", started="2026-12-01T11:00:00Z")
    )
    assert main(["rebalance", "--cluster", busy, "-n", "shop"]) == 0
    capsys.readouterr()
    what_if = tmp_path / "one.yaml"
    what_if.write_text(yaml.safe_dump(ONE_PER_HOST))
    assert main(["rebalance", "--cluster", busy, "-n", "shop", "--policy", str(what_if)]) == 1
    assert "~ shop/web-b: n1 -> n2" in capsys.readouterr().out
