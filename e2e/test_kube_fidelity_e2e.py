"""Never worse than kube-scheduler: the same workloads placed by kube's default scheduler and by
berth-scheduler on the same nodes of a real control plane, one after the other.

For pods that carry no berth rule, berth-scheduler must find the same pods placeable and the same ones
not (required pod anti-affinity, topology spread, taints), and spread them as kube's default profile
does: per node within the hostname skew kube's default spreading allows (3), per zone within its zone
skew (5). kube breaks ties at random, so the counts are compared within those skews, not exactly.

Each case creates its nodes afresh; kube's pods are deleted (forced: no kubelet ends them) before
berth-scheduler places the same pods again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane
from stack import Stack, running, until

KUBE = "default-scheduler"
BERTH = "berth-scheduler"
HOST_SKEW, ZONE_SKEW = 3, 5
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running() as stack:
        stack.cp.start_scheduler(ControlPlane.scheduler_config(KUBE), name="kube-default-scheduler")
        yield stack


def _nodes(stack: Stack, shapes: list[tuple[str, str, str, dict[str, str]]], taints: dict[str, str]) -> None:
    """The case's nodes, and no other: (name, cpu, memory, labels); `taints` by node name."""
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    alike: dict[tuple[str, str, str], list[str]] = {}
    for name, cpu, memory, labels in shapes:  # nodes of one shape in one go (through the API)
        alike.setdefault((cpu, memory, json.dumps(labels, sort_keys=True)), []).append(name)
    for (cpu, memory, labels), names in alike.items():
        cp.create_nodes(names, cpu=cpu, memory=memory, labels=json.loads(labels))
    for name, taint in taints.items():
        cp.kubectl("taint", "node", name, taint)
    stack.wait_nodes(len(shapes))


def _pod(name: str, ns: str, scheduler: str, spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    body = json.loads(json.dumps(spec))
    body["schedulerName"] = scheduler
    body.setdefault("containers", [{"name": "c", "image": "registry.example/none:1"}])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": body,
    }


def _place(stack: Stack, ns: str, scheduler: str, case: dict[str, Any]) -> dict[str, str | None]:
    """The case's running pods, then its new pods one at a time, each waited for (placed or refused):
    pod name -> node, None when it stays Pending."""
    cp = stack.cp
    for i, (node, spec, labels) in enumerate(case.get("running", [])):
        running = _pod(f"running-{i}", ns, scheduler, {**spec, "nodeName": node}, labels)
        cp.kubectl("apply", "-f", "-", input=json.dumps(running))
    placed: dict[str, str | None] = {}
    for i in range(case["count"]):
        name = f"new-{i}"
        cp.kubectl(
            "apply", "-f", "-", input=json.dumps(_pod(name, ns, scheduler, case["spec"], case["labels"]))
        )
        placed[name] = _wait(cp, ns, name)
    return placed


def _wait(cp: ControlPlane, ns: str, name: str, timeout: float = 20) -> str | None:
    def outcome() -> tuple[str | None] | None:
        """(its node,) once placed, (None,) once refused; None while neither."""
        pod = cp.kubectl_json("get", "pod", "-n", ns, name)
        if pod["spec"].get("nodeName"):
            return (pod["spec"]["nodeName"],)
        scheduled = [c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"]
        if scheduled and scheduled[0]["status"] == "False":
            return (None,)
        return None

    (node,) = until(f"{ns}/{name} placed or refused", outcome, timeout, every=0.1)
    return node


def _clear(stack: Stack, ns: str) -> None:
    stack.cp.kubectl("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0", "--wait=true")


def _zones(stack: Stack) -> dict[str, str]:
    nodes = stack.cp.kubectl_json("get", "nodes")["items"]
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE, "") for n in nodes}


def _compare(stack: Stack, case: dict[str, Any], ns: str) -> tuple[dict, dict]:
    kube = _place(stack, f"{ns}-kube", KUBE, case)
    _clear(stack, f"{ns}-kube")
    berth = _place(stack, f"{ns}-berth", BERTH, case)
    return kube, berth


def _simulated(stack: Stack, case: dict[str, Any], ns: str, tmp: Path) -> dict[str, str | None]:
    """What `berth simulate` says of the case's new pods on the cluster as it is before they come."""
    cp = stack.cp
    snapshot = cp.kubectl_json("get", "nodes,pods", "-A")
    (tmp / "cluster.json").write_text(json.dumps(snapshot))
    pods = [_pod(f"new-{i}", ns, BERTH, case["spec"], case["labels"]) for i in range(case["count"])]
    (tmp / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    argv = [sys.executable, "-m", "berth.cli", "simulate", "--cluster", str(tmp / "cluster.json")]
    argv += ["--pod", str(tmp / "pods.json"), "--output", "json", "--seed", "1"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    body = json.loads(result.stdout)
    decisions = body.get("decisions", [body])
    return {d["pod"].split("/", 1)[1]: d.get("chosen") for d in decisions}


def _spread(placed: dict[str, str | None], zones: dict[str, str] | None = None) -> Counter:
    nodes = [n for n in placed.values() if n]
    return Counter(zones[n] for n in nodes) if zones is not None else Counter(nodes)


def _within(kube: Counter, berth: Counter, skew: int) -> bool:
    return all(abs(kube[k] - berth[k]) <= skew for k in {*kube, *berth})


def _nodes_of(*shapes: tuple[str, str, str, str]) -> list[tuple[str, str, str, dict[str, str]]]:
    return [(name, cpu, memory, {ZONE: zone} if zone else {}) for name, cpu, memory, zone in shapes]


REQUESTS = {
    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]
}
HETERO = _nodes_of(
    ("big", "32", "128Gi", "z1"),
    ("mid-a", "16", "64Gi", "z1"),
    ("mid-b", "16", "64Gi", "z2"),
    ("small", "8", "32Gi", "z2"),
)
ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}
PREFERRED = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE},
            }
        ]
    },
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            }
        ]
    },
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
]

