"""The chain: steps composed with `pipe` and `or`, as the allocator seed describes them, and the
runner that takes a list of nodes through it.

`pipe` feeds each member the survivors of the one before and stops as soon as none are left (the
members after that do not run). `or` gives each member the same list and takes the first non-empty
answer; nodes that a winning member removed while a later alternative remained are only set aside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Scorer, SetFilter, Step, Tier, _Skip
from berth.engine.types import Kind, Phase, Reason, ScorePart, StepTrace


@dataclass(frozen=True)
class Pipe:
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Or:
    members: tuple[Member, ...]


Member = Step | Pipe | Or


def describe(member: Member) -> list[Any]:
    """The chain as the configuration writes it: ["pipe", "name", ["or", "a", "b"], ...]."""
    if isinstance(member, Pipe | Or):
        return ["pipe" if isinstance(member, Pipe) else "or", *(describe(m) for m in member.members)]
    return member.name  # type: ignore[return-value]


def flatten(member: Member) -> list[Step]:
    if isinstance(member, Pipe | Or):
        return [s for m in member.members for s in flatten(m)]
    return [member]


@dataclass
class Outcome:
    kept: list[NodeState]
    removed: dict[str, Reason] = field(default_factory=dict)
    parts: dict[str, dict[str, ScorePart]] = field(default_factory=dict)
    trace: list[StepTrace] = field(default_factory=list)

    def absorb(self, other: Outcome) -> None:
        self.kept = other.kept
        self.removed.update(other.removed)
        for node, parts in other.parts.items():
            self.parts.setdefault(node, {}).update(parts)
        self.trace.extend(other.trace)


def run(member: Member, states: list[NodeState], ctx: PodContext) -> Outcome:
    if isinstance(member, Pipe):
        out = Outcome(kept=states)
        for m in member.members:
            if not out.kept:
                break
            out.absorb(run(m, out.kept, ctx))
        return out
    if isinstance(member, Or):
        tried = Outcome(kept=states)
        last = len(member.members) - 1
        for i, m in enumerate(member.members):
            alt = run(m, states, ctx)
            tried.trace.extend(alt.trace)
            if alt.kept or i == last:
                if i < last:
                    alt.removed = {
                        n: replace(r, kind=Kind.SET_ASIDE, message=f"{r.message} (an `or` kept other nodes)")
                        for n, r in alt.removed.items()
                    }
                alt.trace = []
                tried.absorb(alt)
                return tried
        return tried  # pragma: no cover - an `or` has at least two members
    return _run_step(member, states, ctx)


def _prepare(step: Step, ctx: PodContext) -> Any:
    if step.name not in ctx.prepared:
        ctx.prepared[step.name] = step.prepare(ctx)
    return ctx.prepared[step.name]


def _run_step(step: Step, states: list[NodeState], ctx: PodContext) -> Outcome:
    prepared = _prepare(step, ctx)
    if isinstance(prepared, _Skip):
        names = tuple(s.node.name for s in states)
        return Outcome(
            kept=states, trace=[StepTrace(step.name, step.phase, names, note=f"skipped: {prepared.why}")]
        )

    removed: dict[str, Reason] = {}
    parts: dict[str, dict[str, ScorePart]] = {}
    if isinstance(step, NodeFilter):
        for s in states:
            reason = step.check(s, prepared, ctx)
            if reason is not None:
                removed[s.node.name] = reason
    elif isinstance(step, SetFilter):
        removed = step.select(states, prepared, ctx)
        if step.phase is Phase.SOFT and len(removed) >= len(states):
            removed = {}  # a soft filter never empties the set
    elif isinstance(step, Tier):
        values = {s.node.name: step.value(s, prepared, ctx) for s in states}
        best = max(values.values())
        for name, value in values.items():
            parts[name] = {step.name: ScorePart(raw=value, normalised=value, weighted=value)}
            if value < best:
                removed[name] = step.set_aside(value, best, prepared)
    elif isinstance(step, Scorer):
        raws = {s.node.name: float(step.raw(s, prepared, ctx)) for s in states}
        for name, part in normalise(raws, step.weight).items():
            parts[name] = {step.name: part}
    else:  # pragma: no cover - every step derives from one of the four
        raise TypeError(f"step {step.name} has no known phase class")

    kept = [s for s in states if s.node.name not in removed]
    trace = StepTrace(
        step=step.name,
        phase=step.phase,
        remaining=tuple(s.node.name for s in kept),
        removed=removed,
        scores={n: p[step.name] for n, p in parts.items()},
    )
    return Outcome(kept=kept, removed=removed, parts=parts, trace=[trace])


def normalise(raws: dict[str, float], weight: float) -> dict[str, ScorePart]:
    """Scale raw values to 0..1 (lowest 0, highest 1; all equal gives 0) and apply the weight. A
    negative weight reverses the order without lowering any score: |w| x (1 - normalised)."""
    if not raws:
        return {}
    low, high = min(raws.values()), max(raws.values())
    span = high - low
    out = {}
    for name, raw in raws.items():
        norm = (raw - low) / span if span else 0.0
        weighted = weight * norm if weight >= 0 else -weight * (1.0 - norm)
        out[name] = ScorePart(raw=raw, normalised=norm, weighted=weighted)
    return out


def steps_by_name(member: Member) -> dict[str, Step]:
    return {s.name: s for s in flatten(member)}


def check_unique(member: Member) -> Sequence[str]:
    names = [s.name for s in flatten(member)]
    return sorted({n for n in names if names.count(n) > 1})
