"""The allocator's scorers. Each returns a raw value per node; the engine scales the values to 0..1
(lowest 0, highest 1) and multiplies by the weight, the defaults' weight_*. A negative weight reverses
the order and still never lowers a score (sdc-designation: scores only ever increase).

| scorer | raw value (higher is better with a positive weight) |
|---|---|
| score-unreserved-ram | unreserved RAM (MiB) |
| score-unreserved-disk | unreserved ephemeral storage (MiB) |
| score-num-owner-zones | minus the pods of the pod's namespace on the node |
| score-current-platform | the node's platform (newer is higher) |
| score-next-reboot | whole weeks to the next reboot (annotation berth.dev/next-reboot); 52 if none or past |
| score-uniform-random | a random number from the decision's seed |

A package's alloc_server_spread applies to the pods of that package, as the deprecated server_spread
does for all: `min-ram` orders by least unreserved RAM, `max-ram` by most, `min-owner` by fewest pods of
the namespace, `random` at random; the spread's scorer keeps its configured weight's size and the other
spreading scorers (RAM, disk, owner, random) step aside for that pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from berth import annotations as ann
from berth.cluster.view import NodeState
from berth.engine.step import PodContext, Raws, Scorer, Skipped, skip
from berth.vocab.alloc.base import (
    AllocStep,
    Setup,
    node_use,
    request,
    unreserved,
    unreserved_column,
)
from berth.vocab.alloc.platform import node_platform
from berth.vocab.alloc.values import node_reboot

NO_REBOOT_WEEKS = 52

# What an allocator scorer prepares for one pod (the sign of its raws, the time now).
P = TypeVar("P")


class _AllocScorer(AllocStep, Scorer[P]):
    """A scorer of the allocator, weighted by its `weight_key` in the configuration."""

    weight_key = ""

    def __init__(self, setup: Setup | None = None, weight: float | None = None) -> None:
        AllocStep.__init__(self, setup)
        self.weight = weight if weight is not None else self.setup.config.weight(self.weight_key)


class _SignedScorer(_AllocScorer[int]):
    """A scorer whose order a package's spread may turn round: it prepares the sign of its raws."""

    # The package spread that makes this scorer order the nodes, and whether it favours higher raws.
    spreads: ClassVar[dict[str, bool]] = {}

    def prepare(self, ctx: PodContext) -> int | Skipped:
        """The sign that turns the raw value into this pod's order (+1 as configured), or a skip."""
        package = request(ctx).package
        spread = package.spread if package is not None else None
        if package is not None and spread is not None:
            if spread not in self.spreads:
                return skip(f"package {package.name} spreads with {spread}")
            if self.weight == 0:
                return skip(f"{self.weight_key} is 0")
            higher_first = self.spreads[spread]
            return 1 if higher_first == (self.weight > 0) else -1
        if self.weight == 0:
            return skip(f"{self.weight_key} is 0")
        return 1


class ScoreUnreservedRam(_SignedScorer):
    name = "alloc/score-unreserved-ram"
    summary = "score: more unreserved RAM scores higher (weight_unreserved_ram)"
    weight_key = "weight_unreserved_ram"
    spreads: ClassVar[dict[str, bool]] = {"max-ram": True, "min-ram": False}

    def raw(self, state: NodeState, prepared: int, ctx: PodContext) -> float:
        use = node_use(state, ctx)
        return prepared * unreserved(use, self.setup.node_ratios(state.node), "ram")

    def raws(self, cands: Mapping[str, NodeState], prepared: int, ctx: PodContext) -> Raws:
        return _unreserved_raws(self, "ram", cands, prepared, ctx)


class ScoreUnreservedDisk(_SignedScorer):
    name = "alloc/score-unreserved-disk"
    summary = "score: more unreserved ephemeral storage scores higher (weight_unreserved_disk)"
    weight_key = "weight_unreserved_disk"

    def raw(self, state: NodeState, prepared: int, ctx: PodContext) -> float:
        use = node_use(state, ctx)
        return prepared * unreserved(use, self.setup.node_ratios(state.node), "disk")

    def raws(self, cands: Mapping[str, NodeState], prepared: int, ctx: PodContext) -> Raws:
        return _unreserved_raws(self, "disk", cands, prepared, ctx)


