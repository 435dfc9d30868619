"""A preference somebody wrote outranks a default nobody chose, checked against the real kube-scheduler:
the same pods placed by kube-scheduler and by berth-scheduler on the same nodes, one after the other.

- the pod's preferred pod affinity to pods its namespace already runs (berth's spreading by owner,
  a default, used to set those nodes aside);
- the running pods' preferred terms that select the new pod (kube's symmetry);
- three replicas with preferred pod affinity to a cache pod;
- an allocator configuration that packs (weight_unreserved_ram: -2) against kube-scheduler with
  NodeResourcesFit's MostAllocated strategy: the operator's strategy, not kube's LeastAllocated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane
from stack import Stack, until

KUBE, BERTH = "default-scheduler", "berth-scheduler"
KUBE_PACKING, BERTH_PACKING = "kube-most-allocated", "berth-packing"
HOSTNAME = "kubernetes.io/hostname"

MOST_ALLOCATED = """
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
"""
PACKING = {
    "defaults": {
        "weight_unreserved_ram": -2,
        "weight_unreserved_disk": 0,
        "weight_current_platform": 0,
        "weight_next_reboot": 0,
        "weight_uniform_random": 0,
        "filter_large_servers": False,
    }
}


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Stack]]:
    cp = ControlPlane()
    cp.start()
    config = tmp_path_factory.mktemp("ranking") / "allocator.yaml"
    config.write_text(yaml.safe_dump(PACKING))
    plain = Stack(cp)
    packing = Stack(cp, scheduler=BERTH_PACKING, serve_args=("--config", str(config)))
    try:
        plain.start()
        packing.start(operator=False)
        cp.start_scheduler(ControlPlane.scheduler_config(KUBE), name="kube-default-scheduler")
        most = ControlPlane.scheduler_config(KUBE_PACKING) + MOST_ALLOCATED.lstrip("\n")
        cp.start_scheduler(most, name=KUBE_PACKING)
        yield plain, packing
    finally:
        packing.stop()
        plain.stop()
        cp.stop()


_cases = 0


def _nodes(stack: Stack, shapes: list[tuple[str, str, dict[str, str]]]) -> list[str]:
    """The case's nodes (name, memory, labels; 4 CPU each), and no other."""
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    for name, memory, labels in shapes:
        cp.create_node(name, cpu="4", memory=memory, labels=labels)
    stack.wait_nodes(len(shapes))
    return [name for name, _, _ in shapes]


def _pod(
    name: str, ns: str, scheduler: str, *, labels=None, affinity=None, node=None, memory="128Mi"
) -> dict:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": memory}}}
        ],
    }
    if affinity:
        spec["affinity"] = affinity
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": spec,
    }


def _place(stack: Stack, ns: str, running: list[dict], new: list[dict]) -> dict[str, str]:
    """The running pods, then each new pod, waited for: pod name -> node."""
    cp = stack.cp
    cp.kubectl("create", "namespace", ns)
    for obj in running:
        cp.kubectl(
            "apply", "-f", "-", input=json.dumps({**obj, "metadata": {**obj["metadata"], "namespace": ns}})
        )
    placed = {}
    for obj in new:
        body = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
        cp.kubectl("apply", "-f", "-", input=json.dumps(body))
        placed[obj["metadata"]["name"]] = _wait(cp, ns, obj["metadata"]["name"])
    cp.kubectl("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0", "--wait=true")
    return placed


def _wait(cp: ControlPlane, ns: str, name: str, timeout: float = 30) -> str:
    return until(
        f"{ns}/{name} placed",
        lambda: cp.kubectl_json("get", "pod", "-n", ns, name)["spec"].get("nodeName"),
        timeout,
        every=0.1,
    )


def _both(stack: Stack, running, new, kube: str = KUBE, berth: str = BERTH) -> tuple[dict, dict]:
    global _cases
    _cases += 1

    def as_(scheduler: str, pods: list[dict]) -> list[dict]:
        return [{**p, "spec": {**p["spec"], "schedulerName": scheduler}} for p in pods]

    placed_kube = _place(stack, f"rank-{_cases}-kube", as_(kube, running), as_(kube, new))
    placed_berth = _place(stack, f"rank-{_cases}-berth", as_(berth, running), as_(berth, new))
    return placed_kube, placed_berth


def _preferred(kind: str, weight: int, labels: dict[str, str], key: str = HOSTNAME) -> dict:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]
        }
    }


def test_preferred_pod_affinity_to_the_namespaces_own_pods_as_kube_scheduler(stacks) -> None:
    stack, _ = stacks
    nodes = _nodes(stack, [(f"n{i}", "16Gi", {}) for i in range(5)])
    api = {"app.kubernetes.io/name": "api"}
    running = [_pod(f"api-{i}", "", KUBE, labels=api, node=f"n{i}") for i in (0, 1, 3, 4)]
    new = [_pod("client", "", KUBE, affinity=_preferred("podAffinity", 100, api))]
    kube, berth = _both(stack, running, new)
    assert kube["client"] != "n2" and berth["client"] != "n2", (kube, berth)
    assert berth["client"] in nodes


def test_the_running_pods_preferred_terms_for_the_pod_as_kube_scheduler(stacks) -> None:
    stack, _ = stacks
    _nodes(
        stack,
        [
            ("node1", "16Gi", {"region": "China"}),
            ("node2", "16Gi", {"region": "India"}),
            ("node3", "16Gi", {}),
        ],
    )
    s1 = _preferred("podAffinity", 5, {"security": "S1"}, key="region")
    s2 = _preferred("podAffinity", 5, {"security": "S2"}, key="region")
    running = [
        _pod("p1", "", KUBE, affinity=s1, node="node1"),
        _pod("p2", "", KUBE, affinity=s2, node="node2"),
    ]
    new = [_pod("new", "", KUBE, labels={"security": "S1"})]
    kube, berth = _both(stack, running, new)
    assert kube == berth == {"new": "node1"}


def test_three_replicas_preferring_a_cache_land_beside_it_as_under_kube_scheduler(stacks) -> None:
    stack, _ = stacks
    _nodes(stack, [(f"n{i}", "16Gi", {}) for i in range(3)])
    running = [_pod("cache", "", KUBE, labels={"app": "cache"}, node="n1")]
    want = _preferred("podAffinity", 100, {"app": "cache"})
    new = [_pod(f"web-{i}", "", KUBE, labels={"app": "web"}, affinity=want) for i in range(3)]
    kube, berth = _both(stack, running, new)
    assert set(kube.values()) == set(berth.values()) == {"n1"}, (kube, berth)


def test_a_packing_configuration_places_as_kube_schedulers_most_allocated(stacks) -> None:
    _, packing = stacks
    _nodes(packing, [("r1", "8Gi", {}), ("r2", "32Gi", {}), ("r3", "16Gi", {})])
    new = [_pod("new", "", KUBE_PACKING, memory="1Gi")]
    kube, berth = _both(packing, [], new, kube=KUBE_PACKING, berth=BERTH_PACKING)
    assert kube == berth == {"new": "r1"}, (kube, berth)


def test_the_packing_configuration_says_it_replaces_kubes_resource_scores(stacks) -> None:
    _, packing = stacks
    log = Path(packing.extender.log).read_text()
    assert (
        "defaults.weight_unreserved_ram and defaults.weight_unreserved_disk replace kube-scheduler's" in log
    )
