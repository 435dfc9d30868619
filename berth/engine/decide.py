"""decide(): the one function every entry point asks."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any, overload

import numpy as np

from berth.cluster.model import Pod
from berth.cluster.name_table import Found, Guessed
from berth.cluster.view import ClusterView
from berth.engine.chain import Member, Or, Pipe, run
from berth.engine.decision import Decision, DeferredSummary, PlacementSummary
from berth.engine.draws import Seeded
from berth.engine.ledger import Candidates, Ledger, StepRun
from berth.engine.pipeline import Pipeline
from berth.engine.slots import Picked, is_known, known, slots_of
from berth.engine.step import PodContext, Skipped, Step
from berth.engine.types import (
    ErrorInfo,
    Event,
    Kind,
    Phase,
    Reason,
)
from berth.engine.wording import failed_placement, no_choice, no_fit_message, placed, step_events
from berth.errors import SpecError

UNKNOWN_NODE = "berth/cluster-view"
CANDIDATES_MEMO = "engine/recent-candidates"
RECENT_CANDIDATES = 4  # filter's list (every node), prioritize's (the kept ones), bind's (one node)
TOP_CANDIDATES = 5
# Scores are compared rounded to 6 decimals; a node more than this below the highest unrounded total
# cannot round to the highest (or to any of the top few), so only the nodes within it are rounded.
ROUNDING_MARGIN = 1e-5


def decide(
    pod: Pod,
    view: ClusterView,
    pipeline: Pipeline,
    *,
    candidates: Iterable[str] | Found | None = None,
    seed: int | None = None,
) -> Decision:
    """Where `pod` goes among `candidates` (default: every node in the view), and why; candidates
    are names, or names already found in the view's slots (`Found`, from ClusterView.name_table).
    The order of `candidates` does not matter: the chain takes them in name order.

    Never raises for bad input: an invalid specification is a Decision with a 400 error, no fit is a
    Decision with a 409 error.
    """
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    chain_names = pipeline.step_names
    found = candidates if isinstance(candidates, Found) and candidates.layout is view.slots() else None
    names: Sequence[str]  # a Found is read as names only if the decision needs them
    if candidates is None:  # every node, in the view's order: slot by slot
        layout = view.slots()
        names = found = Found(layout, np.arange(len(layout.names)))
    else:
        names = candidates if isinstance(candidates, Found) else list(candidates)

    try:
        spec = pipeline.compile_pod(pod)
    except SpecError as exc:
        return _invalid(pod, list(dict.fromkeys(names)), exc, chain_names, seed)

    def checked() -> Decision:
        # Names whose slots were found by their hashes alone (Guessed): decided again on the names
        # themselves when what the decision answers does not rest on names asked (a name asked whose
        # hash is another node's, about one in 2**64).
        decision = _decide(pod, spec, view, pipeline, names, found, chain_names, seed)
        if isinstance(names, Guessed) and not names.answers(decision.chosen):
            decision = _decide(pod, spec, view, pipeline, names.names(), None, chain_names, seed)
        return decision

    # The pod asked about again where the view already holds it (a bind checked again, audit, explain)
    # is taken off for the decision: no step counts it as its own neighbour or as room taken.
    held = held_self(view, pod)
    if held is None:
        return checked()
    with view.lifted(held):
        return checked()


def indexed_candidates(pod: Pod, view: ClusterView, pipeline: Pipeline) -> list[str] | None:
    """The nodes the pod's hard steps in sequence (not inside an `or`) list from an index
    (Step.accepted): every node the chain may keep is among them. None: no step can list them. For a
    decision over every node that is only asked which nodes pass, this spares asking the others."""
    try:
        spec = pipeline.compile_pod(pod)
    except SpecError:
        return None
    ctx = PodContext(pod=pod, spec=spec, view=view, randoms=Seeded(0))
    out: set[str] | None = None
    for step in _in_sequence(pipeline.chain):
        if step.phase is not Phase.HARD or type(step).accepted is Step.accepted:
            continue
        prepared = step.prepare(ctx)
        if isinstance(prepared, Skipped):
            continue
        accepted = step.accepted(prepared, ctx)
        if accepted is not None:
            out = set(accepted) if out is None else out & set(accepted)
    return None if out is None else [n for n in out if view.node(n) is not None]


def _in_sequence(member: Member) -> Iterator[Step]:
    if isinstance(member, Pipe):
        for m in member.members:
            yield from _in_sequence(m)
    elif not isinstance(member, Or):
        yield member


def held_self(view: ClusterView, pod: Pod) -> Pod | None:
    """The pod itself, when the view holds it on a node."""
    held = view.pod(pod.key)
    return held if held is not None and held.node_name and held.same_pod(pod) else None


def _decide(
    pod: Pod,
    spec: Any,
    view: ClusterView,
    pipeline: Pipeline,
    names: Sequence[str],
    found: Found | None,
    chain_names: tuple[str, ...],
    seed: int,
) -> Decision:
    ctx = PodContext(pod=pod, spec=spec, view=view, randoms=Seeded(seed))
    cands, unknown = _candidates(view, names, found.slots if found is not None else None)
    if len(cands) + len(unknown) < len(names):  # a node named twice counts once
        names = list(dict.fromkeys(names))

    try:
        outcome = run(pipeline.chain, cands, ctx)
    except SpecError as exc:  # a contradiction only a step's prepare() can see
        return _invalid(pod, names, exc, chain_names, seed)

    removals = [unknown, *outcome.removals] if unknown else outcome.removals
    ledger = Ledger(names, outcome.kept, removals, outcome.columns, outcome.runs)
    feasible = len(names) - ledger.blocked()
    events: list[Event] = list(getattr(spec, "warnings", ()))

    if not ledger.kept:
        message = no_fit_message(pipeline.chain, ctx, ledger.removals, len(names))
        events.append(failed_placement(message))
        return Decision(
            pod=pod.key,
            chosen=None,
            error=ErrorInfo(409, message),
            events=tuple(events),
            chain=chain_names,
            seed=seed,
            ledger=ledger,
        )

    array = ledger.total_array()
    totals: list[float] | np.ndarray = array if array is not None else ledger.totals()
    # With the totals as an array, only the few best are read by name: looked up by slot.
    finalists = _Named(view, ledger.kept) if array is not None else ledger.candidate_names()
    best, tied = _tied(view, ledger.kept, finalists, totals)
    chosen = tied[0] if len(tied) == 1 else ctx.rng.choice(tied)
    had_no_choice = feasible == 1

    summary: PlacementSummary | None = None
    rest: DeferredSummary | None = None
    if had_no_choice:
        summary = PlacementSummary(score=best, margin=None, top=((chosen, best),), feasible=feasible)
        events.append(no_choice(chosen, len(names)))
    else:
        events.extend(step_events(pipeline.with_events, ledger.runs, ctx))

        def work() -> tuple[PlacementSummary, tuple[Event, ...]]:
            # The runners-up and the words of the placement, read from this decision's own totals and
            # ledger only: the same whenever they are worked out (Decision.summary).
            ranked = _ranked(finalists, totals, tied, best, TOP_CANDIDATES + 1)
            runner_up = next(((n, s) for n, s in ranked if n != chosen), None)
            summary = PlacementSummary(
                score=best,
                margin=best - runner_up[1] if runner_up else None,
                top=tuple(ranked[:TOP_CANDIDATES]),
                feasible=feasible,
                set_aside=ledger.set_aside(),
            )
            words = placed(chosen, summary, len(finalists), runner_up and runner_up[0], len(tied), seed)
            return summary, tuple(words)

        rest = DeferredSummary(feasible, work)

    return Decision(
        pod=pod.key,
        chosen=chosen,
        error=None,
        events=tuple(events),
        chain=chain_names,
        seed=seed,
        had_no_choice=had_no_choice,
        ledger=ledger,
        summary=summary,
        rest=rest,
    )


class _Named(Sequence[str]):
    """The candidates' names by position, each looked up by its slot when read."""

    __slots__ = ("_layout", "_names", "_slots")

    def __init__(self, view: ClusterView, kept: Candidates) -> None:
        self._layout = view.slots()
        self._names = self._layout.names
        self._slots = slots_of(kept, view)

    def by_name(self, at: np.ndarray) -> np.ndarray:
        """The positions `at`, reordered as their names sort (the names are not read)."""
        return at[np.argsort(self._layout.rank[self._slots[at]], kind="stable")]

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._names[s] for s in self._slots[i].tolist()]
        return self._names[int(self._slots[i])]

    def __iter__(self) -> Iterator[str]:
        return map(self._names.__getitem__, self._slots.tolist())


