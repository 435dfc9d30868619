"""A control plane whose workloads run: kube-controller-manager makes the pods of Deployments and
StatefulSets, kwok plays the kubelet of every node (pods Running and Ready, deletion completed), and
berth-scheduler places the pods.

- a Deployment's and a StatefulSet's replicas are placed by berth-scheduler and become Ready;
- a rolling update runs to the end under ONE_PER_HOST, never two pods of the app and version on a node;
- a PodDisruptionBudget gets its status (disruptionsAllowed) from the disruption controller;
- the chart installed with helm reaches Ready (its pods run on kwok's nodes: kwok runs no container, so
  this is the chart's objects, probes aside, as the controllers see them): two operator replicas, a
  budget that lets a drain take one, and `helm uninstall` finishing;
- with the operator gone, deleting the PlacementPolicy CRD finishes: no policy the operator handled
  carries a finalizer.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import render_chart
from controlplane import ControlPlane
from stack import Stack, ready, until, with_kwok_nodes

NODES = [f"w-{i}" for i in range(4)]
APP = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with with_kwok_nodes({name: {} for name in NODES}) as stack:
        stack.cp.start_scheduler(ControlPlane.scheduler_config(), name="default-scheduler")
        yield stack


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {
            "schedulerName": "berth-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "web", "image": "registry.example/web:1", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def _namespace(stack: Stack, name: str) -> str:
    stack.cp.kubectl("create", "namespace", name)
    return name


def test_a_deployments_and_a_statefulsets_replicas_are_placed_by_berth_and_run(stack: Stack) -> None:
    ns = _namespace(stack, "workloads")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template({"app": "web"}),
        },
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": _template({"app": "db"}),
        },
    }
    stack.apply(deployment, statefulset)
    for selector, count in (("app=web", 6), ("app=db", 3)):
        pods = until(
            f"{count} Ready pods of {selector}",
            lambda s=selector, c=count: (p := stack.pods(ns, s)) and len(p) == c and all(map(ready, p)) and p,
        )
        assert all(p["spec"]["nodeName"] in NODES for p in pods)
        # berth placed them: its placement record rides on every pod it bound.
        assert all("berth.dev/placement" in p["metadata"].get("annotations", {}) for p in pods)
    # kube's default spreading, inside berth's decision: the replicas of one ReplicaSet spread.
    spread = Counter(p["spec"]["nodeName"] for p in stack.pods(ns, "app=web"))
    assert max(spread.values()) - min(spread.get(n, 0) for n in NODES) <= 1


def test_a_rolling_update_runs_to_the_end_under_one_per_host(stack: Stack) -> None:
    ns = _namespace(stack, "rollout")
    policy = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one-per-host", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "policy": {"type": "ONE_PER_HOST"},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": _template(APP),
        },
    }
    stack.apply(policy)
    until("the policy Ready", lambda: _policy_ready(stack, ns))
    stack.apply(deployment)
    selector = "app.kubernetes.io/name=web"
    until("3 Ready replicas", lambda: len([p for p in stack.pods(ns, selector) if ready(p)]) == 3)
    # The update: a new image; the pods keep the app's name and version, so ONE_PER_HOST counts old and
    # new pods together and the surge pod must find the one free node.
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/web:2"
    stack.apply(deployment)
    seen_together = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = [p for p in stack.pods(ns, selector) if p["spec"].get("nodeName")]
        per_node = Counter(p["spec"]["nodeName"] for p in pods)
        seen_together = max(seen_together, max(per_node.values(), default=0))
        status = stack.cp.kubectl_json("get", "deployment", "web", "-n", ns)["status"]
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        if (
            status.get("updatedReplicas") == 3
            and status.get("readyReplicas") == 3
            and images == {"registry.example/web:2"}
            and len(pods) == 3
        ):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the rollout did not finish: {status}")
    assert seen_together == 1


def _policy_ready(stack: Stack, ns: str) -> bool:
    policy = stack.cp.kubectl_json("get", "placementpolicy", "one-per-host", "-n", ns)
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in policy.get("status", {}).get("conditions", [])
    )


def test_a_pod_disruption_budget_gets_its_status(stack: Stack) -> None:
    ns = _namespace(stack, "budget")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": ns},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "api"}},
            "template": _template({"app": "api"}),
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "api", "namespace": ns},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "api"}}},
    }
    stack.apply(deployment, budget)

    def allowed() -> Any:
        status = stack.cp.kubectl_json("get", "pdb", "api", "-n", ns).get("status", {})
        return status if status.get("currentHealthy") == 3 else None

    status = until("the budget's status", allowed)
    assert status["disruptionsAllowed"] == 1 and status["desiredHealthy"] == 2


def test_the_chart_installed_with_helm_reaches_ready(stack: Stack) -> None:
    cp = stack.cp
    assert cp.bin is not None and cp.kubeconfig is not None
    helm = [str(cp.bin / "helm"), f"--kubeconfig={cp.kubeconfig}"]
    # The chart's own scheduler is named apart from the test's berth-scheduler; its pods are placed by
    # the default scheduler this control plane also runs.
    install = [
        "install",
        "berth",
        str(render_chart.CHART),
        "--namespace",
        "berth-system",
        "--create-namespace",
    ]
    install += ["--set", "scheduler.name=berth-chart-scheduler", "--wait", "--timeout", "180s"]
    try:
        result = subprocess.run([*helm, *install], capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        deployments = cp.kubectl_json("get", "deployments", "-n", "berth-system")["items"]
        assert {d["metadata"]["name"] for d in deployments} >= {"berth-scheduler", "berth-operator"}
        for deployment in deployments:
            status = deployment.get("status", {})
            assert status.get("readyReplicas") == deployment["spec"]["replicas"], (
                deployment["metadata"],
                status,
            )
        operator = next(d for d in deployments if d["metadata"]["name"] == "berth-operator")
        assert operator["spec"]["replicas"] == 2
        # the disruption controller counts both operator replicas: a drain may take one, not both
        budget = cp.kubectl_json("get", "pdb", "berth-operator", "-n", "berth-system").get("status", {})
        assert budget.get("currentHealthy") == 2 and budget.get("disruptionsAllowed") == 1, budget
        result = subprocess.run([*helm, *uninstall_args()], capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        subprocess.run([*helm, *uninstall_args()], capture_output=True, timeout=180)  # if not yet


def uninstall_args() -> list[str]:
    return [
        "uninstall",
        "berth",
        "--namespace",
        "berth-system",
        "--ignore-not-found",
        "--wait",
        "--timeout",
        "120s",
    ]


def test_with_the_operator_gone_deleting_the_crd_finishes(stack: Stack) -> None:
    # The documented order: helm uninstall (the operator goes), then the CRD, which deletes every
    # PlacementPolicy. A policy the operator handled must not wait for it.
    ns = _namespace(stack, "uninstall")
    policy = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one-per-host", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "policy": {"type": "ONE_PER_HOST"}},
    }
    stack.apply(policy)
    until("the policy Ready", lambda: _policy_ready(stack, ns))
    policies = stack.cp.kubectl_json("get", "placementpolicies", "-A")["items"]
    assert len(policies) >= 2  # this one and the rolling update's
    assert all(not p["metadata"].get("finalizers") for p in policies), [p["metadata"] for p in policies]
    stack.operator.stop()
    result = stack.cp.kubectl("delete", "crd", "placementpolicies.berth.dev", "--timeout=60s", check=False)
    assert result.returncode == 0, result.stderr
    gone = stack.cp.kubectl("get", "crd", "placementpolicies.berth.dev", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
