"""An example custom algorithm: nodes an operator has put into maintenance take no new pods.

A node is in maintenance when it carries the label `example.com/maintenance: "true"`; the window may
name when it ends in the label `example.com/maintenance-until`, which the reason shows.

Use it in the allocator configuration like a built-in algorithm:

    allocationDescription: [pipe, hard-filter-maintenance, hard-filter-min-ram, score-unreserved-ram]
"""

from __future__ import annotations

from typing import Any

from berth.cluster.view import NodeState
from berth.engine import Kind, NodeFilter, PodContext, Reason, skip

MAINTENANCE = "example.com/maintenance"
UNTIL = "example.com/maintenance-until"


class HardFilterMaintenance(NodeFilter):
    """Removes nodes in maintenance, unless the pod tolerates it with the same label set to "true"."""

    name = "example/hard-filter-maintenance"
    summary = "hard: the node is not in maintenance (label example.com/maintenance=true)"

    def prepare(self, ctx: PodContext) -> Any:
        # Once per pod: a pod that carries the label itself is a maintenance job and goes anywhere.
        if ctx.pod.labels.get(MAINTENANCE) == "true":
            return skip("the pod is a maintenance job")
        return None

    def check(self, state: NodeState, prepared: Any, ctx: PodContext) -> Reason | None:
        # Once per node: read only the node and the prepared state.
        labels = state.node.labels
        if labels.get(MAINTENANCE) != "true":
            return None
        values = {"until": labels[UNTIL]} if UNTIL in labels else {}
        return Reason(self.name, Kind.UNMET, "node is in maintenance", values)
