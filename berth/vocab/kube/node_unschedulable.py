"""kube-scheduler's NodeUnschedulable (pkg/scheduler/framework/plugins/nodeunschedulable): a cordoned
node takes only a pod that tolerates the unschedulable taint. Beside it NodeReady, berth's own filter on
the node's Ready condition: kube-scheduler has no such plugin. A node that is not Ready carries the
node.kubernetes.io/not-ready:NoSchedule taint (the node lifecycle controller's TaintNodesByCondition),
which TaintToleration checks; NodeReady holds a not-Ready node to that taint whether or not the
controller has put it on yet, so a pod that tolerates it (a network plugin's DaemonSet, which tolerates
everything) may go there, as kube-scheduler lets it. It sits here as the other check of whether the node
takes pods at all. Filters only: kube gives neither a score."""

from __future__ import annotations

from berth.cluster.model import Node, Taint
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext
from berth.engine.types import Kind, Reason
from berth.vocab import step_names

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
NOT_READY_TAINT = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")


def _cordoned(node: Node) -> bool:
    return node.unschedulable


def _not_ready(node: Node) -> bool:
    return not node.ready


class NodeUnschedulable(NodeFilter[None]):
    name = step_names.KUBE_NODE_UNSCHEDULABLE
    summary = "hard: the node is not cordoned, unless the pod tolerates that"
    suspect = staticmethod(_cordoned)

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if not state.node.unschedulable:
            return None
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in ctx.pod.tolerations):
            return None
        return Reason(self.name, Kind.UNMET, "node is cordoned (spec.unschedulable)")


class NodeReady(NodeFilter[None]):
    name = step_names.KUBE_NODE_READY
    summary = (
        "hard: the node's Ready condition is True, unless the pod tolerates node.kubernetes.io/not-ready"
    )
    suspect = staticmethod(_not_ready)

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if state.node.ready:
            return None
        if any(t.tolerates(NOT_READY_TAINT) for t in ctx.pod.tolerations):
            return None
        return Reason(self.name, Kind.UNMET, "node is not Ready")
