"""decide(): the one function every entry point asks."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from berth.cluster.model import Pod
from berth.cluster.view import ClusterView, NodeState
from berth.engine.chain import Member, describe, flatten, run
from berth.engine.step import PodContext
from berth.engine.types import Decision, ErrorInfo, Event, Kind, NodeResult, Reason, StepTrace
from berth.errors import SpecError

UNKNOWN_NODE = "berth/cluster-view"
TOP_CANDIDATES = 5


@dataclass(frozen=True)
class Pipeline:
    """A chain of steps and the function that compiles a pod's berth annotations for it."""

    chain: Member
    compile_pod: Callable[[Pod], Any]

    def names(self) -> list[Any]:
        return describe(self.chain)


def decide(
    pod: Pod,
    view: ClusterView,
    pipeline: Pipeline,
    *,
    candidates: Iterable[str] | None = None,
    seed: int | None = None,
) -> Decision:
    """Where `pod` goes among `candidates` (default: every node in the view), and why.

    Never raises for bad input: an invalid specification is a Decision with a 400 error, no fit is a
    Decision with a 409 error.
    """
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    chain_names = tuple(s.name for s in flatten(pipeline.chain))
    names = list(view.node_names()) if candidates is None else list(dict.fromkeys(candidates))

    try:
        spec = pipeline.compile_pod(pod)
    except SpecError as exc:
        return _invalid(pod, names, exc, chain_names, seed)

    ctx = PodContext(pod=pod, spec=spec, view=view, rng=random.Random(seed))
    states: list[NodeState] = []
    unknown: dict[str, Reason] = {}
    for name in names:
        state = view.state(name)
        if state is None:
            unknown[name] = Reason(UNKNOWN_NODE, Kind.EXHAUSTED, "node is not in berth's cluster view yet")
        else:
            states.append(state)

    try:
        outcome = run(pipeline.chain, states, ctx)
    except SpecError as exc:  # a contradiction only a step's prepare() can see
        return _invalid(pod, names, exc, chain_names, seed)

    removed = {**unknown, **outcome.removed}
    kept = {s.node.name for s in outcome.kept}
    results = tuple(
        NodeResult(
            name=name,
            feasible=name not in removed or removed[name].kind is Kind.SET_ASIDE,
            reasons=(removed[name],) if name in removed else (),
            parts=outcome.parts.get(name, {}),
            candidate=name in kept,
        )
        for name in names
    )
    feasible = [r for r in results if r.feasible]
    events: list[Event] = list(getattr(spec, "warnings", ()))

    if not kept:
        message = no_fit_message(pipeline.chain, ctx, removed, len(names))
        events.append(Event("Warning", "FailedPlacement", message))
        return Decision(
            pod=pod.key,
            chosen=None,
            error=ErrorInfo(409, message),
            nodes=results,
            events=tuple(events),
            steps=tuple(outcome.trace),
            chain=chain_names,
            seed=seed,
        )

    finalists = [r for r in results if r.candidate]
    best = max(r.score or 0.0 for r in finalists)
    tied = sorted(r.name for r in finalists if (r.score or 0.0) == best)
    chosen = tied[0] if len(tied) == 1 else ctx.rng.choice(tied)
    had_no_choice = len(feasible) == 1

    if had_no_choice:
        events.append(
            Event(
                "Normal",
                "HadNoChoice",
                f"{chosen} was the only feasible node of {len(names)}: placed there without consulting "
                "preferences (a placement made without a choice, neither honoured nor violated)",
            )
        )
    else:
        steps = {s.name: s for s in flatten(pipeline.chain)}
        for trace in outcome.trace:
            step = steps.get(trace.step)
            if step is not None and trace.step in ctx.prepared:
                event = step.event(trace, ctx.prepared[trace.step], ctx)
                if event is not None:
                    events.append(event)
        ranked = sorted(finalists, key=lambda r: (-(r.score or 0.0), r.name))
        shown = ", ".join(f"{r.name} ({_num(r.score)})" for r in ranked[:TOP_CANDIDATES])
        more = f" and {len(ranked) - TOP_CANDIDATES} more" if len(ranked) > TOP_CANDIDATES else ""
        events.append(
            Event(
                "Normal",
                "FinalCandidates",
                f"schedule final candidates: {shown}{more} of {len(feasible)} feasible",
            )
        )
        runner_up = next((r for r in ranked if r.name != chosen), None)
        margin = (
            f", margin {_num(best - (runner_up.score or 0.0))} over {runner_up.name}" if runner_up else ""
        )
        tie = f"; tie among {len(tied)} broken by seed {seed}" if len(tied) > 1 else ""
        events.append(Event("Normal", "Placed", f"placed on {chosen} with score {_num(best)}{margin}{tie}"))

    return Decision(
        pod=pod.key,
        chosen=chosen,
        error=None,
        nodes=results,
        events=tuple(events),
        steps=tuple(outcome.trace),
        chain=chain_names,
        seed=seed,
        had_no_choice=had_no_choice,
    )


def _num(value: float | None) -> str:
    value = value or 0.0
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}".rstrip("0")


def no_fit_message(chain: Member, ctx: PodContext, removed: dict[str, Reason], total: int) -> str:
    """The 409 text: the user constraints that removed nodes, by name, then the count of every
    reason in kube-scheduler's "0/N nodes are available" form."""
    constraints = []
    for step in flatten(chain):
        if any(r.step == step.name and r.kind is not Kind.SET_ASIDE for r in removed.values()):
            text = step.constraint(ctx.prepared.get(step.name))
            if text and text not in constraints:
                constraints.append(text)
    counts = Counter(r.short() for r in removed.values())
    histogram = ", ".join(f"{n} {text}" for text, n in sorted(counts.items()))
    available = f"0/{total} nodes are available: {histogram}." if total else "0/0 nodes are available."
    if constraints:
        return f"no node satisfies {'; '.join(constraints)}; {available}"
    return available


def _invalid(pod: Pod, names: list[str], exc: SpecError, chain: tuple[str, ...], seed: int) -> Decision:
    message = exc.message
    not_evaluated = Reason("berth/spec", Kind.UNMET, "not evaluated: the specification is invalid")
    return Decision(
        pod=pod.key,
        chosen=None,
        error=ErrorInfo(400, message, tuple(exc.errors)),
        nodes=tuple(NodeResult(name=n, feasible=False, reasons=(not_evaluated,)) for n in names),
        events=(Event("Warning", "InvalidPlacementSpec", message),),
        steps=(StepTrace("berth/spec", "hard", (), note=f"invalid: {message}"),),
        chain=chain,
        seed=seed,
    )
