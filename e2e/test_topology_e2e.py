"""Rules per topology domain on a control plane whose workloads run (kube-controller-manager, kwok's
simulated kubelets), berth-scheduler placing the pods:

- a Deployment of 4 replicas under ONE_PER_HOST per zone on 3 zones: 3 are bound, one in each zone, and
  the fourth stays Pending with an event naming the zone rule;
- two replicas bound in one zone before the per-zone policy existed: `berth audit` names the zone and
  the pod the younger collides with, and `berth rebalance --apply` moves it out of that zone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, ready, until, with_kwok_nodes

ROOT = Path(__file__).resolve().parent.parent
ZONE = "topology.kubernetes.io/zone"
NODES = {"z-a1": "a", "z-a2": "a", "z-b1": "b", "z-b2": "b", "z-c1": "c", "z-c2": "c"}
APP = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with with_kwok_nodes({name: {ZONE: zone} for name, zone in NODES.items()}) as made:
        yield made


def _per_zone(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one-per-zone", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "policy": {"type": "ONE_PER_HOST", "topologyKey": ZONE},
        },
    }


def _policy_ready(stack: Stack, ns: str) -> bool:
    policy = stack.cp.kubectl_json("get", "placementpolicy", "one-per-zone", "-n", ns)
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in policy.get("status", {}).get("conditions", [])
    )


def _deployment(ns: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": APP},
            "template": {
                "metadata": {"labels": APP},
                "spec": {
                    "schedulerName": "berth-scheduler",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.example/web:1",
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            },
        },
    }


def _zone_of(stack: Stack, pod: dict[str, Any]) -> str:
    return NODES[pod["spec"]["nodeName"]]


def test_four_replicas_one_per_zone_on_three_zones_place_three_and_leave_one_pending(stack: Stack) -> None:
    ns = "per-zone"
    stack.cp.kubectl("create", "namespace", ns)
    stack.apply(_per_zone(ns))
    until("the policy Ready", lambda: _policy_ready(stack, ns))
    stack.apply(_deployment(ns, 4))
    bound = until(
        "3 replicas bound",
        lambda: (
            (pods := [p for p in stack.pods(ns) if p["spec"].get("nodeName")]) and len(pods) == 3 and pods
        ),
    )
    assert sorted(_zone_of(stack, p) for p in bound) == ["a", "b", "c"]
    (pending,) = [p for p in stack.pods(ns) if not p["spec"].get("nodeName")]
    name = pending["metadata"]["name"]

    def refused() -> list[str]:
        events = stack.cp.kubectl_json(
            "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}"
        )
        return [
            e["message"]
            for e in events["items"]
            if e["reason"] in ("FailedPlacement", "FailedScheduling") and ZONE in e["message"]
        ]

    messages = until("an event naming the zone rule", refused)
    assert any("ONE_PER_HOST" in m and "already runs" in m for m in messages), messages
    time.sleep(3)  # still Pending a while later: no zone is free
    assert not stack.cp.kubectl_json("get", "pod", name, "-n", ns)["spec"].get("nodeName")


def test_rebalance_moves_the_younger_of_two_replicas_out_of_their_zone(stack: Stack) -> None:
    ns = "two-in-a-zone"
    stack.cp.kubectl("create", "namespace", ns)
    others = [n for n, z in NODES.items() if z != "a"]
    for name in others:
        stack.cp.kubectl("cordon", name)
    try:
        stack.apply(_deployment(ns, 2))
        until("2 Ready replicas in zone a", lambda: len([p for p in stack.pods(ns) if ready(p)]) == 2)
    finally:
        for name in others:
            stack.cp.kubectl("uncordon", name)
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in stack.pods(ns)}
    assert {NODES[n] for n in before.values()} == {"a"}
    stack.apply(_per_zone(ns))
    until("the policy Ready", lambda: _policy_ready(stack, ns))

    code, report = stack.berth("audit", "-n", ns)
    (found,) = report["violations"]["policy/placement-policy"]
    assert code == 1
    assert "zone a (topology.kubernetes.io/zone) already runs" in found["reason"]
    assert len(found["collidesWith"]) == 1 and found["collidesWith"][0] != found["pod"]

    code, done = stack.berth("rebalance", "-n", ns, "--apply")
    (move,) = done["moves"]
    assert move["pod"] == found["pod"] and NODES[move["to"]] != "a"
    assert [e["outcome"] for e in done["evictions"]] == ["evicted"]
    replicas = until(
        "2 Ready replicas in two zones",
        lambda: (
            (pods := [p for p in stack.pods(ns) if ready(p)])
            and len(pods) == 2
            and len({_zone_of(stack, p) for p in pods}) == 2
            and pods
        ),
    )
    assert any(p["spec"]["nodeName"] == move["to"] for p in replicas)
    assert stack.berth("audit", "-n", ns)[0] == 0
