"""The values the engine produces: reasons, events, per-node results and the Decision.

A Decision about 5000 nodes is mostly read in part: the extender wants the candidates, the reasons
of the others and the scores, never 5000 result objects. So the engine hands the Decision its
ledger (berth.engine.ledger) and the per-node results and step traces are built from it the first
time someone reads `nodes` or `steps`; what they hold is the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from berth.engine.ledger import Ledger


class Kind(StrEnum):
    """The kinds of "no" (STYLE.md): the extender maps them to the scheduler's two failure maps."""

    UNMET = "unmet"  # a rule the node cannot meet; preemption cannot help
    EXHAUSTED = "exhausted"  # capacity or a neighbour count that an eviction could free
    SET_ASIDE = "set-aside"  # a soft step kept other, better nodes; the node could host the pod


class Phase(StrEnum):
    """Where a step stands in the chain (DESIGN.md, "How the vocabularies compose")."""

    HARD = "hard"  # removes nodes that cannot host the pod
    TIER = "tier"  # keeps only the nodes with the highest value (tag affinity)
    SOFT = "soft"  # removes nodes only while others remain
    SCORE = "score"  # adds to the score of every node


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a step removed a node or set it aside. The message names the rule and the pod-side values,
    so that the same message counts across nodes; node-side numbers go in `values`."""

    step: str
    kind: Kind
    message: str
    values: dict[str, Any] = field(default_factory=dict)

    def short(self) -> str:
        """The text that groups across nodes (what kube-scheduler counts in FailedScheduling)."""
        prefix = "set aside: " if self.kind is Kind.SET_ASIDE else ""
        return f"{prefix}{self.step}: {self.message}"

    def __str__(self) -> str:
        if not self.values:
            return self.short()
        detail = ", ".join(f"{k}={_show(v)}" for k, v in self.values.items())
        return f"{self.short()} ({detail})"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event berth records on the pod."""

    type: str  # Normal | Warning
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "reason": self.reason, "message": self.message}


@dataclass(frozen=True, slots=True)
class ScorePart:
    """One step's contribution to a node's score: raw value, normalised to 0..1, and weighted."""

    raw: float
    normalised: float
    weighted: float


def add_up(values: Iterable[float]) -> float:
    """The parts of a score added left to right, as the engine adds its score columns (the same sum
    on every Python version, and an integer when every part is one)."""
    total: float = 0
    for value in values:
        total += value
    return total


@dataclass(frozen=True, slots=True)
class NodeResult:
    name: str
    feasible: bool
    reasons: tuple[Reason, ...] = ()
    parts: dict[str, ScorePart] = field(default_factory=dict)
    # True when the node reached the end of the chain and could be chosen.
    candidate: bool = False

    @property
    def score(self) -> float | None:
        if not self.feasible:
            return None
        return round(add_up(p.weighted for p in self.parts.values()), 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "feasible": self.feasible,
            "candidate": self.candidate,
            "reasons": [str(r) for r in self.reasons],
            "score": self.score,
            "scoreParts": {k: round(p.weighted, 6) for k, p in self.parts.items()} if self.feasible else {},
        }


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: int  # 400: the specification is invalid; 409: nothing fits
    message: str
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if len(self.errors) > 1:
            out["errors"] = list(self.errors)
        return out


