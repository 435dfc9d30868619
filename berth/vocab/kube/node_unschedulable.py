"""kube-scheduler's NodeUnschedulable (pkg/scheduler/framework/plugins/nodeunschedulable): a cordoned
node takes only a pod that tolerates the unschedulable taint. Beside it NodeReady, berth's own filter on
the node's Ready condition: kube-scheduler has no such plugin (a node that is not Ready carries the
node.kubernetes.io/not-ready taint, which TaintToleration checks); it sits here as the other check of
whether the node takes pods at all. Filters only: kube gives neither a score."""

from __future__ import annotations

from berth.cluster.model import Node, Taint
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext
from berth.engine.types import Kind, Reason
from berth.vocab import step_names

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def _cordoned(node: Node) -> bool:
    return node.unschedulable


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
    summary = "hard: the node's Ready condition is True"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if state.node.ready:
            return None
        return Reason(self.name, Kind.UNMET, "node is not Ready")
