"""kube-scheduler's NodeName (pkg/scheduler/framework/plugins/nodename): a pod that names its node fits
only there. A filter only: kube gives it no score."""

from __future__ import annotations

from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names


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
