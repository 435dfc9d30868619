"""Kubernetes objects for tests, written the way kubectl shows them, and views built from them
through the same converters the snapshot loader and the live cache use."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.configure import build_pipeline
from berth.engine import Decision, decide
from berth.vocab.alloc.config import AllocatorConfig


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    tags: tuple[str, ...] = (),
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    all_labels.update({f"tag.berth.dev/{t}": "" for t in tags})
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    tags: list[str] | None = None,
    affinity: Any = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    phase: str = "Running",
    uid: str | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if tags is not None:
        ann["berth.dev/tags"] = json.dumps(tags)
    if affinity is not None:
        ann["berth.dev/affinity"] = affinity if isinstance(affinity, str) else json.dumps(affinity)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    body: dict[str, Any] = {"containers": [container], **(spec or {})}
    if node:
        body["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": ann}
    if labels:
        meta["labels"] = labels
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body,
        "status": {"phase": phase if node else "Pending"},
    }


def view(*objects: dict[str, Any]) -> ClusterView:
    """The world of a test: a ClusterView of its nodes, pods and PlacementPolicies (through
    upsert_policy, as the snapshot loader and the live cache put them there)."""
    v = ClusterView()
    for obj in objects:
        if obj["kind"] == "Node":
            v.upsert_node(node_from_k8s(obj))
    for obj in objects:
        if obj["kind"] == "Pod":
            v.add_pod(pod_from_k8s(obj))
        elif obj["kind"] == "PlacementPolicy":
            v.upsert_policy(obj)
    return v


def place(
    pod_obj: dict[str, Any],
    *objects: dict[str, Any],
    cfg: AllocatorConfig | None = None,
    seed: int = 0,
    kube_filters: bool = True,
) -> Decision:
    """decide() for the pod over view(*objects), on the chain of `cfg` (berth's default without one);
    kube_filters=False is the extender's chain (no kube/ steps)."""
    return decide(to_pod(pod_obj), view(*objects), build_pipeline(cfg, kube_filters=kube_filters), seed=seed)


def to_pod(obj: dict[str, Any]) -> Pod:
    return pod_from_k8s(obj)


def k8s_list(*objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}


def churn(
    live: ClusterView,
    changes: Sequence[tuple[Any, ...]],
    names: Sequence[str],
    make: Callable[..., dict[str, Any]],
) -> Iterator[list[dict[str, Any]]]:
    """Pods landing on and leaving `live`, as a property test draws them: each change is (land, the
    index of a node in `names`, what picks the pod..., decide now), and make(i, *picks, node) is that
    pod as kubectl shows it. Yields the pods placed so far each time a decision is due (and after the
    last change), for a fresh view of the same cluster to be built from them."""
    placed: dict[str, dict[str, Any]] = {}
    for i, (land, where, *picks, decide_now) in enumerate(changes):
        obj = make(i, *picks, names[where])
        key = f"{obj['metadata'].get('namespace') or 'default'}/{obj['metadata']['name']}"
        if land:
            live.add_pod(pod_from_k8s(obj))
            placed[key] = obj
        elif key in placed:
            live.remove_pod(key)
            del placed[key]
        if decide_now or i == len(changes) - 1:
            yield list(placed.values())
