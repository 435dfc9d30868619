"""Compact records of the Kubernetes objects berth reads.

These are the cache's objects: msgspec Structs that the garbage collector does not track, holding only
the fields a rule reads, so that a cache of 50k pods costs little memory and no GC pauses.
"""

from __future__ import annotations

import msgspec

from berth.cluster.selectors import Selector


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


class AffinityTerm(msgspec.Struct, frozen=True, gc=False):
    """A pod (anti-)affinity term, its label selector with matchLabelKeys and mismatchLabelKeys merged
    in (as the API server does), and the namespaces it looks at: `namespaces` (the pod's own when the
    term names none and has no namespaceSelector) or the namespaces `namespace_selector` selects."""

    selector: Selector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: Selector | None = None


class WeightedTerm(msgspec.Struct, frozen=True, gc=False):
    weight: int
    term: AffinityTerm


class PodAffinity(msgspec.Struct, frozen=True, gc=False):
    """spec.affinity.podAffinity and podAntiAffinity, compiled; pods of a workload share one."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()


class SpreadConstraint(msgspec.Struct, frozen=True, gc=False):
    """A topologySpreadConstraint, matchLabelKeys merged into its selector."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


class HostPort(msgspec.Struct, frozen=True, gc=False):
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """kube's NodePorts rule: the same port and protocol on the same address or a wildcard one."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


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
    # spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution, as written.
    preferred_node_affinity: tuple[dict, ...] = ()
    affinity: PodAffinity | None = None
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    # The controller ownerReference, (kind, name): kube's default spreading selects by it.
    controller: tuple[str, str] | None = None
    # What kube's resource scoring counts: requests with 100m CPU and 200 MiB for each container
    # that sets none (cpu in millicores, memory in bytes).
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    deleting: bool = False  # metadata.deletionTimestamp is set
    # Preemption: spec.priority, status.nominatedNodeName (where kube-scheduler made room for the
    # pod), status.startTime (kube orders victims of equal priority by it), spec.preemptionPolicy.
    priority: int = 0
    priority_class: str = ""
    nominated_node: str = ""
    start_time: str = ""
    preempts: bool = True  # preemptionPolicy is not Never
    # What kube-scheduler checks for this pod that berth's model of kube's filters leaves out (volumes
    # bound through PersistentVolumeClaims, DRA resource claims): simulate says so.
    unmodelled: tuple[str, ...] = ()
    creation: str = ""
    # The berth.dev/placement record berth wrote at binding (not kept by the extender's live cache).
    record: str = ""
    # metadata.resourceVersion of the object it was converted from: the same uid at the same version is
    # the same object, so a relist converts again only the pods whose version moved.
    version: str = ""

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