class StepTrace:
    """What one step did, as `simulate --detail` shows it (the seed's step summary).

    `remaining` may be given as any iterable of names (the engine passes the survivors it already
    holds); it becomes a tuple when first read. `removed` and `scores` are read-only mappings, which
    the engine fills lazily: a step that set 5000 nodes aside makes no Reason until one is read.
    """

    __slots__ = ("_remaining", "note", "phase", "removed", "scores", "step")

    def __init__(
        self,
        step: str,
        phase: str,
        remaining: Iterable[str],
        removed: Mapping[str, Reason] | None = None,
        scores: Mapping[str, ScorePart] | None = None,
        note: str = "",
    ) -> None:
        self.step = step
        self.phase = phase
        self._remaining = remaining
        self.removed: Mapping[str, Reason] = {} if removed is None else removed
        self.scores: Mapping[str, ScorePart] = {} if scores is None else scores
        self.note = note

    @property
    def remaining(self) -> tuple[str, ...]:
        if not isinstance(self._remaining, tuple):
            self._remaining = tuple(self._remaining)
        return self._remaining

    def remaining_count(self) -> int:
        """len(remaining), without building the tuple when the survivors are a sized collection."""
        remaining = self._remaining
        return len(remaining) if hasattr(remaining, "__len__") else len(self.remaining)  # type: ignore[arg-type]

    def highest_raw(self) -> float:
        """The highest raw score the step gave (0 when it scored no node)."""
        fast = getattr(self.scores, "highest_raw", None)
        if fast is not None:
            return fast()
        return max((p.raw for p in self.scores.values()), default=0)

    def _key(self) -> tuple:
        return (self.step, self.phase, self.remaining, dict(self.removed), dict(self.scores), self.note)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepTrace) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"StepTrace(step={self.step!r}, phase={self.phase!r}, remaining={self.remaining!r}, "
            f"removed={dict(self.removed)!r}, scores={dict(self.scores)!r}, note={self.note!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "phase": self.phase, "remaining": list(self.remaining)}
        if self.removed:
            out["removed"] = {n: str(r) for n, r in self.removed.items()}
        if self.scores:
            out["scores"] = {
                n: {"raw": p.raw, "normalised": round(p.normalised, 6), "weighted": round(p.weighted, 6)}
                for n, p in self.scores.items()
            }
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class PlacementSummary:
    """The numbers of a placement, for the record the extender puts on the pod: the chosen node's
    score, its margin over the runner-up (None without one), the top candidates with their scores,
    and how many nodes were feasible."""

    score: float
    margin: float | None
    top: tuple[tuple[str, float], ...]
    feasible: int


class Decision:
    """The engine's one answer for one pod (DESIGN.md, principle 1).

    `nodes` (every node's result, in the order the nodes were asked about) and `steps` (the trace)
    are built on first read from the engine's ledger. The extender reads what it needs directly:
    `candidate_names()`, `failures()` and `scores()`.
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
        nodes: tuple[NodeResult, ...] | None = None,
        events: tuple[Event, ...] = (),
        steps: tuple[StepTrace, ...] | None = None,
        chain: tuple[str, ...] = (),
        seed: int = 0,
        had_no_choice: bool = False,
        *,
        ledger: Ledger | None = None,
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
        self._nodes = nodes if nodes is not None or ledger is not None else ()
        self._steps = steps if steps is not None or ledger is not None else ()

    @property
    def nodes(self) -> tuple[NodeResult, ...]:
        if self._nodes is None:
            assert self._ledger is not None
            self._nodes = self._ledger.results()
        return self._nodes

    @property
    def steps(self) -> tuple[StepTrace, ...]:
        if self._steps is None:
            assert self._ledger is not None
            self._steps = self._ledger.traces()
        return self._steps

    @property
    def candidates(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.candidate]

    def node(self, name: str) -> NodeResult | None:
        return next((n for n in self.nodes if n.name == name), None)

    def candidate_names(self) -> list[str]:
        """The nodes that reached the end of the chain, in the order they were asked about."""
        if self._ledger is not None:
            return list(self._ledger.candidate_names())
        return [n.name for n in self.nodes if n.candidate]

    def failures(self) -> dict[str, Reason]:
        """Every node that is not a candidate -> a reason with its step, kind and short text (the
        node-side values of a reason shared by many nodes may be another node's)."""
        if self._ledger is not None:
            return self._ledger.failures()
        return {n.name: n.reasons[0] for n in self.nodes if not n.candidate and n.reasons}

    def failure_texts(self) -> tuple[dict[str, str], dict[str, str]]:
        """The extender's two failure maps, node -> the short text of its reason: FailedNodes (an
        eviction could help, or set aside) and FailedAndUnresolvableNodes (a rule it cannot meet)."""
        if self._ledger is not None:
            return self._ledger.failure_texts()
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for name, reason in self.failures().items():
            (unresolvable if reason.kind is Kind.UNMET else failed)[name] = reason.short()
        return failed, unresolvable

    def scores(self) -> dict[str, float]:
        """Candidate -> its score."""
        if self._ledger is not None:
            return self._ledger.scores()
        return {n.name: n.score for n in self.nodes if n.candidate and n.score is not None}

    def outcome(self) -> Decision:
        """The decision without its per-node results and trace: what is worth keeping once it has been
        answered (a ledger over thousands of nodes is large)."""
        return Decision(
            pod=self.pod,
            chosen=self.chosen,
            error=self.error,
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

    __hash__ = None  # type: ignore[assignment]

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
