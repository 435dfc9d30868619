"""Cluster snapshots: what `kubectl get nodes,pods,placementpolicies -A -o yaml` writes (add
`services,replicasets,statefulsets,namespaces` for kube's default spreading by workload).

A file holds a Kubernetes `List`, one object, or several YAML documents (lists may nest). Nodes, pods
and PlacementPolicy objects (compiled) become the view; the policies are also kept as written.
Services, ReplicaSets, StatefulSets, ReplicationControllers and Namespaces give the selectors and labels
kube-scheduler's default spreading and pod affinity read.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.errors import SnapshotError
from berth.inputs import label, read_documents  # read_documents: the readers of manifests import it here

# What kube's default spreading and pod affinity read besides nodes and pods (ClusterView.upsert_workload).
WORKLOAD_KINDS = (
    "Service",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Namespace",
    "PodDisruptionBudget",
)
SNAPSHOT_HINT = "a cluster snapshot is what `kubectl get nodes,pods -A -o yaml` writes"


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
    source = label(path)
    view = ClusterView()
    policies: list[dict[str, Any]] = []
    pods = []
    for obj in objects:
        kind = obj.get("kind")
        try:
            if kind == "Node":
                node = node_from_k8s(obj)
                if view.node(node.name) is not None:
                    # A merge of two snapshots: one would silently stand for both.
                    raise SnapshotError(f"node {node.name} appears twice", source=source)
                view.upsert_node(node)
            elif kind == "Pod":
                pods.append(pod_from_k8s(obj))
            elif kind == "PlacementPolicy":
                policies.append(obj)
                view.upsert_policy(obj)  # an invalid one is kept, not Ready: the pods it governs are refused
            elif kind in WORKLOAD_KINDS:
                view.upsert_workload(obj)
        except SnapshotError as exc:
            if exc.source == source:
                raise
            raise SnapshotError(exc.message, source=source) from exc
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # A field of the wrong type (a list where kubectl writes a mapping): named, not a traceback.
            raise SnapshotError(f"{_name(obj)}: a field of the wrong type ({exc})", source=source) from exc
    for pod in pods:
        view.add_pod(pod)
    return Snapshot(view=view, policies=policies, source=source)


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{obj.get('kind') or 'object'} {name or '<unnamed>'}"


def check_cluster(snapshot: Snapshot) -> None:
    """Refuse a snapshot file with no node: nothing could be placed, and the file is most likely not a
    snapshot at all (a pod manifest given as --cluster, an empty `kubectl get` output)."""
    if len(snapshot.view) == 0:
        raise SnapshotError(f"no Node in it: {SNAPSHOT_HINT}", source=snapshot.source)
