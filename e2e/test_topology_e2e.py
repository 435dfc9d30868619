"""Rules per topology domain on a control plane whose workloads run (kube-controller-manager, kwok's
simulated kubelets), berth-scheduler placing the pods:

- a Deployment of 4 replicas under ONE_PER_HOST per zone on 3 zones: 3 are bound, one in each zone, and
  the fourth stays Pending with an event naming the zone rule;
- two replicas bound in one zone before the per-zone policy existed: `berth audit` names the zone and
  the pod the younger collides with, and `berth rebalance --apply` moves it out of that zone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane
from stack import Stack, until

ROOT = Path(__file__).resolve().parent.parent
ZONE = "topology.kubernetes.io/zone"
NODES = {"z-a1": "a", "z-a2": "a", "z-b1": "b", "z-b2": "b", "z-c1": "c", "z-c2": "c"}
APP = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    cp = ControlPlane()
    cp.start()
    stack = Stack(cp)
    try:
        cp.start_controllers()
        stack.start()
        for name, zone in NODES.items():
            cp.create_node(name, cpu="4", memory="16Gi", kwok=True, labels={ZONE: zone})
        stack.wait_nodes(len(NODES))
        yield stack
    finally:
        stack.stop()
        cp.stop()


def _apply(stack: Stack, *objects: dict[str, Any]) -> None:
    stack.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def _berth(stack: Stack, *args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            *args,
            "--live",
            "--output",
            "json",
            "--kubeconfig",
            _config(stack),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def _config(stack: Stack) -> str:
    return str(stack.cp.kubeconfig)


def _pods(stack: Stack, ns: str) -> list[dict[str, Any]]:
    items = stack.cp.kubectl_json("get", "pods", "-n", ns)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


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
    _apply(stack, _per_zone(ns))
    until("the policy Ready", lambda: _policy_ready(stack, ns))
    _apply(stack, _deployment(ns, 4))
    bound = until(
        "3 replicas bound",
        lambda: (
            (pods := [p for p in _pods(stack, ns) if p["spec"].get("nodeName")]) and len(pods) == 3 and pods
        ),
    )
    assert sorted(_zone_of(stack, p) for p in bound) == ["a", "b", "c"]
    (pending,) = [p for p in _pods(stack, ns) if not p["spec"].get("nodeName")]
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
        _apply(stack, _deployment(ns, 2))
        until("2 Ready replicas in zone a", lambda: len([p for p in _pods(stack, ns) if _ready(p)]) == 2)
    finally:
        for name in others:
            stack.cp.kubectl("uncordon", name)
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in _pods(stack, ns)}
    assert {NODES[n] for n in before.values()} == {"a"}
    _apply(stack, _per_zone(ns))
    until("the policy Ready", lambda: _policy_ready(stack, ns))

    code, report = _berth(stack, "audit", "-n", ns)
    (found,) = report["violations"]["policy/placement-policy"]
    assert code == 1
    assert "zone a (topology.kubernetes.io/zone) already runs" in found["reason"]
    assert len(found["collidesWith"]) == 1 and found["collidesWith"][0] != found["pod"]

    code, done = _berth(stack, "rebalance", "-n", ns, "--apply")
    (move,) = done["moves"]
    assert move["pod"] == found["pod"] and NODES[move["to"]] != "a"
    assert [e["outcome"] for e in done["evictions"]] == ["evicted"]
    replicas = until(
        "2 Ready replicas in two zones",
        lambda: (
            (pods := [p for p in _pods(stack, ns) if _ready(p)])
            and len(pods) == 2
            and len({_zone_of(stack, p) for p in pods}) == 2
            and pods
        ),
    )
    assert any(p["spec"]["nodeName"] == move["to"] for p in replicas)
    assert _berth(stack, "audit", "-n", ns)[0] == 0
