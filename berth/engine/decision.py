"""The engine's one answer for one pod: the Decision.

A Decision about 5000 nodes is mostly read in part: the extender wants the candidates, the reasons
of the others and the scores, never 5000 result objects. So the engine hands the Decision its
ledger (berth.engine.ledger) and the per-node results and step traces are built from it the first
time someone reads `nodes` or `steps`; what they hold is the same either way.
"""

from __future__ import annotations

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


class Decision:
    """The engine's one answer for one pod (docs/engine.md).

    Every answer is read from the engine's ledger: `nodes` (every node's result, in the order the
    nodes were asked about) and `steps` (the trace) are built on first read; the extender reads what
    it needs directly: `candidate_names()`, `failures()` and `scores()`.
    """

    __slots__ = (
        "_ledger",
        "_nodes",
        "_steps",
        "chain",
        "chosen",
        "error",
        "events",
        "had_no_choice",
        "pod",
        "seed",
        "summary",
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
    ) -> None:
        self.summary = summary
        self.pod = pod
        self.chosen = chosen
        self.error = error
        self.events = events
        self.chain = chain
        self.seed = seed
        self.had_no_choice = had_no_choice
        self._ledger = ledger
        self._nodes: tuple[NodeResult, ...] | None = None
        self._steps: tuple[StepTrace, ...] | None = None

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
            events=self.events,
            chain=self.chain,
            seed=self.seed,
            had_no_choice=self.had_no_choice,
            summary=self.summary,
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
