"""kube-scheduler's NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity): the filter (the pod's
nodeSelector and required node affinity), the NodeSelectorTerm matching both halves use, and the score's
raw value (the summed weights of the preferred terms a node matches), which berth.vocab.kube.score
normalises and weights."""

from __future__ import annotations

from typing import Any

from berth.cluster.model import Node, Pod
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names


def node_selection_miss(pod: Pod, node: Node) -> tuple[str, dict[str, Any]] | None:
    """Why the pod's nodeSelector or required node affinity does not accept the node (kube's
    GetRequiredNodeAffinity(pod).Match), as a message and its values; None when they accept it."""
    mismatch = {k: v for k, v in pod.node_selector.items() if node.labels.get(k) != v}
    if mismatch:
        return "node does not match the pod's nodeSelector", {"wanted": mismatch}
    required = pod.required_node_affinity
    if required and not any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or []):
        return "node does not match the pod's required node affinity", {}
    return None


def selects_node(pod: Pod, node: Node) -> bool:
    return node_selection_miss(pod, node) is None


class NodeAffinity(NodeFilter[None]):
    name = step_names.KUBE_NODE_AFFINITY
    summary = "hard: the node matches the pod's nodeSelector and required node affinity"

    def prepare(self, ctx: PodContext) -> Skipped | None:
        if not ctx.pod.node_selector and not ctx.pod.required_node_affinity:
            return skip("no nodeSelector or required node affinity")
        return None

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        miss = node_selection_miss(ctx.pod, state.node)
        return Reason(self.name, Kind.UNMET, miss[0], miss[1]) if miss is not None else None


def term_matches(term: dict[str, Any], node: Node) -> bool:
    """A NodeSelectorTerm: its expressions and fields all hold. An empty term matches no node."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node.labels
    return all(_requirement(e, labels) for e in exprs) and all(
        _requirement(f, {"metadata.name": node.name}) for f in fields
    )


def _requirement(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def preferred_terms(pod: Pod) -> tuple[tuple[int, dict], ...]:
    """The pod's preferred node affinity as (weight, nodeSelectorTerm), leaving out a term without a
    weight or without expressions and fields (it matches no node)."""
    return tuple(
        (int(t.get("weight") or 0), t.get("preference") or {})
        for t in pod.preferred_node_affinity
        if isinstance(t, dict)
        and t.get("weight")
        and (t.get("preference") or {}).keys() & {"matchExpressions", "matchFields"}
    )


def preferred_weight(node: Node, preferred: tuple[tuple[int, dict], ...]) -> int:
    """The score's raw value: the summed weights of the preferred terms the node matches, for one node
    and, by the view's memo, for every node."""
    return sum(weight for weight, term in preferred if term_matches(term, node))
