"""`rebalance/planned-target`: the replacement of a pod `berth rebalance` evicted goes where the plan
said (berth.cluster.planned), when berth's hard rules accept that node.

A tier after the hard filters: a planned target among the candidates is the only node that goes on;
without one (no plan, or its node refused by a rule now) every candidate goes on, and the pod is
placed as any other. This is what keeps rebalancing from looping: the replacement does not go back
to where it was, nor where the ranking alone would put it.
"""

from __future__ import annotations

from berth.cluster.placement_record import PLANNED_EVENT
from berth.cluster.view import NodeState
from berth.engine.step import PodContext, Skipped, Tier, skip
from berth.engine.types import Event, Kind, Reason, StepTrace
from berth.vocab.step_names import PLANNED_TARGET

EVENT = PLANNED_EVENT  # the placement record says `planned` when the decision has it


class PlannedTarget(Tier[frozenset[str]]):
    name = PLANNED_TARGET
    summary = "tier: the node `berth rebalance` planned for a replacement, when it is feasible"
    shared_reason = True

    def prepare(self, ctx: PodContext) -> frozenset[str] | Skipped:
        return ctx.view.planned.nodes_for(ctx.pod) or skip("no planned target")

    def value(self, state: NodeState, prepared: frozenset[str], ctx: PodContext) -> int:
        return int(state.node.name in prepared)

    def set_aside(self, value: int, best: int, prepared: frozenset[str]) -> Reason:
        return Reason(self.name, Kind.SET_ASIDE, "not the node berth rebalance planned for this replacement")

    def event(self, trace: StepTrace, prepared: frozenset[str], ctx: PodContext) -> Event | None:
        if not trace.highest_raw():
            return None
        return Event(
            "Normal",
            EVENT,
            f"placed on the node berth rebalance planned: {', '.join(trace.remaining)}",
        )
