"""The chain: steps composed with `pipe` and `or`, as the allocator seed describes them, and the
runner that takes the candidate nodes through it.

`pipe` feeds each member the survivors of the one before and stops as soon as none are left (the
members after that do not run). `or` gives each member the same nodes and takes the first non-empty
answer; nodes that a winning member removed while a later alternative remained are only set aside.

The candidates travel as a dict of node name -> NodeState in the order the nodes were asked about
(berth.engine.slots knows where they sit in the view's arrays). A step that removes nothing hands its
input on unchanged, and a skipped step costs a dict lookup: at 5000 nodes, per-step copies of the node
list used to cost more than the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from berth.cluster.view import ClusterView
from berth.engine.ledger import (
    ArrayValues,
    Candidates,
    Column,
    Removals,
    ScoreColumn,
    StepRun,
    TierColumn,
)
from berth.engine.slots import LEFT_OUT_AT_MOST, in_candidate_order, known, memo_for, remaining, without
from berth.engine.step import Kept, NodeFilter, Noted, PodContext, Scorer, SetFilter, Step, Tier, _Skip
from berth.engine.types import Phase, Reason


@dataclass(frozen=True)
class Pipe:
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Or:
    members: tuple[Member, ...]


Member = Step | Pipe | Or


def describe(member: Member) -> list[Any] | str:
    """The chain as the configuration writes it: ["pipe", "name", ["or", "a", "b"], ...]."""
    if isinstance(member, Pipe | Or):
        return ["pipe" if isinstance(member, Pipe) else "or", *(describe(m) for m in member.members)]
    return member.name


def flatten(member: Member) -> list[Step]:
    if isinstance(member, Pipe | Or):
        return [s for m in member.members for s in flatten(m)]
    return [member]


# Tests only (tests/test_fast_paths.py): while set, the runner asks every step its per-node rule alone
# (`check`, `select`, `value`, `raw`) and never its set-level override (`removals`, `select_among`,
# `values`, `raws`), so that a decision made on the plain path can be compared with the fast one.
_plain = False


@contextmanager
def plain_path() -> Iterator[None]:
    """Decide on the steps' per-node rules alone, for as long as the block runs (tests only)."""
    global _plain
    before, _plain = _plain, True
    try:
        yield
    finally:
        _plain = before


def _plain_removals(step: NodeFilter, cands: Candidates, prepared: Any, ctx: PodContext) -> dict[str, Reason]:
    check = step.check
    return {n: r for n, s in cands.items() if (r := check(s, prepared, ctx)) is not None}


def _plain_selected(step: SetFilter, cands: Candidates, prepared: Any, ctx: PodContext) -> dict[str, Reason]:
    return {n: r for n, r in step.select(list(cands.values()), prepared, ctx).items() if n in cands}


def _plain_values(step: Tier, cands: Candidates, prepared: Any, ctx: PodContext) -> Mapping[str, int]:
    value = step.value
    return step.normalise({n: value(s, prepared, ctx) for n, s in cands.items()}, prepared, ctx)


def _plain_raws(step: Scorer, cands: Candidates, prepared: Any, ctx: PodContext) -> list[float]:
    raw = step.raw
    return [float(raw(s, prepared, ctx)) for s in cands.values()]


@dataclass
class Outcome:
    kept: Candidates
    removals: list[Mapping[str, Reason]] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    runs: list[StepRun] = field(default_factory=list)


def run(member: Member, cands: Candidates, ctx: PodContext) -> Outcome:
    out = Outcome(kept=cands)
    out.kept = _run(member, cands, ctx, out)
    return out


def _run(member: Member, cands: Candidates, ctx: PodContext, out: Outcome) -> Candidates:
    """Run `member` over `cands`, adding its removals, columns and step runs to `out`; the nodes kept."""
    if type(member) is Pipe:
        kept = cands
        for m in member.members:
            if not kept:
                break
            if type(m) in _GROUPS:
                kept = _run(m, kept, ctx, out)
                continue
            # A step is run from here: a call less for each than through _run.
            kept = _run_step(m, kept, ctx, out)  # type: ignore[arg-type]
        return kept
    if type(member) is Or:
        last = len(member.members) - 1
        for i, m in enumerate(member.members):
            alt = Outcome(kept=cands)
            kept = _run(m, cands, ctx, alt)
            out.runs.extend(alt.runs)  # every alternative tried is traced
            if kept or i == last:
                removals = alt.removals if i == last else [Removals.set_aside(r) for r in alt.removals]
                out.removals.extend(removals)
                out.columns.extend(alt.columns)
                return kept
        return cands  # pragma: no cover - an `or` has at least two members
    return _run_step(member, cands, ctx, out)  # type: ignore[arg-type]