def _candidates(
    view: ClusterView, names: Sequence[str], slots: np.ndarray | None = None
) -> tuple[Candidates, dict[str, Reason]]:
    """The asked-for nodes the view knows, as name -> NodeState in the order of their names, and a
    Reason for the others; `slots` are the names' slots when they were found already.

    The order kube-scheduler lists the nodes in changes from pod to pod (its filters run in parallel)
    and does not change a decision: the chain sees the candidates sorted by name. So a decision is
    replayed from its seed without knowing that order, and the same nodes asked about again, pod after
    pod, are the same candidates until a node changes (the runner never changes them), with everything
    the chain worked out about them."""
    layout = view.slots()
    index = layout.index
    unknown_names: list[str] = []
    try:
        if slots is None and isinstance(names, list):
            slots = layout.find(names)
        if slots is None:
            slots = np.fromiter(map(index.__getitem__, names), np.intp, len(names))
    except KeyError:
        slots = np.fromiter((index[n] for n in names if n in index), np.intp)
        unknown_names = list(dict.fromkeys(n for n in names if n not in index))
    # The nodes asked about, marked by slot: the same nodes in any order give the same marks (a node
    # named twice is marked once). Marked by slot, not by name order: the slots come in the order
    # of the request, and looking each one's rank up would read a table at random.
    marks = np.zeros(len(layout.names), dtype=bool)
    marks[slots] = True
    key = (np.packbits(marks).tobytes(), tuple(unknown_names))
    recent: list[tuple[tuple, Candidates, dict[str, Reason]]] = view.node_memo(CANDIDATES_MEMO, list)
    for i, (asked, cands, unknown) in enumerate(recent):
        if asked == key:
            recent.insert(0, recent.pop(i))
            if not is_known(view, cands):  # dropped from what the engine keeps since: its slots again
                known(view, cands, slots=(layout, layout.by_rank[np.flatnonzero(marks[layout.by_rank])]))
            return cands, unknown
    ranks = np.flatnonzero(marks[layout.by_rank])  # the candidates' places in name order
    # Names and states picked by place from two lists, and only when a step reads them node by node
    # (the default chain does not): live, between two pods the other processes have the caches, and
    # every name and state read is a miss.
    cands = Picked(layout, view.sorted_names(), view.sorted_states(), ranks, marks)
    known(view, cands, slots=(layout, layout.by_rank[ranks]))
    unknown = {}
    if unknown_names:
        missing = Reason(UNKNOWN_NODE, Kind.EXHAUSTED, "node is not in berth's cluster view yet")
        unknown = dict.fromkeys(unknown_names, missing)
    recent.insert(0, (key, cands, unknown))
    del recent[RECENT_CANDIDATES:]
    return cands, unknown


