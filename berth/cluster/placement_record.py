"""The placement record: the `berth.dev/placement` annotation berth writes on a pod with its Binding.

Why the pod is where it is, in compact JSON: the node, its score, the margin to the runner-up, the top
candidates with their scores, how many nodes were feasible and how many of them each step set aside,
whether it had no choice, the seed, and the digest of the chain and configuration that decided. The
extender writes it at bind (kube-apiserver copies a Binding's annotations onto the pod in the same
write), `berth explain` replays the decision from its seed and compares, `berth rebalance` reads
whether the pod went where a rebalance planned, and the live cache leaves it out of the pods it keeps
(it is no rule, and the view would hold a few hundred bytes more per pod for nothing).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from berth import annotations as ann
from berth.cluster.model import Pod

ANNOTATION = ann.PLACEMENT_RECORD
# The reason of the event a decision has when it placed a pod on the node `berth rebalance` planned
# for it (berth.vocab.planned_target): the record then says `planned`.
PLANNED_EVENT = "RebalanceTarget"


class _Summary(Protocol):
    @property
    def score(self) -> float: ...
    @property
    def margin(self) -> float | None: ...
    @property
    def top(self) -> Sequence[tuple[str, float]]: ...
    @property
    def feasible(self) -> int: ...
    @property
    def set_aside(self) -> Sequence[tuple[str, int]]: ...


class _Event(Protocol):
    @property
    def reason(self) -> str: ...


class Decided(Protocol):
    """What the record reads of a decision (berth.engine.Decision)."""

    @property
    def chosen(self) -> str | None: ...
    @property
    def summary(self) -> _Summary | None: ...
    @property
    def had_no_choice(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def events(self) -> Sequence[_Event]: ...


def seed_for(pod: Pod) -> int:
    """A pod's own seed: the same pod breaks ties the same way, and `berth simulate --seed` (or
    `berth explain`) with the seed of its record replays the decision."""
    return zlib.crc32((pod.uid or pod.key).encode())


def write(decision: Decided, node: str, digest: str) -> str:
    """The record of `decision` for a pod bound to `node`, as the annotation's value."""
    summary = decision.summary
    record: dict[str, Any] = {"node": node}
    if summary is not None and node == decision.chosen:
        record["score"] = _round(summary.score)
        if summary.margin is not None:
            record["margin"] = _round(summary.margin)
        record["top"] = [[name, _round(score)] for name, score in summary.top]
        record["feasible"] = summary.feasible
        if summary.set_aside:  # why top lists fewer nodes than feasible counts
            record["setAside"] = dict(summary.set_aside)
    elif node != decision.chosen:
        record["ranked"] = decision.chosen  # the scheduler bound another node than berth's first
    record["noChoice"] = decision.had_no_choice
    if node == decision.chosen and any(e.reason == PLANNED_EVENT for e in decision.events):
        record["planned"] = True
    record["seed"] = decision.seed
    record["chain"] = digest
    return _ENCODER.encode(record).decode()


def read(pod: Pod) -> dict[str, Any]:
    """The record on a pod ({} when it has none, or one that is not a JSON object)."""
    if not pod.record:
        return {}
    try:
        record = msgspec.json.decode(pod.record)
    except msgspec.DecodeError:
        return {}
    return record if isinstance(record, dict) else {}


def planned(pod: Pod) -> bool:
    """The pod was placed on the node a rebalance planned for it."""
    return bool(read(pod).get("planned"))


def strip(annotations: dict[str, str]) -> str:
    """Take the record out of a pod's annotations (the rules never read it); "" when it has none."""
    return annotations.pop(ANNOTATION, "")


_ENCODER = msgspec.json.Encoder()


def _round(value: float) -> float | int:
    rounded = round(value, 6)
    return int(rounded) if rounded == int(rounded) else rounded
