"""Compact records of the Kubernetes objects berth reads.

These are the cache's objects: msgspec Structs that the garbage collector does not track, holding only
the fields a rule reads, so that a cache of 50k pods costs little memory and no GC pauses.
"""

from __future__ import annotations

import msgspec


class Taint(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


class Toleration(msgspec.Struct, frozen=True, gc=False):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """The Kubernetes rule (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # An empty key with operator Exists matches everything; Equal needs key and value.
        return bool(self.key) and self.value == taint.value


class Node(msgspec.Struct, frozen=True, gc=False):
    name: str
    uid: str = ""
    labels: dict[str, str] = {}
    # Only berth.dev/* annotations are kept.
    annotations: dict[str, str] = {}
    # Tags besides the hostname tag (labels tag.berth.dev/<tag>); a node with any is "specialised".
    tags: frozenset[str] = frozenset()
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    # Integer units: cpu in millicores, the rest as plain values (bytes, counts).
    allocatable: dict[str, int] = {}
    capacity: dict[str, int] = {}
    kubelet_version: str = ""

    @property
    def all_tags(self) -> frozenset[str]:
        """The node's tags including its hostname, which every node carries."""
        return self.tags | {self.name}


class Pod(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = {}
    # Only berth.dev/* annotations are kept.
    annotations: dict[str, str] = {}
    node_name: str = ""
    phase: str = "Pending"
    scheduler_name: str = ""
    # Instance tags from berth.dev/tags, read leniently (a malformed neighbour annotation is no tags).
    tags: frozenset[str] = frozenset()
    # What kube-scheduler counts: max(sum of containers, largest init container) plus overhead.
    requests: dict[str, int] = {}
    # What the allocator counts: per container its limit, or its request where no limit is set.
    limits: dict[str, int] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, as written.
    required_node_affinity: dict | None = None
    creation: str = ""
    # The berth.dev/placement record berth wrote at binding (not kept by the extender's live cache).
    record: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def same_pod(self, other: Pod) -> bool:
        if self.uid and other.uid:
            return self.uid == other.uid
        return self.key == other.key
