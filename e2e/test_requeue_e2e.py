"""A pod berth refused is tried again within seconds of the PlacementPolicy change that lets it in,
against kube-scheduler v1.36.3 and v1.38.0-beta.0.

kube-scheduler does not watch PlacementPolicies: without berth's retry such a pod waits for an
unrelated cluster event or kube's flush of unschedulable pods (5 minutes). The operator writes one
condition on the pod's status (berth.operator.policy_requeue); these tests pin that kube-scheduler moves an
unschedulable pod an extender refused back to its active queue on that update, so that an upstream
change fails here rather than for users.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from stack import VERSIONS, Stack, running, until

RETRY = "berth.dev/PlacementRetry"
WITHIN = 20.0  # seconds from the policy's change to the pod's binding
WEB = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module", params=list(VERSIONS.values()), ids=list(VERSIONS))
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with running(request.param) as stack:
        yield stack


_cases = 0


def _case(stack: Stack, nodes: int) -> tuple[str, list[str]]:
    """A namespace of its own and the case's nodes as the only ones."""
    global _cases
    _cases += 1
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    names = [f"n{i}-{_cases}" for i in range(nodes)]
    for name in names:
        cp.create_node(name, cpu="4", memory="8Gi")
    stack.wait_nodes(nodes)
    ns = f"requeue-{_cases}"
    cp.kubectl("create", "namespace", ns)
    return ns, names


def _pod(name: str, ns: str, *, labels: dict[str, str] | None = None, policy: str | None = None) -> dict:
    annotations = {"berth.dev/placement-policy": policy} if policy else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [{"name": "c", "image": "registry.example/x:1"}],
        },
    }


def _policy(name: str, ns: str, tree: dict[str, Any], selector: dict[str, Any] | None = None) -> dict:
    spec: dict[str, Any] = {"policy": tree}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _get(stack: Stack, kind: str, name: str, ns: str) -> dict[str, Any]:
    return stack.cp.kubectl_json("get", kind, name, "-n", ns)


def _unschedulable(stack: Stack, ns: str, name: str) -> bool:
    """kube-scheduler tried the pod and put it among its unschedulable pods."""
    conditions = _get(stack, "pod", name, ns).get("status", {}).get("conditions") or []
    return any(
        c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def _ready(stack: Stack, ns: str, name: str, generation: int = 1) -> bool:
    status = _get(stack, "placementpolicy", name, ns).get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready" and c["status"] == "True"]
    return bool(ready) and status.get("observedGeneration") == generation


def _bound_within(stack: Stack, ns: str, name: str, since: float) -> tuple[str, float]:
    node = until(f"{name} bound", lambda: _get(stack, "pod", name, ns)["spec"].get("nodeName"), timeout=60)
    return node, time.monotonic() - since


def _retried(stack: Stack, ns: str, name: str) -> dict[str, Any] | None:
    conditions = _get(stack, "pod", name, ns).get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == RETRY), None)


def test_a_pod_naming_a_policy_created_after_it_is_bound_within_seconds(stack: Stack) -> None:
    ns, _ = _case(stack, 2)
    stack.apply(_pod("waits", ns, policy="later"))
    until("the pod refused", lambda: _unschedulable(stack, ns, "waits"))
    time.sleep(2)  # well inside kube's 5-minute flush: only the retry can bring it back this soon
    stack.apply(_policy("later", ns, {"type": "ANY"}))
    start = time.monotonic()
    until("the policy Ready", lambda: _ready(stack, ns, "later"))
    node, took = _bound_within(stack, ns, "waits", start)
    assert node and took < WITHIN, f"bound {took:.1f}s after the policy was created"
    condition = _retried(stack, ns, "waits")
    assert condition is not None and "PlacementPolicy later created" in condition["message"]


def test_a_replica_one_per_host_left_pending_is_bound_within_seconds_of_the_policy_relaxed(
    stack: Stack,
) -> None:
    ns, nodes = _case(stack, 2)
    selector = {"matchLabels": {"app.kubernetes.io/name": "web"}}
    stack.apply(_policy("spread", ns, {"type": "ONE_PER_HOST"}, selector))
    until("the policy Ready", lambda: _ready(stack, ns, "spread"))
    time.sleep(2)  # the policy in berth's view
    names = ["web-0", "web-1", "web-2"]
    stack.apply(*(_pod(n, ns, labels=WEB) for n in names))
    placed = until(
        "two placed, one refused",
        lambda: (
            sum(bool(_get(stack, "pod", n, ns)["spec"].get("nodeName")) for n in names) == 2
            and any(_unschedulable(stack, ns, n) for n in names)
        ),
    )
    assert placed
    waiting = next(n for n in names if not _get(stack, "pod", n, ns)["spec"].get("nodeName"))
    time.sleep(2)
    stack.apply(_policy("spread", ns, {"type": "MAX_N_PER_HOST", "max": 2}, selector))
    start = time.monotonic()
    until("the relaxed policy Ready", lambda: _ready(stack, ns, "spread", generation=2))
    node, took = _bound_within(stack, ns, waiting, start)
    assert node in nodes and took < WITHIN, f"bound {took:.1f}s after the policy was relaxed"


def test_a_pod_waiting_for_a_neighbour_to_leave_is_bound_within_seconds_of_its_going(stack: Stack) -> None:
    """kube-scheduler retries a pod an extender refused on any pod event, the neighbour's deletion
    included, but it may do so before berth's view has the deletion, and then waits for minutes (this
    test caught it on v1.38). berth serve asks for the retry again once its view has it."""
    ns, nodes = _case(stack, 1)
    batch = _pod("batch", ns)
    batch["metadata"]["annotations"] = {"berth.dev/tags": '["batch"]'}
    batch["spec"]["nodeName"] = nodes[0]
    stack.apply(batch)
    waits = _pod("web", ns)
    waits["metadata"]["annotations"] = {"berth.dev/affinity": '{"require_without_tag": ["batch"]}'}
    stack.apply(waits)
    until("web refused", lambda: _unschedulable(stack, ns, "web"))
    time.sleep(2)
    stack.cp.kubectl("delete", "pod", "batch", "-n", ns, "--grace-period=0", "--force", "--wait=true")
    start = time.monotonic()
    node, took = _bound_within(stack, ns, "web", start)
    assert node == nodes[0] and took < WITHIN, f"bound {took:.1f}s after its neighbour went"
