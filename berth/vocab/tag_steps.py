"""The engine steps of tag affinity: two hard filters and the affinity tier."""

from __future__ import annotations

from typing import Any

from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Tier, skip
from berth.engine.types import Event, Kind, Reason, StepTrace
from berth.vocab.json_annotation import show
from berth.vocab.tags import PREFER_WITH, PREFER_WITHOUT, REQUIRE_WITH, REQUIRE_WITHOUT, TagAffinity

REQUIRE_WITH_STEP = "tags/require_with_tag"
REQUIRE_WITHOUT_STEP = "tags/require_without_tag"
TAG_AFFINITY_STEP = "tags/tag-affinity"


def _affinity(ctx: PodContext) -> TagAffinity:
    return ctx.spec.tags.affinity


class RequireWithTag(NodeFilter):
    """Removes nodes where no pod of the pod's namespace carries a required tag."""

    name = REQUIRE_WITH_STEP
    summary = "hard: every require_with_tag tag is carried by a pod of the namespace on the node"

    def prepare(self, ctx: PodContext) -> Any:
        tags = _affinity(ctx).require_with
        return tags or skip("no require_with_tag")

    def check(self, state: NodeState, prepared: tuple[str, ...], ctx: PodContext) -> Reason | None:
        missing = [t for t in prepared if ctx.neighbour_tag_count(state, t) == 0]
        if not missing:
            return None
        return Reason(
            self.name,
            Kind.UNMET,
            f"pods of namespace {ctx.pod.namespace} on the node do not carry every required tag "
            f"{show(list(prepared))}",
            {"missing": missing},
        )

    def constraint(self, prepared: Any) -> str | None:
        return f"the affinity constraint {REQUIRE_WITH}={show(list(prepared))}"


class RequireWithoutTag(NodeFilter):
    """Removes nodes where a pod of the pod's namespace carries an excluded tag."""

    name = REQUIRE_WITHOUT_STEP
    summary = "hard: no pod of the namespace on the node carries a require_without_tag tag"

    def prepare(self, ctx: PodContext) -> Any:
        tags = _affinity(ctx).require_without
        return tags or skip("no require_without_tag")

    def check(self, state: NodeState, prepared: tuple[str, ...], ctx: PodContext) -> Reason | None:
        found = {t: n for t in prepared if (n := ctx.neighbour_tag_count(state, t))}
        if not found:
            return None
        # Evicting the neighbours would free the node: a capacity-like "no" (FailedNodes).
        return Reason(
            self.name,
            Kind.EXHAUSTED,
            f"a pod of namespace {ctx.pod.namespace} on the node carries an excluded tag of "
            f"{show(list(prepared))}",
            {"found": found},
        )

    def constraint(self, prepared: Any) -> str | None:
        return f"the affinity constraint {REQUIRE_WITHOUT}={show(list(prepared))}"


class TagAffinityTier(Tier):
    """+1 per neighbour per prefer_with_tag tag it carries, -1 per prefer_without_tag tag, summed;
    only the nodes with the highest sum go on. Without prefer_* every node is at 0."""

    name = TAG_AFFINITY_STEP
    summary = "tier: only the nodes with the highest prefer_* sum go on"

    def prepare(self, ctx: PodContext) -> Any:
        return _affinity(ctx)

    def value(self, state: NodeState, prepared: TagAffinity, ctx: PodContext) -> int:
        total = 0
        for tag in prepared.prefer_with:
            total += ctx.neighbour_tag_count(state, tag)
        for tag in prepared.prefer_without:
            total -= ctx.neighbour_tag_count(state, tag)
        return total

    def set_aside(self, value: int, best: int, prepared: TagAffinity) -> Reason:
        return Reason(
            self.name,
            Kind.SET_ASIDE,
            "lower tag affinity than the highest-affinity nodes",
            {"affinity": value, "highest": best},
        )

    def event(self, trace: StepTrace, prepared: TagAffinity, ctx: PodContext) -> Event | None:
        if not prepared.prefers:
            return None
        best = max((p.raw for p in trace.scores.values()), default=0)
        top = ", ".join(trace.remaining[:10]) + (" ..." if len(trace.remaining) > 10 else "")
        wanted = {k: v for k, v in prepared.constraint_form().items() if k in (PREFER_WITH, PREFER_WITHOUT)}
        return Event(
            "Normal",
            "HighestAffinity",
            f"schedule have highest affinity: {int(best):+d} on {top} ({len(trace.remaining)} of "
            f"{len(trace.scores)} feasible nodes; {show(wanted)})",
        )
