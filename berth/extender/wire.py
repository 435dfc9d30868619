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
        if self.node_names is not None:
            return self.node_names
        items = self.nodes.items if self.nodes and self.nodes.items else []
        return [((n.get("metadata") or {}).get("name") or "") for n in items]


class ExtenderFilterArgs(_Wire):
    """ExtenderArgs as filter reads them: NodeNames kept as raw JSON, for ClusterView.name_table to
    find thousands of names at once (the decoded form is the same as ExtenderArgs)."""

    pod: dict[str, Any]
    nodes: NodeList | None = None
    node_names: msgspec.Raw = msgspec.Raw(b"null")

    def decoded(self) -> ExtenderArgs:
        names = _NAMES.decode(self.node_names)
        return ExtenderArgs(pod=self.pod, nodes=self.nodes, node_names=names)


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