def _tied(
    view: ClusterView, kept: Candidates, names: Sequence[str], totals: list[float] | np.ndarray
) -> tuple[float, list[str]]:
    """The highest rounded score, and the candidates that have it sorted by name."""
    if isinstance(totals, np.ndarray):
        highest = int(totals.argmax())
        top = float(totals[highest])
        near = int(np.count_nonzero(totals >= top - ROUNDING_MARGIN))
        if near == 1:  # no other candidate can round to the highest score: counted, not listed
            return round(top, 6), [names[highest]]
        lowest = float(totals.min()) if near == len(totals) else -math.inf
    else:
        top, lowest = max(totals), min(totals)
    best = round(top, 6)
    if lowest == top:  # every candidate scores the same (no scorer, or all equal)
        return best, _sorted(view, names, kept)
    tied = [n for n, t in _near(names, totals, top - ROUNDING_MARGIN) if round(t, 6) == best]
    return best, _sorted(view, tied, None)


def _near(
    names: Sequence[str], totals: list[float] | np.ndarray, floor: float
) -> Iterable[tuple[str, float]]:
    """(name, total) of the candidates whose total is at least `floor`, in candidate order."""
    if isinstance(totals, np.ndarray):
        at = (totals >= floor).nonzero()[0]
        return zip(map(names.__getitem__, at.tolist()), totals[at].tolist(), strict=True)
    return compress(zip(names, totals, strict=True), map(floor.__le__, totals))


