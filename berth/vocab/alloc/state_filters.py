"""The allocator's filters on a node's state: set up, running, reserved, head node, valid, virtual,
reservoir, and the forced failure.

| seed | node |
|---|---|
| setup, running | condition `Ready` is `True` (both read the same condition) |
| reserved | label `berth.dev/reserved=true` |
| headnode | label `node-role.kubernetes.io/control-plane` (any value) |
| valid server | allocatable memory and cpu present, berth's node annotations well formed |
| virtual server | label `type=virtual-kubelet` (virtual-kubelet's convention) or `berth.dev/virtual=true` |
| reservoir | label `berth.dev/reservoir=true` |
"""

from __future__ import annotations

from berth import annotations as ann
from berth.cluster.model import Node
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab.alloc.base import NODE_RATIOS, AllocStep
from berth.vocab.alloc.request import FORCE_FAILURE_LABEL, NIC_TAGS
from berth.vocab.alloc.values import (
    PLATFORM_SHAPE,
    node_nic_tags,
    node_ratios,
    node_reboot,
    node_traits,
    parse_platform,
)

RESERVOIR = "berth.dev/reservoir"
VIRTUAL = "berth.dev/virtual"


def _label_true(node: Node, label: str) -> bool:
    return node.labels.get(label, "").strip().lower() == "true"


class HardFilterSetup(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-setup"
    summary = "hard: the node is set up (its Ready condition is True)"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        return None if state.node.ready else Reason(self.name, Kind.UNMET, "node is not set up (not Ready)")


class HardFilterRunning(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-running"
    summary = "hard: the node is running (its Ready condition is True)"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        return None if state.node.ready else Reason(self.name, Kind.UNMET, "node is not running (not Ready)")


class HardFilterReserved(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-reserved"
    summary = f"hard: the node is not reserved ({ann.NODE_RESERVED}=true)"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if not _label_true(state.node, ann.NODE_RESERVED):
            return None
        return Reason(self.name, Kind.UNMET, f"node is reserved by an operator ({ann.NODE_RESERVED}=true)")


class HardFilterHeadnode(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-headnode"
    summary = f"hard: the node is not a head node ({ann.CONTROL_PLANE})"
    node_only = True

    def prepare(self, ctx: PodContext) -> Skipped | None:
        return (
            None if self.defaults.filter_headnode else skip("filter_headnode is false: head nodes are kept")
        )

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if ann.CONTROL_PLANE not in state.node.labels:
            return None
        return Reason(self.name, Kind.UNMET, f"node is a head node (label {ann.CONTROL_PLANE})")


class HardFilterReservoir(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-reservoir"
    summary = f"hard: the node is not in the reservoir ({RESERVOIR}=true); wrap it as [or, ..., identity]"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        if not _label_true(state.node, RESERVOIR):
            return None
        return Reason(self.name, Kind.UNMET, f"node is in the reservoir ({RESERVOIR}=true)")


class HardFilterVirtualServers(AllocStep, NodeFilter[None]):
    """sdc-designation removes virtual servers for Docker containers; every pod is a container."""

    name = "alloc/hard-filter-virtual-servers"
    summary = f"hard: the node is not virtual (label type=virtual-kubelet or {VIRTUAL}=true)"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        node = state.node
        if node.labels.get("type") != "virtual-kubelet" and not _label_true(node, VIRTUAL):
            return None
        return Reason(self.name, Kind.UNMET, "node is a virtual node")


class HardFilterForceFailure(AllocStep, NodeFilter[bool]):
    name = "alloc/hard-filter-force-failure"
    summary = f"hard: every node is removed when the pod has label {FORCE_FAILURE_LABEL}=true (tests)"

    def prepare(self, ctx: PodContext) -> bool | Skipped:
        if ctx.pod.labels.get(FORCE_FAILURE_LABEL, "").strip().lower() == "true":
            return True
        return skip(f"no label {FORCE_FAILURE_LABEL}=true")

    def check(self, state: NodeState, prepared: bool, ctx: PodContext) -> Reason | None:
        return Reason(self.name, Kind.UNMET, f"forced failure: the pod has label {FORCE_FAILURE_LABEL}=true")

    def constraint(self, prepared: bool) -> str | None:
        return f"the label {FORCE_FAILURE_LABEL}=true (a forced failure)"


def node_problem(node: Node) -> str | None:
    """Why a node cannot be an allocation target whatever the pod, or None."""
    missing = [r for r in ("memory", "cpu") if node.allocatable.get(r, 0) <= 0]
    if missing:
        return f"no allocatable {' or '.join(missing)}"
    readers = (
        (ann.NODE_TRAITS, node_traits),
        (NIC_TAGS, node_nic_tags),
        (ann.NODE_NEXT_REBOOT, node_reboot),
        (NODE_RATIOS, node_ratios),
    )
    for key, reader in readers:
        raw = node.annotations.get(key)
        if raw is not None:
            problem = reader(raw).problem
            if problem:
                return f"annotation {key}: {problem}"
    platform = node.labels.get(ann.NODE_PLATFORM)
    if platform is not None and parse_platform(platform) is None:
        return f"label {ann.NODE_PLATFORM}: {platform!r} should be {PLATFORM_SHAPE}"
    return None


class HardFilterInvalidServers(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-invalid-servers"
    summary = "hard: the node has allocatable memory and cpu, and well-formed berth annotations"
    node_only = True

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        problem = node_problem(state.node)
        if problem is None:
            return None
        return Reason(self.name, Kind.UNMET, f"node is not a valid allocation target: {problem}")
