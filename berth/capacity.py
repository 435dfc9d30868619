"""`berth capacity`: how many more pods of one shape fit, counted by placing them.

One more pod after another is decided by the same chain as `berth simulate` (kube-scheduler's filters,
berth's rules, the allocator's capacity filters and ratios) and placed where it goes, until one is
refused: "N more fit" means simulate places N such pods and refuses the next. Per node: how many of
them went there, and why the node refused the one that did not fit (the refusal's reason on that node).

Counting stops at `limit` pods (the answer is then "at least" that many).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec

from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.engine import Decision, Pipeline, decide

LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    name: str
    fits: int
    limited_by: str  # the reason the node refused the next pod ("" when counting stopped first)
    pods: int  # pods on the node before

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fits": self.fits, "limitedBy": self.limited_by, "pods": self.pods}


@dataclass(frozen=True, slots=True)
class Capacity:
    pod: str
    nodes: tuple[NodeCapacity, ...]
    # The decision that refused the next pod; None when counting stopped at the limit first.
    refusal: Decision | None
    limit: int
    invalid: str = ""  # the specification is invalid: nothing fits

    @property
    def total(self) -> int:
        return sum(n.fits for n in self.nodes)

    @property
    def bounded(self) -> bool:
        return self.refusal is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod,
            "total": self.total,
            "bounded": self.bounded,
            "nodes": [n.to_dict() for n in self.nodes],
        }
        if self.refusal is not None and self.refusal.error is not None:
            out["refusal"] = self.refusal.error.message
        if not self.bounded:
            out["stoppedAt"] = self.limit
        if self.invalid:
            out["invalid"] = self.invalid
        return out


def capacity(
    pod: Pod, view: ClusterView, pipeline: Pipeline, *, limit: int = LIMIT, seed: int = 0
) -> Capacity:
    """Place copies of `pod` on `view` (which keeps them) until one is refused or `limit` fit."""
    before = {state.node.name: len(state.pods) for state in view.states()}
    placed: Counter = Counter()
    refusal: Decision | None = None
    for i in range(limit):
        copy = msgspec.structs.replace(pod, name=f"{pod.name}-{i}", uid=f"{pod.uid or pod.name}-capacity-{i}")
        decision = decide(copy, view, pipeline, seed=seed + i)
        if decision.error is not None and decision.error.code == 400:
            return Capacity(
                pod.key, _rows(before, placed, None), decision, limit, invalid=decision.error.message
            )
        if decision.chosen is None:
            refusal = decision
            break
        view.add_pod(msgspec.structs.replace(copy, node_name=decision.chosen, phase="Running"))
        placed[decision.chosen] += 1
    return Capacity(pod.key, _rows(before, placed, refusal), refusal, limit)


def _rows(before: dict[str, int], placed: Counter, refusal: Decision | None) -> tuple[NodeCapacity, ...]:
    reasons = {n.name: str(n.reasons[0]) for n in refusal.nodes if n.reasons} if refusal is not None else {}
    return tuple(
        NodeCapacity(name, placed[name], reasons.get(name, ""), pods) for name, pods in sorted(before.items())
    )
