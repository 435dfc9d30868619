"""The kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1).

The Go structs have no json tags, so the scheduler sends and expects the Go field names (PascalCase);
it decodes replies case-insensitively and ignores unknown keys. Nil slices and maps are `null`.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

MAX_EXTENDER_PRIORITY = 10

# A count of PodDisruptionBudget violations: Go's int64 on the wire, far smaller in practice; bounded
# so that the OpenAPI description and the decoder agree exactly.
Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]


class _Wire(msgspec.Struct, rename="pascal", omit_defaults=False):
    pass


class NodeList(_Wire, rename=None):
    # An embedded v1.NodeList keeps Kubernetes' own lowerCamel keys.
    items: list[dict[str, Any]] | None = None


class ExtenderArgs(_Wire):
    pod: dict[str, Any]
    nodes: NodeList | None = None
    node_names: list[str] | None = None

    def candidate_names(self) -> list[str]:
        return _candidate_names(self.node_names, self.nodes)


def _candidate_names(node_names: list[str] | None, nodes: NodeList | None) -> list[str]:
    """NodeNames, or the names of the Nodes given when it is null (nodeCacheCapable false)."""
    if node_names is not None:
        return node_names
    items = nodes.items if nodes and nodes.items else []
    return [((n.get("metadata") or {}).get("name") or "") for n in items]


class ExtenderFilterArgs(_Wire):
    """ExtenderArgs as filter reads them: the Pod and NodeNames kept as raw JSON, the pod for
    berth.cluster.convert.watched_pod to recognise a version of it converted before, the names
    for ClusterView.name_table to find thousands at once (decoded, both are ExtenderArgs')."""

    pod: msgspec.Raw
    nodes: NodeList | None = None
    node_names: msgspec.Raw = msgspec.Raw(b"null")

    def __post_init__(self) -> None:
        # The pod must be an object, as ExtenderArgs decodes it (msgspec gives a raw value as it
        # stands in the body: no space before it). Raised here, the call is refused as a bad body.
        if memoryview(self.pod)[:1] != b"{":
            raise TypeError("Pod: expected an object")

    def candidate_names(self) -> list[str]:
        return _candidate_names(_NAMES.decode(self.node_names), self.nodes)


_NAMES = msgspec.json.Decoder(list[str] | None)


class ExtenderFilterResult(_Wire):
    nodes: NodeList | None = None
    node_names: list[str] | None = None
    failed_nodes: dict[str, str] | None = None
    failed_and_unresolvable_nodes: dict[str, str] | None = None
    error: str = ""


class HostPriority(_Wire):
    host: str
    score: int


class ExtenderBindingArgs(_Wire):
    pod_name: str
    pod_namespace: str
    pod_uid: str = msgspec.field(name="PodUID")
    node: str


class ExtenderBindingResult(_Wire):
    error: str = ""


class MetaPod(_Wire):
    uid: str = msgspec.field(name="UID")


class MetaVictims(_Wire):
    pods: list[MetaPod] | None = None
    num_pdb_violations: Count = msgspec.field(default=0, name="NumPDBViolations")


class ExtenderPreemptionArgs(_Wire):
    pod: dict[str, Any]
    node_name_to_victims: dict[str, Any] | None = None
    node_name_to_meta_victims: dict[str, MetaVictims] | None = None


class ExtenderPreemptionResult(_Wire):
    node_name_to_meta_victims: dict[str, MetaVictims] | None = None


def decoder(kind: type) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(kind)


ENCODER = msgspec.json.Encoder()