def _unreserved_raws(
    step: _SignedScorer, resource: str, cands: Mapping[str, NodeState], sign: int, ctx: PodContext
) -> Raws:
    column = unreserved_column(ctx, step.setup, resource)
    if column is None:
        return Scorer.raws(step, cands, sign, ctx)
    raws = column.array(ctx.view.slots())[ctx.slots(cands)]
    return raws if sign == 1 else sign * raws


class ScoreNumOwnerZones(_SignedScorer):
    name = "alloc/score-num-owner-zones"
    summary = "score: fewer pods of the pod's namespace scores higher (weight_num_owner_zones)"
    weight_key = "weight_num_owner_zones"
    spreads: ClassVar[dict[str, bool]] = {"min-owner": True}  # raw is minus the count

    def raw(self, state: NodeState, prepared: int, ctx: PodContext) -> float:
        return -prepared * state.owners.get(ctx.pod.namespace, 0)

    def raws(self, cands: Mapping[str, NodeState], prepared: int, ctx: PodContext) -> NDArray[np.float64]:
        # Only the nodes that host pods of the namespace differ from 0: set them by slot, then gather.
        slots = ctx.view.slots()
        counts = np.zeros(len(slots.names), dtype=np.int64)
        for name, count in ctx.view.owner_nodes(ctx.pod.namespace).items():
            counts[slots.index[name]] = count
        # Counted in integers, as raw() counts: minus nothing is 0.0, never -0.0.
        return (-prepared * counts[ctx.slots(cands)]).astype(np.float64)


class ScoreCurrentPlatform(_AllocScorer[int]):
    name = "alloc/score-current-platform"
    summary = "score: a newer platform scores higher (weight_current_platform)"
    weight_key = "weight_current_platform"

    def prepare(self, ctx: PodContext) -> int | Skipped:
        return skip(f"{self.weight_key} is 0") if self.weight == 0 else 1

    def raw(self, state: NodeState, prepared: int, ctx: PodContext) -> float:
        platform = node_platform(state.node).platform
        return platform.score() if platform is not None else 0.0

    def raws(self, cands: Mapping[str, NodeState], prepared: int, ctx: PodContext) -> NDArray[np.float64]:
        # The platform is the node's own: worked out once per node record, by slot.
        scores = ctx.view.node_memo(
            self.name,
            lambda: np.array([float(self.raw(s, prepared, ctx)) for s in ctx.view.states()], np.float64),
        )
        return scores[ctx.slots(cands)]


class ScoreNextReboot(_AllocScorer[datetime]):
    name = "alloc/score-next-reboot"
    summary = "score: a later planned reboot scores higher, none planned highest (weight_next_reboot)"
    weight_key = "weight_next_reboot"

    def prepare(self, ctx: PodContext) -> datetime | Skipped:
        return skip(f"{self.weight_key} is 0") if self.weight == 0 else datetime.now(UTC)

    def raw(self, state: NodeState, prepared: datetime, ctx: PodContext) -> float:
        return float(weeks_until_reboot(state, prepared))

    def raws(
        self, cands: Mapping[str, NodeState], prepared: datetime, ctx: PodContext
    ) -> NDArray[np.float64]:
        # Only nodes with a planned reboot differ from NO_REBOOT_WEEKS; their times are read once per
        # node record, as whole microseconds, and turned into weeks for all of them at once. The
        # weeks stay as they are until one of them would change: kept until then.
        planned = ctx.view.node_memo(self.name, lambda: _Reboots(*_planned_reboots(ctx), len(ctx.view)))
        return planned.weeks(_microseconds(prepared))[ctx.slots(cands)]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY = 86_400_000_000  # microseconds


def _microseconds(when: datetime) -> int:
    return (when - _EPOCH) // timedelta(microseconds=1)


