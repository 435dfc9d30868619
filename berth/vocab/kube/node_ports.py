"""kube-scheduler's NodePorts (pkg/scheduler/framework/plugins/nodeports): no pod on the node uses a host
port the pod asks for. A filter only: kube gives it no score."""

from __future__ import annotations

from berth.cluster.model import HostPort
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names


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
