"""hard-filter-vlans: the node has the NIC tags the pod needs.

The pod lists them in `berth.dev/nic-tags` (an inner list is a set of alternatives, sdc-designation's
nic_tag_requirements); the node lists the tags of its online interfaces in its annotation
`berth.dev/nic-tags`. Every requirement needs one of its tags on the node.
"""

from __future__ import annotations

from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.json_annotation import show
from berth.vocab.alloc.base import AllocStep, request
from berth.vocab.alloc.request import NIC_TAGS
from berth.vocab.alloc.values import node_nic_tags


def _shown(groups: tuple[tuple[str, ...], ...]) -> str:
    return show([g[0] if len(g) == 1 else list(g) for g in groups])


class HardFilterVlans(AllocStep, NodeFilter[tuple[tuple[str, ...], ...]]):
    name = "alloc/hard-filter-vlans"
    summary = f"hard: the node's {NIC_TAGS} has one tag of each of the pod's NIC tag requirements"

    def prepare(self, ctx: PodContext) -> tuple[tuple[str, ...], ...] | Skipped:
        return request(ctx).nic_tags or skip("the pod asks for no NIC tags")

    def check(
        self, state: NodeState, prepared: tuple[tuple[str, ...], ...], ctx: PodContext
    ) -> Reason | None:
        raw = state.node.annotations.get(NIC_TAGS)
        parsed = node_nic_tags(raw) if raw else None
        if parsed is not None and parsed.problem:
            return Reason(self.name, Kind.UNMET, f"node annotation {NIC_TAGS} is malformed: {parsed.problem}")
        have = parsed.value if parsed is not None else frozenset()
        missing = [list(g) for g in prepared if not have.intersection(g)]
        if not missing:
            return None
        return Reason(
            self.name,
            Kind.UNMET,
            f"node lacks the NIC tags {_shown(prepared)}",
            {"missing": missing[0] if len(missing[0]) > 1 else missing[0][0], "node_nic_tags": sorted(have)},
        )

    def constraint(self, prepared: tuple[tuple[str, ...], ...]) -> str | None:
        return f"the NIC tags {_shown(prepared)}"
