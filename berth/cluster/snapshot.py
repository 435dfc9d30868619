"""Cluster snapshots: what `kubectl get nodes,pods,placementpolicies -A -o yaml` writes (add
`services,replicasets,statefulsets,namespaces` for kube's default spreading by workload).

A file holds a Kubernetes `List`, one object, or several YAML documents (lists may nest). Nodes, pods
and PlacementPolicy objects (compiled) become the view; the policies are also kept as written.
Services, ReplicaSets, StatefulSets, ReplicationControllers and Namespaces give the selectors and labels
kube-scheduler's default spreading and pod affinity read.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.errors import SnapshotError

# What kube's default spreading and pod affinity read besides nodes and pods (ClusterView.upsert_workload).
WORKLOAD_KINDS = (
    "Service",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Namespace",
    "PodDisruptionBudget",
)
# libyaml when PyYAML was built with it: the pure-Python loader takes minutes on 150k pods.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every object in a YAML or JSON file, with `List` kinds flattened."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read: {exc.strerror}", source=source) from exc
    docs = _json_documents(data)
    if docs is None:
        try:
            docs = [d for d in yaml.load_all(data.decode("utf-8"), Loader=_YAML_LOADER) if d is not None]
        except yaml.YAMLError as exc:
            raise SnapshotError(f"not valid YAML or JSON: {exc}", source=source) from exc
    return list(_flatten(docs, source))


def _json_documents(data: bytes) -> list[Any] | None:
    """The document of a JSON file (what `kubectl get -o json` writes), read at JSON speed; None
    when the file is not JSON (YAML reads it, and names any error)."""
    if data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return [] if value is None else [value]


def _flatten(docs: list[Any], source: str) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if not isinstance(doc, dict):
            raise SnapshotError(f"expected Kubernetes objects, found {type(doc).__name__}", source=source)
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            yield from _flatten(doc["items"], source)
        else:
            yield doc


@dataclass
class Snapshot:
    view: ClusterView
    policies: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    namespace: str = "default"  # of names without one: a live cluster's is the kubeconfig context's


def load_snapshot(path: str | Path) -> Snapshot:
    """A ClusterView of the nodes, pods and PlacementPolicies in a file, and the policies as written."""
    # Loading makes hundreds of thousands of objects that all live on, none of them garbage: the
    # collector would walk them again and again (half the load time of 50k pods) to free nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(path)
    finally:
        if enabled:
            gc.enable()


def _load(path: str | Path) -> Snapshot:
    objects = read_documents(path)
    view = ClusterView()
    policies: list[dict[str, Any]] = []
    pods = []
    for obj in objects:
        kind = obj.get("kind")
        try:
            if kind == "Node":
                view.upsert_node(node_from_k8s(obj))
            elif kind == "Pod":
                pods.append(pod_from_k8s(obj))
            elif kind == "PlacementPolicy":
                policies.append(obj)
                view.upsert_policy(obj)  # an invalid one is kept, not Ready: the pods it governs are refused
            elif kind in WORKLOAD_KINDS:
                view.upsert_workload(obj)
        except SnapshotError as exc:
            raise SnapshotError(exc.message, source=str(path)) from exc
    for pod in pods:
        view.add_pod(pod)
    return Snapshot(view=view, policies=policies, source=str(path))
