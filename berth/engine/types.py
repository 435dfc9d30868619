"""The values the engine produces: reasons, events, per-node results and the Decision."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
        return round(sum(p.weighted for p in self.parts.values()), 6)

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


@dataclass(frozen=True, slots=True)
class StepTrace:
    """What one step did, as `simulate --detail` shows it (the seed's step summary)."""

    step: str
    phase: str
    remaining: tuple[str, ...]
    removed: dict[str, Reason] = field(default_factory=dict)
    scores: dict[str, ScorePart] = field(default_factory=dict)
    note: str = ""

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
class Decision:
    """The engine's one answer for one pod (DESIGN.md, principle 1)."""

    pod: str
    chosen: str | None
    error: ErrorInfo | None
    nodes: tuple[NodeResult, ...]
    events: tuple[Event, ...]
    steps: tuple[StepTrace, ...]
    chain: tuple[str, ...]
    seed: int
    had_no_choice: bool = False

    @property
    def candidates(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.candidate]

    def node(self, name: str) -> NodeResult | None:
        return next((n for n in self.nodes if n.name == name), None)

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
