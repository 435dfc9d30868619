"""Never worse than kube-scheduler, offline: for a pod that carries no berth rule, on nodes that carry
nothing berth reads, the nodes `berth simulate` finds feasible are exactly the nodes kube-scheduler's
filters accept (berth's kube/ steps, which the differential e2e test checks against the real
kube-scheduler). berth's own default chain adds no refusal where its rules say nothing.

One deliberate difference is kept out (docs/extender.md): the allocator sizes a pod by its limits
(its requests where it sets none), as sdc-designation sizes an instance, where kube counts requests. Here the
pods' limits are their requests, or absent, as for a Guaranteed pod or one that sets only requests.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.configure import KUBE, REGISTRY, build_pipeline
from berth.engine import Pipe, Pipeline, decide
from berth.vocab.pod import PodCompiler
from tests.test_fast_paths import TAINTS, _apply_kube, kube_specs, nodes

OFFLINE = build_pipeline(None, kube_filters=True)
KUBE_ONLY = Pipeline(chain=Pipe(tuple(REGISTRY[name]() for name in KUBE)), compile_pod=PodCompiler(None))


def _plain(node: dict[str, Any]) -> dict[str, Any]:
    """The node without anything berth reads: no berth.dev/ labels or annotations, no node-role."""
    out = copy.deepcopy(node)
    meta = out["metadata"]
    meta["labels"] = {
        k: v for k, v in meta.get("labels", {}).items() if "berth.dev" not in k and "node-role" not in k
    }
    meta["annotations"] = {}
    return out


@st.composite
def plain_pods(draw: st.DrawFn, name: str, node: str | None = None) -> dict[str, Any]:
    """A pod with only what kube-scheduler reads: requests (and limits), tolerations, a nodeSelector,
    pod (anti-)affinity, spreading, host ports."""
    cpu = draw(st.sampled_from([None, "100m", "1", "3"]))
    memory = draw(st.sampled_from([None, "256Mi", "2Gi", "12Gi"]))
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        container["resources"] = {"requests": requests}
        if draw(st.booleans()):  # a Guaranteed pod
            container["resources"]["limits"] = dict(requests)
    spec: dict[str, Any] = {"containers": [container]}
    if draw(st.integers(0, 3)) == 0:
        spec["tolerations"] = [
            {"key": t["key"], "operator": "Exists"}
            for t in draw(st.lists(st.sampled_from(TAINTS), max_size=2))
        ]
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["z-a", "z-b"]))}
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": draw(st.sampled_from(["default", "other"])),
            "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/name": draw(st.sampled_from(["web", "db"]))},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        spec["nodeName"] = node
    owner = f"rs-{obj['metadata']['labels']['app.kubernetes.io/name']}" if draw(st.booleans()) else None
    out = _apply_kube(obj, draw(kube_specs()), owner)
    resources = out["spec"]["containers"][0].get("resources", {})
    if "limits" in resources:  # kube_specs may have set other requests
        resources["limits"] = dict(resources["requests"])
    return out


@st.composite
def worlds(draw: st.DrawFn) -> tuple[ClusterView, dict[str, Any]]:
    count = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(count)]
    view = ClusterView()
    for name in names:
        view.upsert_node(node_from_k8s(_plain(draw(nodes(name)))))
    for i in range(draw(st.integers(0, 10))):
        view.add_pod(pod_from_k8s(draw(plain_pods(f"p{i}", draw(st.sampled_from(names))))))
    return view, draw(plain_pods("new"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_simulate_finds_feasible_exactly_the_nodes_kubes_filters_accept(world) -> None:
    view, obj = world
    pod = pod_from_k8s(obj)
    berth = decide(pod, view, OFFLINE, seed=1)
    kube = decide(pod, view, KUBE_ONLY, seed=1)
    assert berth.error is None or berth.error.code == 409, berth.error
    feasible = {n.name for n in berth.nodes if n.feasible}
    accepted = {n.name for n in kube.nodes if n.feasible}
    refused = {n: berth.failures().get(n) for n in accepted - feasible}
    assert feasible == accepted, refused
