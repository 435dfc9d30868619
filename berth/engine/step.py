"""Steps: the small objects every vocabulary compiles into.

A step has a `name` (defined once, used in config, Decision, events, metrics and tests) and a `phase`.
`prepare(ctx)` runs once per pod and returns the step's state, or SKIP when the step has nothing to do
for this pod (no prefer_* tags, no policy). The per-node method reads only that state and the node's
counters, and it alone produces a Reason.

Each phase class also has a set-level method the engine calls (`removals`, `select_among`, `values`,
`raws`). By default it asks the per-node method node by node (a tier's `normalise` then turns what
its nodes gave into the values it ranks by, over all of them); a step that can find the few nodes it
acts on through the view's indexes (the nodes holding a tag, the nodes running an app) overrides it,
so that a decision does not cost O(nodes) Python calls per step. The per-node method stays the
definition: an override must give the same answer.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from berth.cluster.model import Node, Pod
from berth.cluster.topology import SpreadOverNodes
from berth.cluster.view import ClusterView, NodeState, app_key
from berth.engine.draws import Seeded
from berth.engine.ledger import ArrayValues, Removals
from berth.engine.slots import remaining, slots_of, without
from berth.engine.types import Event, Phase, Reason, StepTrace

# What a step may use of the engine: this module and berth.engine.types. The removal map and the
# array of values a fast path may return (docs/engine.md, "Writing a step") are the ledger's, named here
# so that no vocabulary imports the engine's internals.
__all__ = [
    "SKIP",
    "ArrayValues",
    "Kept",
    "MemoKey",
    "NodeFilter",
    "Noted",
    "PodContext",
    "Raws",
    "Removals",
    "Scorer",
    "SetFilter",
    "Skipped",
    "Step",
    "Tier",
    "skip",
]

# A scorer's raw values of its candidates, in order: a list, or a float64 array from a scorer that
# gathers them from the view's arrays (berth.engine.ledger.ScoreColumn scales either to the same scores).
Raws = Sequence[float] | NDArray[np.float64]


class _Skip:
    """Returned by prepare(): the step does nothing for this pod."""

    def __init__(self, why: str = "") -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"SKIP({self.why!r})"


SKIP = _Skip()


def skip(why: str) -> _Skip:
    return _Skip(why)


# What prepare() returns when the step does nothing for this pod (SKIP, skip(why)), for annotations.
Skipped = _Skip


@dataclass(slots=True)
class PodContext:
    """Per-pod state shared by the steps of one decision ("write once, read many")."""

    pod: Pod
    spec: Any  # the pod's compiled berth annotations (berth.vocab.pod.PodSpec)
    view: ClusterView
    randoms: Seeded  # the decision's random numbers, from its seed
    prepared: dict[str, Any] = field(default_factory=dict)

    @property
    def rng(self) -> random.Random:
        return self.randoms.rng

    def neighbour_tag_count(self, state: NodeState, tag: str, topology: str | None = None) -> int:
        """Pods of the pod's namespace on the node carrying `tag` (the pod itself is never among them:
        decide() takes it off the view while it is asked about); with a topology key, on the nodes of
        the node's domain (0 for a node without the label)."""
        if topology is None:
            return state.tag_count(self.pod.namespace, tag)
        value = self.view.domains(topology).of.get(state.node.name)
        if value is None:
            return 0
        return self.view.domain_tag_counts(topology, self.pod.namespace, tag).get(value, 0)

    def tag_holders(self, tag: str, topology: str | None = None) -> Mapping[str, int]:
        """Node -> pods of the pod's namespace on it carrying `tag`; only the nodes with at least one
        (neighbour_tag_count over every node, from the view's index). With a topology key, every node
        of a domain holding some, with the domain's count."""
        if topology is None:
            return self.view.tag_nodes(self.pod.namespace, tag)
        counts = self.view.domain_tag_counts(topology, self.pod.namespace, tag)
        return SpreadOverNodes(self.view.domains(topology), counts)

    def app_count(self, state: NodeState, topology: str | None = None) -> int:
        """Pods of the pod's namespace, app name and version on the node (with a topology key, on the
        nodes of its domain; 0 for a node without the label)."""
        if topology is None:
            return state.apps.get(app_key(self.pod), 0)
        value = self.view.domains(topology).of.get(state.node.name)
        if value is None:
            return 0
        return self.view.domain_app_counts(topology, app_key(self.pod)).get(value, 0)

    def domain_of(self, state: NodeState, topology: str) -> str | None:
        """The node's domain for the topology key, None when it has no such label."""
        return self.view.domains(topology).of.get(state.node.name)

    # -- the candidate sets, for a step's fast path (docs/engine.md) ------------------------------
    def slots(self, cands: Mapping[str, NodeState]) -> NDArray[np.intp]:
        """Where each candidate sits in the view's arrays (ClusterView.slots), in candidate order."""
        return slots_of(cands, self.view)

    def without(self, cands: Mapping[str, NodeState], removed: Mapping[str, Any]) -> Mapping[str, NodeState]:
        """The candidates less the removed ones, in order, known to the engine as made so."""
        return without(self.view, cands, removed)

    def remaining(
        self, cands: Mapping[str, NodeState], removed: Iterable[str], slots: NDArray[np.intp] | None = None
    ) -> Mapping[str, NodeState]:
        """The candidates less a few of them, not copied while few are left out (`slots`: the kept
        ones' slots in candidate order, when the step has them)."""
        return remaining(self.view, cands, removed, slots)


