"""kube-scheduler's node filters, for the offline path only (simulate, audit, capacity, what-if).

kube-scheduler checks these before it asks the extender, so the extender's chain leaves them out; an
offline answer without them would be wrong. Their names start with `kube/` so their reasons are told
apart from berth's own rules. The pod filters (InterPodAffinity, PodTopologySpread) are in
berth.vocab.kube.interpod and berth.vocab.kube.spread.
"""

from __future__ import annotations

from berth.cluster.model import HostPort, Node, Taint
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeReady(NodeFilter[None]):
    name = step_names.KUBE_NODE_READY
    summary = "hard: the node's Ready condition is True"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if state.node.ready:
            return None
        return Reason(self.name, Kind.UNMET, "node is not Ready")


def _cordoned(node: Node) -> bool:
    return node.unschedulable


class NodeName(NodeFilter[str]):
    name = step_names.KUBE_NODE_NAME
    summary = "hard: a pod that names its node (spec.nodeName) fits only there"

    def prepare(self, ctx: PodContext) -> str | Skipped:
        # A pod that runs (or that the view holds on its node) is asked about where else it could go
        # (audit, explain, a bind checked again): its nodeName says where it is, not what it asks.
        pod = ctx.pod
        if not pod.node_name or pod.phase != "Pending" or ctx.view.pod(pod.key) is not None:
            return skip("the pod asks for no node by name")
        return pod.node_name

    def check(self, state: NodeState, prepared: str, ctx: PodContext) -> Reason | None:
        if state.node.name == prepared:
            return None
        return Reason(self.name, Kind.UNMET, "node is not the one the pod names", {"nodeName": prepared})


class NodePorts(NodeFilter[tuple[HostPort, ...]]):
    name = step_names.KUBE_NODE_PORTS
    summary = "hard: no pod on the node uses a host port the pod asks for"

    def prepare(self, ctx: PodContext) -> tuple[HostPort, ...] | Skipped:
        return ctx.pod.host_ports or skip("the pod asks for no host port")

    def check(self, state: NodeState, prepared: tuple[HostPort, ...], ctx: PodContext) -> Reason | None:
        for pod in state.pods.values():
            if not pod.host_ports:
                continue
            for wanted in prepared:
                if any(wanted.conflicts(used) for used in pod.host_ports):
                    return Reason(
                        self.name,
                        Kind.EXHAUSTED,
                        "node has no free host port the pod asks for",
                        {"port": f"{wanted.ip}:{wanted.port}/{wanted.protocol}"},
                    )
        return None


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
