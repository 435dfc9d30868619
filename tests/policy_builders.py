"""PlacementPolicy objects for tests, and the reasons of a decision as Reason objects (tests.builders
places a pod over a world that holds them)."""

from __future__ import annotations

from typing import Any

from berth.engine import Decision

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


def reasons(decision: Decision) -> dict[str, Any]:
    """Node name -> its one reason (None when the node passed)."""
    return {n.name: (n.reasons[0] if n.reasons else None) for n in decision.nodes}
