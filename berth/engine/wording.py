"""The events a decision adds to the pod, in the words kube-scheduler's own events use where it has
them ("0/N nodes are available: ..."): what the engine's decide() tells the operator, worded here so
that deciding and wording stay apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from berth.engine.chain import Member, flatten
from berth.engine.decision import PlacementSummary
from berth.engine.ledger import StepRun, shared_reason
from berth.engine.step import PodContext, Skipped, Step
from berth.engine.types import Event, Kind, Reason


def failed_placement(message: str) -> Event:
    return Event("Warning", "FailedPlacement", message)


def no_choice(chosen: str, asked: int) -> Event:
    return Event(
        "Normal",
        "HadNoChoice",
        f"{chosen} was the only feasible node of {asked}: placed there without consulting "
        "preferences (a placement made without a choice, neither honoured nor violated)",
    )


def placed(
    chosen: str, summary: PlacementSummary, finalists: int, runner_up: str | None, tied: int, seed: int
) -> list[Event]:
    """FinalCandidates (the best candidates, with their scores) and Placed (the node, its score, its
    margin over the runner-up, how a tie was broken)."""
    shown = ", ".join(f"{name} ({_num(score)})" for name, score in summary.top)
    more = f" and {finalists - len(summary.top)} more" if finalists > len(summary.top) else ""
    final = f"schedule final candidates: {shown}{more} of {summary.feasible} feasible"
    margin = f", margin {_num(summary.margin)} over {runner_up}" if runner_up is not None else ""
    tie = f"; tie among {tied} broken by seed {seed}" if tied > 1 else ""
    return [
        Event("Normal", "FinalCandidates", final),
        Event("Normal", "Placed", f"placed on {chosen} with score {_num(summary.score)}{margin}{tie}"),
    ]


def step_events(steps: Mapping[str, Step], runs: Sequence[StepRun], ctx: PodContext) -> list[Event]:
    """The events the steps add to a placed pod (`steps`: those that define any, by name; only they
    are traced for it). A step that skipped the pod adds none: it did nothing for it (and tracing it
    cost a placed pod with no rule a twentieth of its filter, cold)."""
    out = []
    for run_ in runs:
        step = steps.get(run_.step)
        if step is None or run_.step not in ctx.prepared:
            continue
        prepared = ctx.prepared[run_.step]
        if isinstance(prepared, Skipped) or not step.has_event(prepared):
            continue
        event = step.event(run_.trace(), prepared, ctx)
        if event is not None:
            out.append(event)
    return out


def _num(value: float | None) -> str:
    value = value or 0.0
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}".rstrip("0")


def no_fit_message(
    chain: Member, ctx: PodContext, removals: list[Mapping[str, Reason]] | dict[str, Reason], total: int
) -> str:
    """The 409 text: the user constraints that removed nodes, by name, then the count of every
    reason in kube-scheduler's "0/N nodes are available" form."""
    if isinstance(removals, dict):
        removals = [removals]
    counts: Counter = Counter()
    blocking_steps: set[str] = set()
    for removed in removals:
        shared = shared_reason(removed)
        if shared is not None:
            counts[shared.short()] += len(removed)
            if shared.kind is not Kind.SET_ASIDE:
                blocking_steps.add(shared.step)
            continue
        for reason in removed.values():
            counts[reason.short()] += 1
            if reason.kind is not Kind.SET_ASIDE:
                blocking_steps.add(reason.step)
    constraints = []
    for step in flatten(chain):
        if step.name in blocking_steps:
            text = step.constraint(ctx.prepared.get(step.name))
            if text and text not in constraints:
                constraints.append(text)
    histogram = ", ".join(f"{n} {text}" for text, n in sorted(counts.items()))
    available = f"0/{total} nodes are available: {histogram}." if total else "0/0 nodes are available."
    if constraints:
        return f"no node satisfies {'; '.join(constraints)}; {available}"
    return available
