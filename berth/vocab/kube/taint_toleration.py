"""kube-scheduler's TaintToleration (pkg/scheduler/framework/plugins/tainttoleration): the filter (a
NoSchedule or NoExecute taint the pod does not tolerate) and the score's raw value (the PreferNoSchedule
taints it does not tolerate), which berth.vocab.kube.score normalises and weights."""

from __future__ import annotations

from berth.cluster.model import Node, Pod, Taint, Toleration
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext
from berth.engine.types import Kind, Reason
from berth.vocab import step_names


def _tainted(node: Node) -> bool:
    return any(t.effect in ("NoSchedule", "NoExecute") for t in node.taints)


def untolerated(node: Node, pod: Pod) -> Taint | None:
    """The first NoSchedule or NoExecute taint of the node the pod does not tolerate."""
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in pod.tolerations
        ):
            return taint
    return None


class TaintToleration(NodeFilter[None]):
    name = step_names.KUBE_TAINTS
    summary = "hard: the pod tolerates every NoSchedule and NoExecute taint of the node"
    suspect = staticmethod(_tainted)

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        taint = untolerated(state.node, ctx.pod)
        if taint is None:
            return None
        return Reason(
            self.name, Kind.UNMET, "node has a taint the pod does not tolerate", {"taint": str(taint)}
        )


def prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    """The pod's tolerations that can tolerate a PreferNoSchedule taint (effect PreferNoSchedule or none)."""
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


def intolerable(node: Node, tolerations: tuple[Toleration, ...]) -> int:
    """The score's raw value: the node's PreferNoSchedule taints none of `tolerations` tolerates (kube's
    countIntolerableTaintsPreferNoSchedule), for one node and, by the view's memo, for every node."""
    return sum(
        1
        for taint in node.taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in tolerations)
    )
