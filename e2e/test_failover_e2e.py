"""Failover between berth-scheduler replicas: two kube-schedulers with leader election, each with its
berth following its Lease (`berth serve --follow-lease`). The leading pair is killed (SIGKILL, both
processes) in the middle of a burst of a ONE_PER_HOST Deployment; the standby takes over, catching up by
the fence on its pod rather than listing the cluster again, and every pod ends placed, one per node, with
no violation.

150 nodes: kube-scheduler asks berth about a sample of 100 of them (numFeasibleNodesToFind), so as the
nodes fill up, replicas are handed over to free nodes outside the sample (berth.extender.sample), by
the leading berth before the kill and by the standby after it."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import ControlPlane
from stack import Stack, until

NODES = [f"f-{i:03d}" for i in range(150)]
REPLICAS = 140
APP = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[ControlPlane, dict[str, Stack]]]:
    cp = ControlPlane()
    cp.start()
    stacks = {name: Stack(cp, replica=name) for name in ("sched-a", "sched-b")}
    try:
        cp.start_controllers()
        for i, stack in enumerate(stacks.values()):
            stack.start(operator=i == 0)
        cp.create_nodes(NODES, cpu="4", memory="16Gi", kwok=True)
        for stack in stacks.values():
            stack.wait_nodes(len(NODES))
        yield cp, stacks
    finally:
        for stack in stacks.values():
            stack.stop()
        cp.stop()


def _holder(cp: ControlPlane) -> str:
    lease = cp.kubectl_json("get", "lease", "berth-scheduler", "-n", "kube-system", check=False)
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def test_the_standby_takes_over_mid_burst_with_no_violation(
    pair: tuple[ControlPlane, dict[str, Stack]],
) -> None:
    cp, stacks = pair
    holder = until("a holder of the berth-scheduler Lease", lambda: _holder(cp), timeout=60)
    leader = holder.split("_", 1)[0]
    assert leader in stacks, holder
    pods = next(iter(stacks.values())).pods  # the API server's pods, whichever stack asks
    ns = "failover"
    cp.kubectl("create", "namespace", ns)
    policy = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one-per-host", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "policy": {"type": "ONE_PER_HOST"},
        },
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(policy))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "template": {
                "metadata": {"labels": APP},
                "spec": {
                    "schedulerName": "berth-scheduler",
                    "containers": [{"name": "web", "image": "registry.example/web:1"}],
                },
            },
        },
    }
    time.sleep(2)  # the policy compiled and watched by both berths
    cp.kubectl("apply", "-f", "-", input=json.dumps(deployment))
    # Mid-burst: once a few replicas are bound, the leading scheduler and its berth die together.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(1 for p in pods(ns) if p["spec"].get("nodeName")) >= 5:
            break
        time.sleep(0.02)
    cp.kill(f"berth-scheduler-{leader}")
    stacks[leader].extender.kill()
    before = sum(1 for p in pods(ns) if p["spec"].get("nodeName"))
    assert before < REPLICAS, "the burst ended before the leader was killed"
    standby = next(name for name in stacks if name != leader)

    def all_placed() -> list[dict[str, Any]] | None:
        current = pods(ns)
        placed = [p for p in current if p["spec"].get("nodeName")]
        return placed if len(current) == REPLICAS and len(placed) == REPLICAS else None

    placed = until(f"all {REPLICAS} replicas placed", all_placed, timeout=120)
    assert len(placed) == REPLICAS, f"{len(placed)} of {REPLICAS} placed"
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    assert max(per_node.values()) == 1, per_node  # ONE_PER_HOST held through the failover
    assert _holder(cp).split("_", 1)[0] == standby
    # the standby's view was warm: it caught up by the fence on its pod, not by listing the cluster again
    log = stacks[standby].extender.log.read_text()
    assert "caught up with the watch" in log and "listing the cluster again" not in log
    fence = cp.kubectl_json("get", "pod", stacks[standby].fence_pod, "-n", "kube-system")
    assert any(c["type"] == "berth.dev/LeaseTaken" for c in fence["status"]["conditions"])
    # the standby placed the rest: its berth wrote the placement record on them
    records = [p for p in placed if "berth.dev/placement" in p["metadata"].get("annotations", {})]
    assert len(records) == REPLICAS
    # kube-scheduler's sample was too thin for the later replicas: some were handed over past it
    handed = cp.kubectl_json("get", "events", "-n", ns, "--field-selector", "reason=HandedOver")["items"]
    assert handed, "no replica was handed over past kube-scheduler's sample"