# More than 100 nodes: kube-scheduler stops its filter pass at 100 feasible nodes (berth-scheduler's
# profile samples as kube's default does) and asks berth about those only. A third are tainted
# NoSchedule, so the sample is the feasible nodes of a longer stretch.
SAMPLED = [(f"s{i:03d}", "8", "32Gi", {ZONE: f"z{i % 3}"}) for i in range(150)]

CASES: dict[str, dict[str, Any]] = {
    # kube's sample: required anti-affinity by hostname and zone spreading over 150 nodes, 50 tainted.
    "sampled-150-nodes": {
        "nodes": SAMPLED,
        "taints": {f"s{i:03d}": "dedicated=infra:NoSchedule" for i in range(0, 150, 3)},
        "spec": {**REQUESTS, "affinity": ANTI, "topologySpreadConstraints": SPREAD},
        "labels": {"app": "web"},
        "count": 12,
    },
    # The newcomer's case: no rule at all, nodes of different sizes each already running a pod.
    "no-rule-heterogeneous": {
        "nodes": HETERO,
        "running": [(n, REQUESTS, {"app": "old"}) for n, *_ in HETERO],
        "spec": REQUESTS,
        "labels": {"app": "web"},
        "count": 20,
    },
    # Required anti-affinity by hostname: one pod per node, the fourth stays Pending.
    "required-anti-affinity": {
        "nodes": _nodes_of(("a", "8", "32Gi", "z1"), ("b", "8", "32Gi", "z1"), ("c", "8", "32Gi", "z2")),
        "spec": {**REQUESTS, "affinity": ANTI},
        "labels": {"app": "web"},
        "count": 4,
    },
    # The running pods' own anti-affinity keeps the new pods off their nodes (kube's symmetry).
    "running-pods-anti-affinity": {
        "nodes": _nodes_of(("a", "8", "32Gi", "z1"), ("b", "8", "32Gi", "z1"), ("c", "8", "32Gi", "z2")),
        "running": [
            (
                "a",
                {
                    **REQUESTS,
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
                            ]
                        }
                    },
                },
                {"app": "db"},
            )
        ],
        "spec": REQUESTS,
        "labels": {"app": "web"},
        "count": 3,
    },
    # Zone spreading that must refuse: two zones of unequal size, maxSkew 1.
    "topology-spread-do-not-schedule": {
        "nodes": _nodes_of(("a", "8", "32Gi", "z1"), ("b", "8", "32Gi", "z1"), ("c", "1", "2Gi", "z2")),
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "400m", "memory": "512Mi"}}}
            ],
            "topologySpreadConstraints": SPREAD,
        },
        "labels": {"app": "web"},
        "count": 8,
    },
    # Preferred anti-affinity by zone and preferred node affinity.
    "preferred-affinity": {
        "nodes": [
            ("a", "8", "32Gi", {ZONE: "z1", "disk": "ssd"}),
            ("b", "8", "32Gi", {ZONE: "z1"}),
            ("c", "8", "32Gi", {ZONE: "z2"}),
            ("d", "8", "32Gi", {ZONE: "z3", "disk": "ssd"}),
        ],
        "spec": {**REQUESTS, "affinity": PREFERRED},
        "labels": {"app": "web"},
        "count": 9,
    },
    # PreferNoSchedule taints and a NoSchedule taint the pods do not tolerate.
    "taints": {
        "nodes": _nodes_of(("a", "8", "32Gi", ""), ("b", "8", "32Gi", ""), ("c", "8", "32Gi", "")),
        "taints": {"a": "spot=true:PreferNoSchedule", "c": "dedicated=infra:NoSchedule"},
        "spec": REQUESTS,
        "labels": {"app": "web"},
        "count": 6,
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_berth_scheduler_places_as_kubes_default_scheduler_where_berth_has_no_rule(
    stack: Stack, case: str, tmp_path: Path
) -> None:
    spec = CASES[case]
    _nodes(stack, spec["nodes"], spec.get("taints", {}))
    for suffix in ("kube", "berth", "simulate"):
        stack.cp.kubectl("create", "namespace", f"{case}-{suffix}")
    # berth simulate, offline, with the case's running pods, before either scheduler places anything.
    for i, (node, pod_spec, labels) in enumerate(spec.get("running", [])):
        running = _pod(f"running-{i}", f"{case}-simulate", BERTH, {**pod_spec, "nodeName": node}, labels)
        stack.cp.kubectl("apply", "-f", "-", input=json.dumps(running))
    simulated = _simulated(stack, spec, f"{case}-simulate", tmp_path)
    _clear(stack, f"{case}-simulate")
    kube, berth = _compare(stack, spec, case)

    def pending(placed: dict[str, str | None]) -> list[str]:
        return sorted(n for n, node in placed.items() if node is None)

    # The same feasibility: the same pods left Pending by kube, by berth-scheduler and by simulate.
    assert pending(kube) == pending(berth) == pending(simulated), (kube, berth, simulated)
    # Nothing on a node kube refuses (one with a NoSchedule taint), and the spread within kube's skews.
    refused = {n for n, taint in spec.get("taints", {}).items() if taint.endswith(":NoSchedule")}
    assert not set(_spread(berth)) & refused
    assert _within(_spread(kube), _spread(berth), HOST_SKEW), (_spread(kube), _spread(berth))
    assert _within(_spread(kube), _spread(simulated), HOST_SKEW), (_spread(kube), _spread(simulated))
    zones = _zones(stack)
    assert _within(_spread(kube, zones), _spread(berth, zones), ZONE_SKEW)
