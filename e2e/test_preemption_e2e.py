"""Preemption through berth's preempt verb, on a control plane whose pods run (kube-controller-manager
and kwok: evicted pods are deleted for real).

kube-scheduler v1.36 proposes a node for preemption only where its own filters need victims, so every
node here is also short of CPU for the preemptor: kube's dry run frees the CPU, berth decides what its
rules need besides.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import ControlPlane
from stack import Stack

LOW, HIGH = "berth-e2e-low", "berth-e2e-high"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    cp = ControlPlane()
    cp.start()
    stack = Stack(cp)
    try:
        cp.start_controllers()
        stack.start()
        for name, value in ((LOW, 10), (HIGH, 1000)):
            cp.kubectl(
                "apply",
                "-f",
                "-",
                input=json.dumps(
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": name},
                        "value": value,
                    }
                ),
            )
        yield stack
    finally:
        stack.stop()
        cp.stop()


_cases = 0


def _case(stack: Stack, nodes: list[str]) -> str:
    """A namespace of its own, and the case's nodes (kwok's, 2 CPU each) as the only ones."""
    global _cases
    _cases += 1
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    for name in nodes:
        cp.create_node(f"{name}-{_cases}", cpu="2", memory="8Gi", kwok=True)
    _wait_seen(stack, len(nodes))
    ns = f"pre-{_cases}"
    cp.kubectl("create", "namespace", ns)
    return ns


def _wait_seen(stack: Stack, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{stack.url}/metrics", timeout=2) as response:
            if f"berth_cache_nodes {float(count)}" in response.read().decode():
                return
        time.sleep(0.3)
    raise AssertionError("berth's cache did not see the nodes")


def _pod(
    name: str,
    ns: str,
    *,
    priority: str,
    cpu: str,
    node: str | None = None,
    tags=None,
    affinity=None,
    labels=None,
) -> dict[str, Any]:
    annotations = {}
    if tags:
        annotations["berth.dev/tags"] = json.dumps(tags)
    if affinity:
        annotations["berth.dev/affinity"] = json.dumps(affinity)
    spec: dict[str, Any] = {
        "schedulerName": "berth-scheduler",
        "priorityClassName": priority,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "c", "image": "registry.example/x:1", "resources": {"requests": {"cpu": cpu}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations, "labels": labels or {}},
        "spec": spec,
    }


def _apply(stack: Stack, *objects: dict[str, Any]) -> None:
    for obj in objects:
        stack.cp.kubectl("apply", "-f", "-", input=json.dumps(obj))


def _names(stack: Stack, ns: str) -> dict[str, str]:
    """Pod name -> its node ("" while pending), pods being deleted left out."""
    pods = stack.cp.kubectl_json("get", "pods", "-n", ns)["items"]
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    }


def _until(what: str, check: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: not reached in {timeout}s (last: {last})")


def _running(stack: Stack, ns: str, name: str) -> bool:
    pods = stack.cp.kubectl_json("get", "pods", "-n", ns, "--field-selector", f"metadata.name={name}")[
        "items"
    ]
    return bool(pods) and pods[0].get("status", {}).get("phase") == "Running"


NO_BATCH = {"require_without_tag": ["batch"]}


def test_a_lower_priority_pod_with_the_excluded_tag_is_evicted_with_kubes_victim(stack: Stack) -> None:
    ns = _case(stack, ["a"])
    node = "a-1"
    _apply(
        stack,
        _pod("filler", ns, priority=LOW, cpu="1500m", node=node),
        _pod("batch", ns, priority=LOW, cpu="100m", node=node, tags=["batch"]),
    )
    _until("the running pods", lambda: _running(stack, ns, "filler") and _running(stack, ns, "batch"))
    _apply(stack, _pod("urgent", ns, priority=HIGH, cpu="1", affinity=NO_BATCH))
    placed = _until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
    assert placed == {"urgent": node}


def test_the_filler_of_a_node_berth_refuses_survives_and_the_other_node_is_preempted(stack: Stack) -> None:
    """Two full nodes: on one a higher-priority pod carries the excluded tag (berth refuses it whatever is
    evicted), on the other a low-priority filler only. Only the second filler goes."""
    ns = _case(stack, ["kept", "freed"])
    kept, freed = "kept-2", "freed-2"
    _apply(
        stack,
        _pod("keeper", ns, priority=LOW, cpu="1500m", node=kept),
        _pod("guard", ns, priority=HIGH, cpu="100m", node=kept, tags=["batch"]),
        _pod("filler", ns, priority=LOW, cpu="1500m", node=freed),
    )
    _until("the running pods", lambda: all(_running(stack, ns, n) for n in ("keeper", "guard", "filler")))
    _apply(stack, _pod("urgent", ns, priority=HIGH, cpu="1", affinity=NO_BATCH))
    placed = _until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
    assert placed["urgent"] == freed
    assert placed.get("keeper") == kept and placed.get("guard") == kept  # no eviction for nothing
    assert "filler" not in placed


def test_no_eviction_loop_a_pod_evicted_for_a_preemptor_does_not_preempt_back(stack: Stack) -> None:
    ns = _case(stack, ["a"])
    node = "a-3"
    web = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}
    _apply(stack, _pod("filler", ns, priority=LOW, cpu="1500m", node=node, labels=web))
    _until("the filler runs", lambda: _running(stack, ns, "filler"))
    _apply(stack, _pod("urgent", ns, priority=HIGH, cpu="1500m"))
    _until("urgent placed", lambda: _names(stack, ns).get("urgent") == node)
    # The filler comes back (as its controller would make it again): lower priority, it waits.
    _apply(stack, _pod("filler-again", ns, priority=LOW, cpu="1500m", labels=web))
    time.sleep(5)
    names = _names(stack, ns)
    assert names.get("urgent") == node and names.get("filler-again") == ""