def _sorted(view: ClusterView, names: Sequence[str], members: Mapping[str, Any] | None) -> list[str]:
    """`names` sorted; thousands of them are picked from the view's sorted names instead, which
    costs less than sorting."""
    if len(names) * 16 < len(view):  # a few: sorting them is cheaper than a pass over every node
        return sorted(names)
    wanted = members if members is not None else set(names)
    return list(filter(wanted.__contains__, view.sorted_names()))


def _ranked(
    names: Sequence[str], totals: list[float] | np.ndarray, tied: list[str], best: float, count: int
) -> list[tuple[str, float]]:
    """The `count` best candidates by (rounded score descending, name), with their rounded scores:
    the tied ones first, then the best of the others."""
    ranked = [(n, best) for n in tied[:count]]
    if len(ranked) == count or len(tied) == len(names):
        return ranked
    values = totals if isinstance(totals, np.ndarray) else np.array(totals, np.float64)
    at = len(values) - min(count, len(values))
    floor = float(np.partition(values, at)[at]) - ROUNDING_MARGIN  # the count-th highest, less the margin
    # Thousands of candidates may tie just below the best: they are put in name order by their
    # places (a _Named reads no name for it) and only the few taken are read by name.
    near = (values >= floor).nonzero()[0]
    if isinstance(names, _Named):
        near = names.by_name(near)
    else:
        near = np.array(sorted(near.tolist(), key=names.__getitem__), np.intp)
    near_values = values[near].tolist()
    rounded = {v: round(v, 6) for v in near_values}  # Python's rounding, once per distinct total
    scores = np.fromiter(map(rounded.__getitem__, near_values), np.float64, len(near_values))
    keep = scores != best  # every candidate that rounds to the best is among the tied
    taken = np.argsort(-scores[keep], kind="stable")[: count - len(ranked)]
    picked = zip(near[keep][taken].tolist(), scores[keep][taken].tolist(), strict=True)
    return ranked + [(names[i], v) for i, v in picked]


def _invalid(pod: Pod, names: Sequence[str], exc: SpecError, chain: tuple[str, ...], seed: int) -> Decision:
    message = exc.message
    not_evaluated = Reason("berth/spec", Kind.UNMET, "not evaluated: the specification is invalid")
    spec = StepRun("berth/spec", Phase.HARD, {}, {}, {}, note=f"invalid: {message}")
    return Decision(
        pod=pod.key,
        chosen=None,
        error=ErrorInfo(400, message, tuple(exc.errors)),
        ledger=Ledger(names, {}, [dict.fromkeys(names, not_evaluated)], [], [spec]),
        events=(Event("Warning", "InvalidPlacementSpec", message),),
        chain=chain,
        seed=seed,
    )
