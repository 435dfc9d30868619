"""The cluster view: compact records of nodes and pods with per-node counters."""

from berth.cluster.convert import node_from_k8s, pod_from_k8s, pod_template
from berth.cluster.model import Node, Pod, Taint, Toleration
from berth.cluster.snapshot import Snapshot, load_snapshot, read_documents
from berth.cluster.view import ClusterView, NodeState

__all__ = [
    "ClusterView",
    "Node",
    "NodeState",
    "Pod",
    "Snapshot",
    "Taint",
    "Toleration",
    "load_snapshot",
    "node_from_k8s",
    "pod_from_k8s",
    "pod_template",
    "read_documents",
]
