"""The values the engine produces: reasons, events, per-node results, step traces and errors (the
Decision that holds them is berth.engine.decision)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """The kinds of "no" (STYLE.md): the extender maps them to the scheduler's two failure maps."""

    UNMET = "unmet"  # a rule the node cannot meet; preemption cannot help
    EXHAUSTED = "exhausted"  # capacity or a neighbour count that an eviction could free
    SET_ASIDE = "set-aside"  # a soft step kept other, better nodes; the node could host the pod


class Phase(StrEnum):
    """Where a step stands in the chain (docs/engine.md, "The flow of one decision")."""

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
        return len(remaining) if isinstance(remaining, Sized) else len(self.remaining)

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

    __hash__ = None  # type: ignore[assignment]  # equal by value and not frozen: unhashable

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