# The state a step's prepare() returns for one pod and its per-node method reads (a step without any: None).
P = TypeVar("P")

# What a step declares its set-level answer depends on (Step.memo_key): (question, state). The question
# is what of the pod matters (its namespace, the tags it asks for); the state, what of the view was
# read (an index's version, a column and its version, a node memo's object), compared with `==` (objects
# without their own `==` compare by identity).
MemoKey = tuple[Hashable, tuple[Any, ...]]


@dataclass(slots=True)
class Kept:
    """A step's set-level answer over one candidate set, as the engine keeps it with those candidates:
    the state it was worked out in, the answer (removals, values or raws), and what the step noted to
    mend it later (`Noted`), its own."""

    state: tuple[Any, ...]
    answer: Any
    notes: Any = None


@dataclass(frozen=True, slots=True)
class Noted:
    """A set-level answer (or a mended one) with what its step needs to mend it later: the engine runs
    with the answer and keeps the notes on its memo record (`Kept.notes`)."""

    answer: Any
    notes: Any


class Step(Generic[P]):
    name: ClassVar[str] = ""
    phase: ClassVar[Phase] = Phase.HARD
    summary: ClassVar[str] = ""
    # Every node the step removes for one pod gets a Reason with the same step, kind and message (only
    # the node-side values differ), so thousands of removals can be counted through one of them.
    shared_reason: ClassVar[bool] = False

    def prepare(self, ctx: PodContext) -> P | _Skip:
        return None  # type: ignore[return-value]  # a step without prepared state

    def constraint(self, prepared: P) -> str | None:
        """How a 409 names this step when it removed nodes and nothing fits (None: not a user
        constraint, the generic "0/N nodes are available" text is enough)."""
        return None

    def event(self, trace: StepTrace, prepared: P, ctx: PodContext) -> Event | None:
        """An event this step adds to the pod when the pod is placed (never asked when the step
        skipped the pod)."""
        return None

    def has_event(self, prepared: P) -> bool:
        """Whether `event` may give one for a pod prepared so (False spares tracing the step)."""
        return True

    def memo_key(self, prepared: P, ctx: PodContext) -> MemoKey | None:
        """What this step's set-level answer depends on besides the candidates, declared (as kube's
        SignPlugin declares what a pod's placement depends on): (question, state). The engine keeps
        the answer with the candidate set and gives it back without asking the step to a later
        decision over the same candidates with an equal question and state. None, the default: not
        memoised. A key that leaves out something the answer reads is a wrong answer later; the
        property test (tests/test_fast_paths.py) compares every memoised step with its per-node rule."""
        return None

    def mend(self, before: Kept, cands: Mapping[str, NodeState], prepared: P, ctx: PodContext) -> Any:
        """The answer over the same candidates for the same question as `before`, in a later state,
        made from `before.answer` and `before.notes` (a few pods placed since change a few nodes),
        `Noted` to be mended again; `before.answer` itself keeps its notes; None, the default: worked
        out afresh. Only when measured (docs/engine.md)."""
        return None

    def accepted(self, prepared: P, ctx: PodContext) -> Collection[str] | None:
        """Every node a hard step may keep, listed from an index without looking at the others (a
        tag's holders); None, the default: it cannot say without asking each node. Only a cheaper
        superset of what the step keeps; the step still decides each listed node."""
        return None

    def __repr__(self) -> str:
        return self.name


