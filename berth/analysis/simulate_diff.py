"""`berth simulate --diff`: the pods whose node or verdict a what-if (--policy, --config) changes.

Both sides are decisions of the one engine, the same pods placed in the same order with the same
seeds, on the cluster as it is and as the what-if would have it; a pod is listed when its node or its
verdict (placed, refused, invalid) differs, with why, as the what-if's decision gives it: the reason the
node it had before is now refused, the refusal itself, or the scores that now prefer another node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from berth.engine.decision import Decision


@dataclass(frozen=True, slots=True)
class PodChange:
    pod: str
    before: str  # a node, or "refused (409)" / "invalid (400)"
    after: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "before": self.before, "after": self.after, "reason": self.reason}


def outcome(decision: Decision) -> str:
    if decision.chosen:
        return decision.chosen
    code = decision.error.code if decision.error else 0
    return f"invalid ({code})" if code == 400 else f"refused ({code})"


def changes(before: Sequence[Decision], after: Sequence[Decision]) -> list[PodChange]:
    """The pods, in the order placed, whose outcome differs between the two runs."""
    out = []
    for old, new in zip(before, after, strict=True):
        was, now = outcome(old), outcome(new)
        if was != now:
            out.append(PodChange(new.pod, was, now, _why(old, new)))
    return out


def _why(old: Decision, new: Decision) -> str:
    if new.error is not None:
        return new.error.message
    if old.error is not None:
        return f"the what-if places it; before: {old.error.message}"
    nodes = {n.name: n for n in new.nodes}
    had = nodes.get(old.chosen or "")
    if had is not None and not had.feasible and had.reasons:
        return f"{had.name} is refused now: {had.reasons[0].short()}"
    if had is not None and not had.candidate and had.reasons:
        return f"{had.name} is set aside now: {had.reasons[0].short()}"
    chosen = nodes.get(new.chosen or "")
    if had is not None and chosen is not None:
        return f"scores now prefer {chosen.name} ({_score(chosen.score)}) to {had.name} ({_score(had.score)})"
    return "the pods placed before it went elsewhere"


def _score(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"