_WEEK = 7 * _DAY


class _Reboots:
    """The nodes' planned reboots and the weeks to them by slot, as of a moment, with the moment the
    weeks change next (a planned reboot a whole week nearer, or passed)."""

    def __init__(self, slots: np.ndarray, when: np.ndarray, nodes: int) -> None:
        self.slots, self.when, self.nodes = slots, when, nodes
        self._weeks: np.ndarray | None = None
        self._since = self._until = 0  # the weeks hold for now in [since, until)

    def weeks(self, now: int) -> np.ndarray:
        """The weeks to each node's planned reboot at `now` (microseconds since 1970), by slot."""
        if self._weeks is not None and self._since <= now < self._until:
            return self._weeks
        weeks = np.full(self.nodes, float(NO_REBOOT_WEEKS))
        until = 2**62
        if len(self.slots):
            ahead = self.when - now  # timedelta.days is the floor of this in days
            weeks[self.slots] = np.where(
                ahead > 0, np.minimum(NO_REBOOT_WEEKS, (ahead // _DAY) // 7), NO_REBOOT_WEEKS
            ).astype(np.float64)
            coming = ahead[ahead > 0]
            if len(coming):  # a node's weeks drop once its reboot is a whole week nearer, or passed
                until = now + int((coming % _WEEK).min())
        self._weeks, self._since, self._until = weeks, now, until
        return weeks


def _planned_reboots(ctx: PodContext) -> tuple[np.ndarray, np.ndarray]:
    """The slots of the nodes with a well-formed planned reboot, and its time in microseconds since
    1970 (a malformed annotation counts as none)."""
    slots, when = [], []
    for slot, state in enumerate(ctx.view.states()):
        raw = state.node.annotations.get(ann.NODE_NEXT_REBOOT)
        if raw:
            parsed = node_reboot(raw)
            if not parsed.problem and parsed.value is not None:
                slots.append(slot)
                when.append(_microseconds(parsed.value))
    return np.array(slots, dtype=np.intp), np.array(when, dtype=np.int64)


def _weeks(when: datetime | None, now: datetime) -> int:
    if when is None or when <= now:
        return NO_REBOOT_WEEKS
    return min(NO_REBOOT_WEEKS, (when - now).days // 7)


def weeks_until_reboot(state: NodeState, now: datetime) -> int:
    raw = state.node.annotations.get(ann.NODE_NEXT_REBOOT)
    if not raw:
        return NO_REBOOT_WEEKS
    parsed = node_reboot(raw)
    return _weeks(None if parsed.problem else parsed.value, now)


class ScoreUniformRandom(_SignedScorer):
    name = "alloc/score-uniform-random"
    summary = "score: a random part from the decision's seed (weight_uniform_random)"
    weight_key = "weight_uniform_random"
    spreads: ClassVar[dict[str, bool]] = {"random": True}

    def raw(self, state: NodeState, prepared: int, ctx: PodContext) -> float:
        return ctx.rng.random()

    def raws(self, cands: Mapping[str, NodeState], prepared: int, ctx: PodContext) -> NDArray[np.float64]:
        return ctx.randoms.random(len(cands))  # one draw per node in candidate order, as raw() draws


class PickRandom(AllocStep, Scorer[None]):
    """sdc-designation's pick-random, as a scorer: a random part of weight 1, so that with no other scorer
    the highest score falls on a random node (reproducible with the seed)."""

    name = "alloc/pick-random"
    summary = "score: a random part of weight 1 (the engine picks the highest)"

    def __init__(self, setup: Setup | None = None) -> None:
        AllocStep.__init__(self, setup)
        self.weight = 1.0

    def raw(self, state: NodeState, prepared: None, ctx: PodContext) -> float:
        return ctx.rng.random()

    def raws(self, cands: Mapping[str, NodeState], prepared: None, ctx: PodContext) -> NDArray[np.float64]:
        return ctx.randoms.random(len(cands))  # one draw per node in candidate order, as raw() draws