class NodeFilter(Step[P]):
    """A hard filter decided node by node."""

    phase = Phase.HARD
    # The answer depends on the node record alone: not on the pod, the prepared state, the node's pods
    # or the configuration. The engine then checks each node record once, not once per decision.
    node_only: ClassVar[bool] = False
    # For a filter that can only remove nodes of some kind (tainted, cordoned): true of those, from
    # the node record alone. The engine then checks only them (found once per node records).
    # (a staticmethod, so that reading it through the instance gives the plain function)
    suspect: ClassVar[staticmethod[[Node], bool] | None] = None

    def check(self, state: NodeState, prepared: P, ctx: PodContext) -> Reason | None:
        raise NotImplementedError

    def memo_key(self, prepared: P, ctx: PodContext) -> MemoKey | None:
        # A node-only filter: the same candidates and node records give the same removals.
        return ((), (self._every_failing(prepared, ctx),)) if self.node_only else None

    def removals(
        self, cands: Mapping[str, NodeState], prepared: P, ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        """The candidates this filter removes, each with its Reason (`Noted` for a step that mends)."""
        if self.node_only:
            failing = self._every_failing(prepared, ctx)
            return Removals((n, r) for n, r in failing.items() if n in cands) if failing else {}
        check = self.check
        if self.suspect is not None:
            suspect = self.suspect
            suspects = ctx.view.node_memo(
                (type(self), "suspects"), lambda: [s.node.name for s in ctx.view.states() if suspect(s.node)]
            )
            found = {}
            for name in suspects:
                state = cands.get(name)
                if state is not None and (reason := check(state, prepared, ctx)) is not None:
                    found[name] = reason
            return Removals(found)
        removed = {}
        for name, state in cands.items():
            reason = check(state, prepared, ctx)
            if reason is not None:
                removed[name] = reason
        return removed

    def _every_failing(self, prepared: P, ctx: PodContext) -> dict[str, Reason]:
        """Every node of the view this node-only filter removes, kept until a node record changes."""
        return ctx.view.node_memo((type(self), self.name), lambda: self._failing(prepared, ctx))

    def _failing(self, prepared: P, ctx: PodContext) -> dict[str, Reason]:
        """Every node of the view this node-only filter removes."""
        out = {}
        for state in ctx.view.states():
            reason = self.check(state, prepared, ctx)
            if reason is not None:
                out[state.node.name] = reason
        return out


class SetFilter(Step[P]):
    """A filter that must see the whole set: hard (large servers) or soft (drop only while others
    remain). Returns the nodes it removes, each with its reason."""

    phase = Phase.SOFT

    def select(self, states: Sequence[NodeState], prepared: P, ctx: PodContext) -> dict[str, Reason]:
        raise NotImplementedError

    def select_among(
        self, cands: Mapping[str, NodeState], prepared: P, ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        """select() over the candidates; only candidates can be removed (`Noted` for a step that mends)."""
        removed = self.select(list(cands.values()), prepared, ctx)
        if all(n in cands for n in removed):
            return removed
        return {n: r for n, r in removed.items() if n in cands}


class Tier(Step[P]):
    """Keeps only the nodes with the highest value; the value is also the node's score part."""

    phase = Phase.TIER

    def value(self, state: NodeState, prepared: P, ctx: PodContext) -> int:
        raise NotImplementedError

    def normalise(self, values: Mapping[str, Any], prepared: P, ctx: PodContext) -> Mapping[str, int]:
        """The candidates' values from what `value` gave each of them, for a tier whose value of one
        node depends on the others' (kube's scores are normalised over the candidates): as they are
        by default."""
        return values

    def values(self, cands: Mapping[str, NodeState], prepared: P, ctx: PodContext) -> Mapping[str, int]:
        """Node -> value; a node left out is at 0 (a sparse override names only the others)."""
        value = self.value
        return self.normalise(
            {name: value(state, prepared, ctx) for name, state in cands.items()}, prepared, ctx
        )

    def set_aside(self, value: int, best: int, prepared: P) -> Reason:
        raise NotImplementedError


class Scorer(Step[P]):
    """Adds a weighted, normalised score to every node; removes none."""

    phase = Phase.SCORE

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = weight

    def raw(self, state: NodeState, prepared: P, ctx: PodContext) -> float:
        raise NotImplementedError

    def raws(self, cands: Mapping[str, NodeState], prepared: P, ctx: PodContext) -> Raws:
        """The raw value of every candidate, in order."""
        raw = self.raw
        return [float(raw(state, prepared, ctx)) for state in cands.values()]
