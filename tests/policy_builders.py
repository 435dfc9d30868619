"""PlacementPolicy objects for tests, and decisions on views that hold them (the policies go through
ClusterView.upsert_policy, as the snapshot loader and the live cache put them there)."""

from __future__ import annotations

from typing import Any

from berth.cluster.view import ClusterView
from berth.engine import Decision, decide
from berth.pipeline import default_pipeline
from tests.builders import to_pod, view

ALL_PODS: dict[str, Any] = {}


def placement_policy(
    name: str,
    policy: dict[str, Any],
    *,
    namespace: str = "default",
    selector: dict[str, Any] | None = ALL_PODS,
    generation: int | None = None,
) -> dict[str, Any]:
    """A PlacementPolicy object; by default its selector `{}` governs every pod of the namespace
    (pass selector=None for one that only pods naming it in berth.dev/placement-policy use)."""
    spec: dict[str, Any] = {"policy": policy}
    if selector is not None:
        spec["selector"] = dict(selector)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if generation is not None:
        meta["generation"] = generation
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": meta, "spec": spec}


def app(name: str, version: str | None = "1.0", **extra: str) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": name, **extra}
    if version is not None:
        labels["app.kubernetes.io/version"] = version
    return labels


def policy_view(*objects: dict[str, Any]) -> ClusterView:
    v = view(*(o for o in objects if o["kind"] != "PlacementPolicy"))
    for obj in objects:
        if obj["kind"] == "PlacementPolicy":
            v.upsert_policy(obj)
    return v


def place(pod_obj: dict[str, Any], *objects: dict[str, Any], seed: int = 0) -> Decision:
    return decide(to_pod(pod_obj), policy_view(*objects), default_pipeline(offline=True), seed=seed)


def reasons(decision: Decision) -> dict[str, Any]:
    """Node name -> its one reason (None when the node passed)."""
    return {n.name: (n.reasons[0] if n.reasons else None) for n in decision.nodes}