_GROUPS = frozenset((Pipe, Or))  # (compared by type: neither is subclassed)
_UNPREPARED = object()
_UNDECLARED = Step.memo_key  # a step that does not override it declares nothing: not asked


def _prepare(step: Step, ctx: PodContext) -> Any:
    prepared = ctx.prepared
    state = prepared.get(step.name, _UNPREPARED)
    if state is _UNPREPARED:
        state = prepared[step.name] = step.prepare(ctx)
    return state


def _answer(step: Step, ask: Callable[..., Any], cands: Candidates, prepared: Any, ctx: PodContext) -> Any:
    """The step's set-level answer over `cands` (`ask` is its removals, select_among, values or raws):
    kept with the candidate set when the step declares what it depends on (Step.memo_key), and given
    back to a later decision over the same candidates with the same question in the same state, or
    mended by the step from the one kept when only the state moved."""
    key = None if type(step).memo_key is _UNDECLARED else step.memo_key(prepared, ctx)
    memo = memo_for(ctx.view, cands) if key is not None else None
    if key is None or memo is None:  # not declared, or a candidate set the engine did not make
        answer = ask(cands, prepared, ctx)
        return answer.answer if type(answer) is Noted else answer
    question, state = key
    slot = (step, question)  # the step itself: two chains' steps of one name may be configured apart
    before = memo.get(slot)
    if before is not None:
        if before.state == state:
            return before.answer
        mended = step.mend(before, cands, prepared, ctx)
        if mended is before.answer:  # still right in the new state: its notes too
            before.state = state
            return mended
        if mended is not None:
            memo[slot] = kept = _kept(mended, state)
            return kept.answer
    memo[slot] = kept = _kept(ask(cands, prepared, ctx), state)
    return kept.answer


def _kept(answer: Any, state: Any) -> Kept:
    """The memo record of an answer, its notes taken off when the step noted some."""
    if type(answer) is Noted:
        return Kept(state, answer.answer, answer.notes)
    return Kept(state, answer)


def _run_step(step: Step, cands: Candidates, ctx: PodContext, out: Outcome) -> Candidates:
    prepared = _prepare(step, ctx)
    if type(prepared) is _Skip:
        out.runs.append(StepRun(step.name, step.phase, cands, cands, {}, note=f"skipped: {prepared.why}"))
        return cands
    run_as = _RUN_AS.get(type(step)) or _run_as(step)
    return run_as(step, cands, prepared, ctx, out)


def _run_node_filter(
    step: NodeFilter, cands: Candidates, prepared: Any, ctx: PodContext, out: Outcome
) -> Candidates:
    removed = _asked(step, step.removals, _plain_removals, cands, prepared, ctx)
    return _filtered(step, cands, removed, ctx, out)


def _run_set_filter(
    step: SetFilter, cands: Candidates, prepared: Any, ctx: PodContext, out: Outcome
) -> Candidates:
    removed = _asked(step, step.select_among, _plain_selected, cands, prepared, ctx)
    if step.phase is Phase.SOFT and len(removed) >= len(cands):
        removed = {}  # a soft filter never empties the set
    return _filtered(step, cands, removed, ctx, out)


def _asked(
    step: Step,
    ask: Callable[..., Any],
    per_node: Callable[..., Any],
    cands: Candidates,
    prepared: Any,
    ctx: PodContext,
) -> Any:
    """The step's set-level answer (`ask`, through the engine's memo), or the one its per-node rule
    gives (`per_node`) while the tests decide on the plain path."""
    return per_node(step, cands, prepared, ctx) if _plain else _answer(step, ask, cands, prepared, ctx)


def _filtered(
    step: Step, cands: Candidates, removed: Mapping[str, Reason], ctx: PodContext, out: Outcome
) -> Candidates:
    kept = without(ctx.view, cands, removed)
    if removed:
        out.removals.append(removed)
    out.runs.append(StepRun(step.name, step.phase, cands, kept, removed))
    return kept


