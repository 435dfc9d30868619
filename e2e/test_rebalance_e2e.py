"""`berth rebalance --live --apply` on a control plane whose workloads run (kube-controller-manager,
kwok's simulated kubelets) with berth-scheduler placing the replacements:

- a Deployment under ONE_PER_HOST whose pods were bound by hand two to a node: the rebalance evicts
  one of each pair, a PodDisruptionBudget with maxUnavailable 1 refuses the second eviction of a round
  (429: it is skipped and done in the next round), each replacement is placed by berth-scheduler on
  the node the plan named, and afterwards berth audit finds nothing and a further round evicts nothing;
- nothing is evicted when no node would take the replacement.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, ready, until, with_kwok_nodes

ROOT = Path(__file__).resolve().parent.parent
NODES = [f"w-{i}" for i in range(5)]
APP = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with with_kwok_nodes({name: {"pool": "a" if i < 2 else "b"} for i, name in enumerate(NODES)}) as made:
        yield made


def _one_per_host(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one-per-host", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "policy": {"type": "ONE_PER_HOST"},
        },
    }


def _policy_ready(stack: Stack, ns: str) -> bool:
    policy = stack.cp.kubectl_json("get", "placementpolicy", "one-per-host", "-n", ns)
    conditions = policy.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _planted(stack: Stack, ns: str, replicas: int, *, only: list[str], pool: str | None = None) -> None:
    """A Deployment whose replicas berth-scheduler placed on the nodes `only` while the others were
    cordoned, under no rule; the ONE_PER_HOST policy is applied after the fact, and the nodes are
    uncordoned. Plus a pod bound by hand next to them, which no controller would replace."""
    stack.cp.kubectl("create", "namespace", ns)
    others = [n for n in NODES if n not in only]
    for name in others:
        stack.cp.kubectl("cordon", name)
    template: dict[str, Any] = {
        "metadata": {"labels": {**APP, "replica": "yes"}},
        "spec": {
            "schedulerName": "berth-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "web", "image": "registry.example/web:1", "resources": {"requests": {"cpu": "100m"}}}
            ],
            **({"nodeSelector": {"pool": pool}} if pool else {}),
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": APP}, "template": template},
    }
    try:
        stack.apply(deployment)
        until(f"{replicas} Ready pods", lambda: len([p for p in stack.pods(ns) if ready(p)]) == replicas)
    finally:
        for name in others:
            stack.cp.kubectl("uncordon", name)
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-by-hand", "namespace": ns, "labels": APP},
        "spec": {**json.loads(json.dumps(template["spec"])), "nodeName": only[0]},
    }
    stack.apply(bare, _one_per_host(ns))
    until("the policy Ready", lambda: _policy_ready(stack, ns))
    until("the pod bound by hand Ready", lambda: len([p for p in stack.pods(ns) if ready(p)]) == replicas + 1)


def test_rebalance_moves_one_of_each_pair_through_the_budget_to_the_planned_nodes(stack: Stack) -> None:
    ns = "rebalance"
    _planted(stack, ns, 4, only=["w-0", "w-1"])
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in stack.pods(ns)}
    assert sorted(Counter(before.values()).values()) == [2, 3]  # 2 + 2 replicas, and the bare pod
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": ns},
        # the replicas only: a pod without a controller would leave the budget without a status
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"replica": "yes"}}},
    }
    stack.apply(budget)
    until(
        "the budget allows one disruption",
        lambda: (
            stack.cp.kubectl_json("get", "pdb", "web", "-n", ns).get("status", {}).get("disruptionsAllowed")
            == 1
        ),
    )
    code, report = stack.berth("audit", "-n", ns)
    # audit reports the excess: of w-0's three pods two, of w-1's two one.
    assert code == 1 and len(report["violations"]["policy/placement-policy"]) == 3, report
    code, dry = stack.berth("rebalance", "-n", ns)
    assert code == 1 and len(dry["moves"]) == 2
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in stack.pods(ns)} == before  # a dry run
    (bare,) = [k for k in dry["kept"] if k["pod"] == f"{ns}/web-by-hand"]
    assert "no controller would replace it" in bare["why"]

    # Round 1 with berth-scheduler stopped, so that the first replacement stays Pending: one eviction,
    # and the budget (maxUnavailable 1) refuses the second (429) while the first pod's replacement is
    # not Ready. (With the scheduler running, a replacement on kwok is often Ready before the next
    # eviction, and the budget then allows it: both outcomes are the budget at work.)
    stack.cp.kill("berth-scheduler")
    try:
        code, first = stack.berth("rebalance", "-n", ns, "--apply")
    finally:
        stack.cp.revive("berth-scheduler")
    outcomes = Counter(e["outcome"] for e in first["evictions"])
    assert outcomes == {"evicted": 1, "budget": 1}, first["evictions"]
    moved = next(
        m for m, e in zip(first["moves"], first["evictions"], strict=True) if e["outcome"] == "evicted"
    )
    replacement = until(
        "the replacement Ready",
        lambda: next(
            (p for p in stack.pods(ns) if p["metadata"]["name"] not in before and ready(p)),
            None,
        ),
    )
    # berth-scheduler placed it, on the node the plan named, and its record says so.
    assert replacement["spec"]["nodeName"] == moved["to"]
    record = json.loads(replacement["metadata"]["annotations"]["berth.dev/placement"])
    assert record["planned"] is True
    events = stack.cp.kubectl_json("get", "events", "-n", ns, "--field-selector", "reason=Rebalanced")[
        "items"
    ]
    assert {e["involvedObject"]["kind"] for e in events} == {"Pod", "ReplicaSet"}
    assert all(moved["to"] in e["message"] and "policy/placement-policy" in e["message"] for e in events)

    # Later rounds, each once the budget allows again, until one plans nothing: the pod the budget
    # refused, then the replica next to the pod bound by hand (which stays: no controller).
    evicted = [moved["pod"]]
    for _ in range(4):
        until("the budget allows one disruption again", lambda: _allowed(stack, ns) == 1)
        code, later = stack.berth("rebalance", "-n", ns, "--apply")
        if not later["moves"]:
            break
        evicted += [
            m["pod"]
            for m, e in zip(later["moves"], later["evictions"], strict=True)
            if e["outcome"] == "evicted"
        ]
    else:
        raise AssertionError(f"rebalancing did not converge: {later}")
    assert code == 0 and later.get("evictions", []) == []
    assert len(evicted) == len(set(evicted)) == 3  # no pod evicted twice
    replicas = until(
        "4 Ready replicas",
        lambda: (
            (pods := [p for p in stack.pods(ns) if ready(p) and p["metadata"]["name"] != "web-by-hand"])
            and len(pods) == 4
            and pods
        ),
    )
    # One per node, none next to the pod bound by hand: nothing breaks ONE_PER_HOST any more.
    assert sorted(p["spec"]["nodeName"] for p in replicas) == ["w-1", "w-2", "w-3", "w-4"]
    assert stack.berth("audit", "-n", ns)[0] == 0


def _allowed(stack: Stack, ns: str) -> int | None:
    return stack.cp.kubectl_json("get", "pdb", "web", "-n", ns).get("status", {}).get("disruptionsAllowed")


def test_nothing_is_evicted_when_no_node_would_take_the_replacement(stack: Stack) -> None:
    ns = "stuck"
    # Pool a is two nodes; three pods of the app may go only there, one per node.
    _planted(stack, ns, 3, only=["w-0", "w-1"], pool="a")
    uids = sorted(p["metadata"]["uid"] for p in stack.pods(ns))
    code, report = stack.berth("rebalance", "-n", ns, "--apply")
    assert code == 1 and report["moves"] == []
    why = {k["pod"]: k["why"] for k in report["kept"]}
    assert "no controller would replace it" in why.pop(f"{ns}/web-by-hand")
    assert why and all("no node would take its replacement" in w for w in why.values()), why
    assert sorted(p["metadata"]["uid"] for p in stack.pods(ns)) == uids
