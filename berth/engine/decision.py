"""The engine's one answer for one pod: the Decision.

A Decision about 5000 nodes is mostly read in part: the extender wants the candidates, the reasons
of the others and the scores, never 5000 result objects. So the engine hands the Decision its
ledger (berth.engine.ledger) and the per-node results and step traces are built from it the first
time someone reads `nodes` or `steps`; what they hold is the same either way. The same goes for the
placement's summary and its last events (the runners-up ranked, the words of the placement): the
extender answers kube-scheduler with the chosen node first and has them worked out after the answer
is sent (berth.extender.placer, `Placer.bookkeep`), out of kube-scheduler's scheduling cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from berth.engine.ledger import Ledger
from berth.engine.types import ErrorInfo, Event, NodeResult, Reason, StepTrace


@dataclass(frozen=True, slots=True)
class PlacementSummary:
    """The numbers of a placement, for the record the extender puts on the pod: the chosen node's
    score, its margin over the runner-up (None without one), the top candidates with their scores,
    how many nodes were feasible, and how many of them each step set aside."""

    score: float
    margin: float | None
    top: tuple[tuple[str, float], ...]
    feasible: int
    # The feasible nodes that did not reach the end of the chain, per step that set them aside: why
    # `top` lists fewer nodes than `feasible` counts.
    set_aside: tuple[tuple[str, int], ...] = ()


class DeferredSummary:
    """The part of a placed decision worked out when first read: its summary and its last events
    (`work` reads only what the decision itself holds, never the cluster view, so it gives the same
    whenever it runs). Shared with the decision's `outcome()`, so it is worked out once."""

    __slots__ = ("done", "feasible", "work")

    def __init__(self, feasible: int, work: Callable[[], tuple[PlacementSummary, tuple[Event, ...]]]) -> None:
        self.feasible = feasible
        self.work: Callable[[], tuple[PlacementSummary, tuple[Event, ...]]] | None = work
        self.done: tuple[PlacementSummary, tuple[Event, ...]] | None = None

    def get(self) -> tuple[PlacementSummary, tuple[Event, ...]]:
        if self.done is None:
            assert self.work is not None
            self.done, self.work = self.work(), None  # the work's closure (and the ledger it holds) goes
        return self.done


class Decision:
    """The engine's one answer for one pod (docs/engine.md).

    Every answer is read from the engine's ledger: `nodes` (every node's result, in the order the
    nodes were asked about) and `steps` (the trace) are built on first read; the extender reads what
    it needs directly: `candidate_names()`, `failures()` and `scores()`.
    """

    __slots__ = (
        "_events",
        "_ledger",
        "_nodes",
        "_rest",
        "_steps",
        "_summary",
        "chain",
        "chosen",
        "error",
        "had_no_choice",
        "pod",
        "seed",
    )

    def __init__(
        self,
        pod: str,
        chosen: str | None,
        error: ErrorInfo | None,
        ledger: Ledger,
        events: tuple[Event, ...] = (),
        chain: tuple[str, ...] = (),
        seed: int = 0,
        had_no_choice: bool = False,
        summary: PlacementSummary | None = None,
        rest: DeferredSummary | None = None,
    ) -> None:
        self._summary = summary
        self._rest = rest  # the summary and the events after `events` (DeferredSummary), worked out when read
        self.pod = pod
        self.chosen = chosen
        self.error = error
        self._events = events
        self.chain = chain
        self.seed = seed
        self.had_no_choice = had_no_choice
        self._ledger = ledger
        self._nodes: tuple[NodeResult, ...] | None = None
        self._steps: tuple[StepTrace, ...] | None = None

    @property
    def summary(self) -> PlacementSummary | None:
        if self._rest is not None:
            return self._rest.get()[0]
        return self._summary

    @property
    def events(self) -> tuple[Event, ...]:
        if self._rest is not None:
            return self._events + self._rest.get()[1]
        return self._events

    @events.setter
    def events(self, events: tuple[Event, ...]) -> None:
        if self._rest is not None:  # the summary stays; the events are the ones given
            self._summary, self._rest = self._rest.get()[0], None
        self._events = events

    @property
    def early_events(self) -> tuple[Event, ...]:
        """The events known as soon as the decision is made: every warning is among them (those
        worked out with the summary only say where the pod was placed)."""
        return self._events

    @property
    def feasible(self) -> int:
        """How many of the nodes asked about are feasible (0 without a placement), without working
        out the summary."""
        if self._rest is not None:
            return self._rest.feasible
        return self._summary.feasible if self._summary is not None else 0

    def work_out_summary(self) -> None:
        """Work out the summary and the last events now, if not yet."""
        if self._rest is not None:
            self._rest.get()

    @property
    def nodes(self) -> tuple[NodeResult, ...]:
        if self._nodes is None:
            self._nodes = self._ledger.results()
        return self._nodes

    @property
    def steps(self) -> tuple[StepTrace, ...]:
        if self._steps is None:
            self._steps = self._ledger.traces()
        return self._steps

    @property
    def candidates(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.candidate]

    def node(self, name: str) -> NodeResult | None:
        return next((n for n in self.nodes if n.name == name), None)

    def candidate_names(self) -> list[str]:
        """The nodes that reached the end of the chain, in the order they were asked about."""
        return list(self._ledger.candidate_names())

    def failures(self) -> dict[str, Reason]:
        """Every node that is not a candidate -> a reason with its step, kind and short text (the
        node-side values of a reason shared by many nodes may be another node's)."""
        return self._ledger.failures()

    def failure_texts(self) -> tuple[dict[str, str], dict[str, str]]:
        """The extender's two failure maps, node -> the short text of its reason: FailedNodes (an
        eviction could help, or set aside) and FailedAndUnresolvableNodes (a rule it cannot meet)."""
        return self._ledger.failure_texts()

    def scores(self) -> dict[str, float]:
        """Candidate -> its score."""
        return self._ledger.scores()

    def outcome(self) -> Decision:
        """The decision without its per-node results and trace: what is worth keeping once it has been
        answered (a ledger over thousands of nodes is large)."""
        return Decision(
            pod=self.pod,
            chosen=self.chosen,
            error=self.error,
            ledger=Ledger.empty(),
            events=self._events,
            chain=self.chain,
            seed=self.seed,
            had_no_choice=self.had_no_choice,
            summary=self._summary,
            rest=self._rest,
        )

    def _key(self) -> tuple:
        return (self.pod, self.chosen, self.error, self.nodes, self.events, self.steps, self.chain, self.seed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # equal by value and not frozen: unhashable

    def __repr__(self) -> str:
        return f"Decision(pod={self.pod!r}, chosen={self.chosen!r}, error={self.error!r}, seed={self.seed!r})"

    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod,
            "chosen": self.chosen,
            "error": self.error.to_dict() if self.error else None,
            "hadNoChoice": self.had_no_choice,
            "seed": self.seed,
            "nodes": [n.to_dict() for n in self.nodes],
            "events": [e.to_dict() for e in self.events],
        }
        if detail:
            out["chain"] = list(self.chain)
            out["steps"] = [s.to_dict() for s in self.steps]
        return out