def _run_scorer(step: Scorer, cands: Candidates, prepared: Any, ctx: PodContext, out: Outcome) -> Candidates:
    raws = _asked(step, step.raws, _plain_raws, cands, prepared, ctx)
    column = ScoreColumn(step.name, cands, raws, step.weight)
    out.columns.append(column)
    out.runs.append(StepRun(step.name, step.phase, cands, cands, {}, scores=column))
    return cands


def _run_tier(step: Tier, cands: Candidates, prepared: Any, ctx: PodContext, out: Outcome) -> Candidates:
    """Only the nodes with the highest value go on. The step reports the nodes whose value is not 0;
    every other node is at 0."""
    values = _asked(step, step.values, _plain_values, cands, prepared, ctx)
    if isinstance(values, ArrayValues):  # every candidate's value, in an array
        best = int(values.array.max()) if len(values) else 0
        at_best = int(np.count_nonzero(values.array == best))
        if at_best == len(values):
            kept = cands
        elif len(values) - at_best <= LEFT_OUT_AT_MOST:  # all but a few stay: no copy of thousands
            kept = remaining(ctx.view, cands, values.not_at(best))
        else:
            kept = _pick(ctx.view, cands, values.at(best))
        return _tier_outcome(step, cands, kept, values, best, prepared, out)
    best = max(values.values()) if values else 0
    if len(values) < len(cands):
        best = max(best, 0)  # some node is at 0
    if all(v == best for v in values.values()) and (best == 0 or len(values) == len(cands)):
        kept = cands  # every node is at the highest value
    elif best == 0:  # the nodes at 0 stay: drop the others (as a filter does, copied at C speed)
        kept = without(ctx.view, cands, dict.fromkeys(n for n, v in values.items() if v != 0))
    else:  # the few nodes at the highest value stay
        top = [n for n, v in values.items() if v == best]
        kept = _pick(ctx.view, cands, in_candidate_order(cands, top, ctx.view))
    return _tier_outcome(step, cands, kept, values, best, prepared, out)


def _tier_outcome(
    step: Tier,
    cands: Candidates,
    kept: Candidates,
    values: Mapping[str, int],
    best: int,
    prepared: Any,
    out: Outcome,
) -> Candidates:
    """The tier's column, its removals (made when read) and its run, added to `out`; the nodes kept."""
    column = TierColumn(step.name, cands, values, best)
    by_value: dict[int, Reason] = {}

    def reason(name: str) -> Reason:
        value = values.get(name, 0)
        if value not in by_value:
            by_value[value] = step.set_aside(value, best, prepared)
        return by_value[value]

    removed: Mapping[str, Reason] = {}
    if len(kept) < len(cands):
        shared = reason(_first_left_out(cands, kept, values, best)) if step.shared_reason else None
        removed = Removals.all_but(cands, kept, reason, shared)
    if removed:
        out.removals.append(removed)
    out.columns.append(column)
    out.runs.append(StepRun(step.name, step.phase, cands, kept, removed, scores=column))
    return kept


# How each step class is run, by its phase class, found once: an isinstance chain for every step of
# every decision cost more than the whole run of a step that skips.
_RUN_AS: dict[type, Callable[[Any, Candidates, Any, PodContext, Outcome], Candidates]] = {}
_PHASE_CLASSES = (
    (NodeFilter, _run_node_filter),
    (SetFilter, _run_set_filter),
    (Tier, _run_tier),
    (Scorer, _run_scorer),
)


def _run_as(step: Step) -> Callable[[Any, Candidates, Any, PodContext, Outcome], Candidates]:
    for phase_class, run_as in _PHASE_CLASSES:
        if isinstance(step, phase_class):
            _RUN_AS[type(step)] = run_as
            return run_as
    raise TypeError(f"step {step.name} has no known phase class")


def _first_left_out(cands: Candidates, kept: Candidates, values: Mapping[str, int], best: int) -> str:
    """The first candidate the tier left out (from the array when there is one: reading a Remaining
    node by node would make it a dict)."""
    if isinstance(values, ArrayValues):
        return values.first_not(best)
    return next(n for n in cands if n not in kept)


def _pick(view: ClusterView, cands: Candidates, names: Iterable[str]) -> Candidates:
    names = list(names)
    return known(view, dict(zip(names, map(cands.__getitem__, names), strict=True)))
