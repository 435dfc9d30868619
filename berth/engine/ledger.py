"""What the chain runner records for one decision, in the compact form it computes it, and the
Decision's per-node results and step traces built from it on demand.

At 5000 nodes a Reason, a ScorePart and a NodeResult per node per step cost more than the rules
themselves, and the extender never reads most of them. So the runner keeps:

- the candidates at each step as the dict it already holds (name -> NodeState, in the order the nodes
  were asked about; a step that removes nothing passes its input on as it is);
- removals as mappings of node name -> Reason, either a plain dict (a few nodes) or a `Removals`
  that makes a node's Reason when it is read (a tier or require_with_tag setting most nodes aside
  for the same rule);
- score columns: one step's raw values in candidate order, normalised and weighted as a list.

`Ledger.results()` and `Ledger.traces()` turn this into the NodeResult and StepTrace values a Decision
has always had; nothing about them depends on whether they were read.
"""

from __future__ import annotations

import threading
from collections.abc import (
    Callable,
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, replace
from itertools import chain, filterfalse, repeat
from operator import add, mul, sub, truediv
from typing import Any

import numpy as np
from numpy.typing import NDArray

from berth.engine.types import Kind, NodeResult, Reason, ScorePart, StepTrace

# node name -> NodeState, in the order the decision was asked about: a dict, or a Remaining
# (berth.engine.slots) that leaves a few of its dict's nodes out
Candidates = Mapping[str, Any]


class Others(Collection[str]):
    """The nodes of a removal map that are not given one by one (kube-scheduler's "absent nodes", which
    NodeToStatus gives one status), each with the Reason `make(name)` gives it when read: at 5000
    nodes, thousands of reasons the extender never shows one by one cost nothing. `shared`: a reason
    whose step, kind and short text are those of every one of them (only the values differ), or None."""

    __slots__ = ("make", "shared")
    reorder = False  # listed in the step's input order already

    # Each kind says which nodes it holds: __contains__, __iter__ and __len__ (Collection's abstract methods).
    def __init__(self, make: Callable[[str], Reason], shared: Reason | None) -> None:
        self.make = make
        self.shared = shared

    def blocking(self) -> int | None:
        """How many are infeasible when that is known without reading each (None: read them)."""
        if self.shared is None:
            return None
        return 0 if self.shared.kind is Kind.SET_ASIDE else len(self)

    def left_of(self, cands: Candidates) -> Candidates | None:
        """What is left of `cands` once these are removed, when the step already made that dict."""
        return None


class Named(Others):
    """The nodes `names`, in that order. `reorder`: that is an index's order, not the candidates' (a
    trace lists them in candidate order); `left`: (the candidates, the dict the step made of what these
    leave of them)."""

    __slots__ = ("_members", "left", "names", "reorder")

    def __init__(
        self,
        names: Sequence[str],
        make: Callable[[str], Reason],
        shared: Reason | None,
        *,
        reorder: bool = False,
        left: tuple[Candidates, Candidates] | None = None,
    ) -> None:
        super().__init__(make, shared)
        self.names = names
        self.reorder = reorder
        self.left = left
        self._members: set[str] | None = None

    def __contains__(self, name: object) -> bool:
        if self._members is None:
            self._members = set(self.names)
        return name in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def left_of(self, cands: Candidates) -> Candidates | None:
        return self.left[1] if self.left is not None and self.left[0] is cands else None


class AllBut(Others):
    """Every node of `among` not in `kept` (a tier, or a rule setting most nodes aside), in `among`'s
    order."""

    __slots__ = ("among", "kept")

    def __init__(
        self, among: Candidates, kept: Mapping[str, Any], make: Callable[[str], Reason], shared: Reason | None
    ) -> None:
        super().__init__(make, shared)
        self.among = among
        self.kept = kept

    def __contains__(self, name: object) -> bool:
        return name in self.among and name not in self.kept

    def __iter__(self) -> Iterator[str]:
        return filterfalse(self.kept.__contains__, self.among)

    def __len__(self) -> int:
        return len(self.among) - len(self.kept)

    def left_of(self, cands: Candidates) -> Candidates | None:
        # the dict of the nodes left, when the step made one: the runner takes it
        return self.kept if self.among is cands and type(self.kept) is dict else None


class Aside(Others):
    """The removals of an `or` member that won while a later alternative remained: the nodes could
    still host the pod, so they are only set aside."""

    __slots__ = ("inner",)

    def __init__(self, inner: Mapping[str, Reason]) -> None:
        shared = shared_reason(inner)
        super().__init__(self._convert, self.convert(shared) if shared is not None else None)
        self.inner = inner

    @staticmethod
    def convert(reason: Reason) -> Reason:
        return replace(reason, kind=Kind.SET_ASIDE, message=f"{reason.message} (an `or` kept other nodes)")

    def _convert(self, name: str) -> Reason:
        return self.convert(self.inner[name])

    def __contains__(self, name: object) -> bool:
        return name in self.inner

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def blocking(self) -> int:
        return 0


class Removals(Mapping[str, Reason]):
    """The nodes one step removes, each with its Reason, in the shape of kube-scheduler's NodeToStatus:
    the reasons given node by node (`given`), and the other nodes (`others`, kube's absent nodes), one
    rule for many whose reasons are made when read.

    A step returns a plain dict or one of these; the runner knows it by identity, so it is never
    changed once returned (a step's memoised answer is the same object again)."""

    __slots__ = ("_blocking", "given", "others")

    def __init__(
        self,
        given: Mapping[str, Reason] | Iterable[tuple[str, Reason]] = (),
        others: Others | None = None,
    ) -> None:
        """Reasons given node by node, found through the view's indexes: in an index's order, so a
        trace lists them in candidate order, as a node-by-node step would have."""
        # A dict is taken as it is (the step hands it over: it is never changed after).
        self.given: dict[str, Reason] = given if type(given) is dict else dict(given)
        self.others = others
        self._blocking: int | None = None  # how many are infeasible, once counted

    @classmethod
    def named(
        cls,
        names: Sequence[str],
        make: Callable[[str], Reason],
        *,
        shared: bool = False,
        reorder: bool = False,
        left: tuple[Candidates, Candidates] | None = None,
    ) -> Removals:
        """The nodes `names`, in that order, each with the Reason `make(name)` gives it; `shared` when
        they all have the same step, kind and message (only the values differ)."""
        return cls(
            others=Named(
                names, make, make(names[0]) if shared and names else None, reorder=reorder, left=left
            )
        )

    @classmethod
    def all_but(
        cls, among: Candidates, kept: Mapping[str, Any], make: Callable[[str], Reason], shared: Reason | None
    ) -> Removals:
        """Every node of `among` not in `kept`, in `among`'s order, each with the Reason `make(name)`
        gives it; `shared`, one of them when they all have the same step, kind and message."""
        return cls(others=AllBut(among, kept, make, shared))

    @classmethod
    def set_aside(cls, inner: Mapping[str, Reason]) -> Removals:
        """`inner`'s nodes, only set aside (an `or` member won while a later alternative remained)."""
        return cls(others=Aside(inner))

    @property
    def reorder(self) -> bool:
        """The reasons are in an index's order, not the candidates'."""
        return self.others.reorder if self.others is not None else True

    def __getitem__(self, name: str) -> Reason:
        reason = self.given.get(name)
        if reason is not None:
            return reason
        if self.others is None or name not in self.others:
            raise KeyError(name)
        return self.others.make(name)

    def __contains__(self, name: object) -> bool:
        return name in self.given or (self.others is not None and name in self.others)

    def __iter__(self) -> Iterator[str]:
        return iter(self.given) if self.others is None else chain(self.given, self.others)

    # Read at C speed when every reason was given node by node (the usual case).
    def keys(self) -> KeysView[str]:
        return self.given.keys() if self.others is None else super().keys()

    def values(self) -> ValuesView[Reason]:
        return self.given.values() if self.others is None else super().values()

    def items(self) -> ItemsView[str, Reason]:
        return self.given.items() if self.others is None else super().items()

    def __len__(self) -> int:
        return len(self.given) + (len(self.others) if self.others is not None else 0)

    def shared(self) -> Reason | None:
        """A reason whose step, kind and short text are those of every reason here, or None."""
        return self.others.shared if self.others is not None and not self.given else None

    def blocking(self) -> int:
        """How many of these nodes are infeasible (removed, not set aside), counted once."""
        if self._blocking is None:
            counted = self.others.blocking() if self.others is not None and not self.given else None
            if counted is None:
                counted = sum(1 for r in self.values() if r.kind is not Kind.SET_ASIDE)
            self._blocking = counted
        return self._blocking

    def kept_of(self, cands: Mapping[str, Any]) -> Candidates | None:
        """What is left of `cands` once these are removed, when the step that found them already made
        that dict (name -> NodeState, in candidate order)."""
        return self.others.left_of(cands) if self.others is not None and not self.given else None


def plain(reasons: Mapping[str, Reason]) -> Mapping[str, Reason]:
    """The map as a plain dict when it is one underneath (read at C speed), else as it is."""
    if isinstance(reasons, Removals) and reasons.others is None:
        return reasons.given
    return reasons


def shared_reason(reasons: Mapping[str, Reason]) -> Reason | None:
    """A reason whose step, kind and short text are those of every reason of the map, or None."""
    return reasons.shared() if isinstance(reasons, Removals) else None


def blocking(reasons: Mapping[str, Reason]) -> int:
    """How many of these nodes are infeasible (removed, not set aside)."""
    if isinstance(reasons, Removals):
        return reasons.blocking()
    return sum(1 for r in reasons.values() if r.kind is not Kind.SET_ASIDE)


class Column(Mapping[str, ScorePart]):
    """One tier's or scorer's parts, by node."""

    step: str

    def weighted_for(self, names: Collection[str]) -> list[float] | NDArray[np.float64]:
        """The weighted parts of `names` (every one of which this step scored), in that order."""
        raise NotImplementedError

    def highest_raw(self) -> float:
        raise NotImplementedError


class ScoreColumn(Column):
    """A scorer's raw values over its candidates, scaled to 0..1 (lowest 0, highest 1; all equal gives
    0) and weighted; a negative weight reverses the order without lowering any score: |w| x (1 - n).

    The raws come as a list, or as a float64 array from a scorer that gathers them from the view's
    arrays; an array is scaled and weighted by the same floating-point operations, element by
    element, so the scores are the same to the last bit."""

    __slots__ = ("_index", "_normalised", "_weighted", "among", "low", "raws", "span", "step", "weight")

    def __init__(
        self, step: str, among: Candidates, raws: Sequence[float] | NDArray[np.float64], weight: float
    ) -> None:
        self.step = step
        self.among = among
        self.raws = raws
        self.weight = weight
        self._normalised: list[float] | None = None
        self._index: dict[str, int] | None = None
        # The weighted parts: a list for list raws; for an array, made when first read (None until).
        self._weighted: list[float] | np.ndarray | None = None
        if isinstance(raws, np.ndarray):
            self._scale_array(raws, weight)
            return
        self.low = min(raws) if raws else 0.0
        self.span = (max(raws) - self.low) if raws else 0.0
        low, span = self.low, self.span
        # The same operations as normalised, then weighted, in one pass of C-level maps (the
        # normalised values are only read by traces): weight x ((raw - low) / span), or
        # -weight x (1 - (raw - low) / span) for a negative weight.
        if not span:
            self._weighted = [_flat_part(weight)] * len(raws)
        else:
            normalised = map(truediv, map(sub, raws, repeat(low)), repeat(span))
            if weight >= 0:
                self._weighted = list(map(mul, repeat(weight), normalised))
            else:
                self._weighted = list(map(mul, repeat(-weight), map(sub, repeat(1.0), normalised)))

    def _scale_array(self, raws: np.ndarray, weight: float) -> None:
        # Only the extremes here: the weighted array is made when read, or added into the totals
        # through a scratch array (Ledger.total_array), so that a decision does not hold one more
        # array per scorer (five of 3600 floats each push its arrays out of the level-2 cache).
        # The extremes as Python's min() and max() find them: the first of equal values, which for a
        # zero decides its sign. argmin and argmax keep the first, and cost less than min and max
        # (those go through numpy's Python-level reduction wrapper).
        if not len(raws):
            self.low = self.span = 0.0
            self._weighted = raws
            return
        self.low = float(raws[raws.argmin()])
        self.span = float(raws[raws.argmax()]) - self.low

    def _weigh(self, out: np.ndarray) -> np.ndarray:
        """The weighted parts, written into `out` (as long as the raws): weight x ((raw - low) / span),
        or -weight x (1 - (raw - low) / span), the same operations in the same order as on a list (a
        product is the same either way round)."""
        low, span, weight = self.low, self.span, self.weight
        if not span:
            out.fill(_flat_part(weight))
            return out
        np.subtract(self.raws, low, out=out)
        np.divide(out, span, out=out)
        if weight < 0:
            np.subtract(1.0, out, out=out)
        np.multiply(out, weight if weight >= 0 else -weight, out=out)
        return out

    def weighted_array(self) -> np.ndarray:
        """The weighted parts of an array column, made once when first read."""
        if self._weighted is None:
            self._weighted = self._weigh(np.empty(len(self.raws)))
        return self._weighted  # type: ignore[return-value]  # an array column's: an array, made above

    def add_weighted(self, total: np.ndarray, scratch: np.ndarray) -> None:
        """total += the weighted parts, elementwise (an array column over the same candidates)."""
        if self._weighted is not None:
            np.add(total, self._weighted, out=total)
        else:
            np.add(total, self._weigh(scratch), out=total)

    @property
    def normalised(self) -> list[float]:
        if self._normalised is None:
            low, span, raws = self.low, self.span, self.raws
            if isinstance(raws, np.ndarray):
                self._normalised = ((raws - low) / span).tolist() if span else [0.0] * len(raws)
            else:
                self._normalised = [(r - low) / span for r in raws] if span else [0.0] * len(raws)
        return self._normalised

    def _position(self, name: str) -> int:
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.among)}
        return self._index[name]

    def __getitem__(self, name: str) -> ScorePart:
        i = self._position(name)
        if isinstance(self.raws, np.ndarray):
            weighted = self.weighted_array()
            return ScorePart(
                raw=float(self.raws[i]), normalised=self.normalised[i], weighted=float(weighted[i])
            )
        return ScorePart(raw=self.raws[i], normalised=self.normalised[i], weighted=self._weighted[i])  # type: ignore[index]  # list raws: made in __init__

    def __contains__(self, name: object) -> bool:
        return name in self.among

    def __iter__(self) -> Iterator[str]:
        return iter(self.among)

    def __len__(self) -> int:
        return len(self.among)

    @property
    def is_array(self) -> bool:
        return isinstance(self.raws, np.ndarray)

    def weighted_for(self, names: Collection[str]) -> list[float] | NDArray[np.float64]:
        weighted: list[float] | NDArray[np.float64]
        if self.is_array:
            weighted = self.weighted_array()
        else:
            assert self._weighted is not None  # list raws are weighted in __init__
            weighted = self._weighted
        if len(names) == len(self.among):  # the same nodes, in the same order: nothing was removed since
            return weighted
        weighted = weighted.tolist() if isinstance(weighted, np.ndarray) else weighted
        by_name = dict(zip(self.among, weighted, strict=True))
        picked = [by_name[n] for n in names]
        return np.array(picked, dtype=np.float64) if self.is_array else picked

    def highest_raw(self) -> float:
        if isinstance(self.raws, np.ndarray):
            return float(self.raws[self.raws.argmax()]) if len(self.raws) else 0
        return max(self.raws, default=0)


def _flat_part(weight: float) -> float:
    """Every node's part when all raws are equal (each normalises to 0), as the formula gives it."""
    return weight * 0.0 if weight >= 0 else -weight * (1.0 - 0.0)


_local = threading.local()


def _scratch(n: int) -> np.ndarray:
    """A float64 array of `n` to write into and read at once, the same memory every time (one per
    thread): it stays in the cache, where a new array per use would not."""
    held = getattr(_local, "scratch", None)
    if held is None or len(held) < n:
        held = _local.scratch = np.empty(max(n, 1024))
    return held[:n]


class ArrayValues(Mapping[str, int]):
    """A tier's values of every candidate as an integer array in candidate order, for a tier that
    works them out for all of them at once (kube's scores): the runner finds the highest and the nodes
    that have it in the array; a node's value is looked up by its slot only when something reads it
    (never by walking the candidates, which may be a Remaining)."""

    __slots__ = ("_positions", "among", "array", "layout", "slots")

    def __init__(self, among: Candidates, array: np.ndarray, slots: np.ndarray, layout: Any) -> None:
        self.among = among
        self.array = array
        self.slots = slots  # the candidates' slots in the view, in candidate order
        self.layout = layout  # the view's Slots: names by slot, slot by name
        self._positions: np.ndarray | None = None  # slot -> place among the candidates

    def __getitem__(self, name: str) -> int:
        if name not in self.among:
            raise KeyError(name)
        if self._positions is None:
            self._positions = np.empty(len(self.layout.names), dtype=np.intp)
            self._positions[self.slots] = np.arange(len(self.slots))
        return int(self.array[self._positions[self.layout.index[name]]])

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return name in self.among

    def __iter__(self) -> Iterator[str]:
        return iter(self.among)

    def __len__(self) -> int:
        return len(self.array)

    def at(self, value: int) -> list[str]:
        """The candidates whose value is `value`, in candidate order."""
        names = self.layout.names
        return [names[s] for s in self.slots[np.flatnonzero(self.array == value)].tolist()]

    def not_at(self, value: int) -> list[str]:
        """The candidates whose value is not `value`, in candidate order."""
        names = self.layout.names
        return [names[s] for s in self.slots[np.flatnonzero(self.array != value)].tolist()]

    def first_not(self, value: int) -> str:
        """The first candidate whose value is not `value` (one is)."""
        return self.layout.names[int(self.slots[int(np.argmax(self.array != value))])]


class TierColumn(Column):
    """A tier's values: `by_node` holds the nodes whose value is not 0; raw, normalised and weighted
    are all the value. Every node that went on from the tier had the highest value, `best`."""

    __slots__ = ("among", "best", "by_node", "step")

    def __init__(self, step: str, among: Candidates, by_node: Mapping[str, int], best: int) -> None:
        self.step = step
        self.among = among
        self.by_node = by_node
        self.best = best

    def __getitem__(self, name: str) -> ScorePart:
        if name not in self.among:
            raise KeyError(name)
        value = self.by_node.get(name, 0)
        return ScorePart(raw=value, normalised=value, weighted=value)

    def __contains__(self, name: object) -> bool:
        return name in self.among

    def __iter__(self) -> Iterator[str]:
        return iter(self.among)

    def __len__(self) -> int:
        return len(self.among)

    def weighted_for(self, names: Collection[str]) -> list[float]:
        return [self.best] * len(names)

    def highest_raw(self) -> float:
        return self.best if self.among else 0


@dataclass(slots=True)
class StepRun:
    """What one step did: its input, its survivors, its removals and scores, or why it skipped."""

    step: str
    phase: str
    among: Candidates
    kept: Candidates
    removed: Mapping[str, Reason]
    scores: Column | None = None
    note: str = ""

    def trace(self) -> StepTrace:
        return StepTrace(
            step=self.step,
            phase=self.phase,
            remaining=self.kept,  # made a tuple when read
            removed=in_order(self.removed, self.among),
            scores=self.scores if self.scores is not None else {},
            note=self.note,
        )


def in_order(removed: Mapping[str, Reason], among: Candidates) -> Mapping[str, Reason]:
    """Removals found through an index, in the order of the step's input; any other map as the step
    gave it."""
    if not (isinstance(removed, Removals) and removed.reorder) or len(removed) < 2:
        return removed
    found = plain(removed)  # a plain dict underneath is read at C speed
    return {n: found[n] for n in among if n in found}


@dataclass(slots=True)
class Ledger:
    """Everything one decision found, kept compact; the Decision reads it."""

    names: Sequence[str]  # every node asked about, in order, known to the view or not
    kept: Candidates  # the candidates at the end of the chain
    removals: list[Mapping[str, Reason]]  # disjoint: each node is removed at most once
    columns: list[Column]  # the score parts that count, in chain order
    runs: list[StepRun]  # every step that ran, including the members of an `or` that lost
    _totals: list[float] | None = None
    _total_array: np.ndarray | None = None
    _finalists: list[str] | None = None

    @classmethod
    def empty(cls) -> Ledger:
        """The ledger of a decision kept without its per-node results and trace."""
        return cls((), {}, [], [], [])

    # -- what the engine and the extender read ------------------------------------------------
    def candidate_names(self) -> list[str]:
        if self._finalists is None:
            self._finalists = list(self.kept)
        return self._finalists

    def totals(self) -> list[float]:
        """The candidates' scores before rounding, in candidate order: each node's parts added in
        chain order, as NodeResult.score adds them."""
        if self._totals is None:
            array = self.total_array()
            if array is not None:
                self._totals = array.tolist()
            else:
                names = self.candidate_names()
                totals: list[float] = [0] * len(names)
                for column in self.columns:
                    totals = list(map(add, totals, column.weighted_for(names)))
                self._totals = totals
        return self._totals

    def total_array(self) -> np.ndarray | None:
        """totals() as a float64 array, when a scorer gave its parts as an array (None otherwise: the
        totals may then be whole numbers, which an array would turn into floats). Added in the same
        order from 0, so every total is the same float."""
        if self._total_array is None:
            if not any(isinstance(c, ScoreColumn) and c.is_array for c in self.columns):
                return None
            total = np.zeros(len(self.kept))
            scratch: np.ndarray | None = None
            for column in self.columns:
                if isinstance(column, TierColumn):  # every node kept has the tier's best value
                    np.add(total, column.best, out=total)
                elif len(column) == len(self.kept) and isinstance(column, ScoreColumn) and column.is_array:
                    if scratch is None:
                        scratch = _scratch(len(total))
                    column.add_weighted(total, scratch)
                elif len(column) == len(self.kept):  # the same nodes: nothing was removed since
                    np.add(total, column.weighted_for(self.kept), out=total)
                else:
                    np.add(total, column.weighted_for(self.candidate_names()), out=total)
            self._total_array = total
        return self._total_array

    def scores(self) -> dict[str, float]:
        return {n: round(t, 6) for n, t in zip(self.kept, self.totals(), strict=True)}

    def failures(self) -> dict[str, Reason]:
        out: dict[str, Reason] = {}
        for removed in self.removals:
            shared = shared_reason(removed)
            if shared is not None:
                out.update(dict.fromkeys(removed, shared))
            else:
                out.update(plain(removed))
        return out

    def failure_texts(self) -> tuple[dict[str, str], dict[str, str]]:
        """Node -> short reason text, split by whether an eviction could help: (removed by
        capacity or set aside, removed by a rule the node cannot meet)."""
        maps: dict[bool, dict[str, str]] = {False: {}, True: {}}
        for removed in self.removals:
            shared = shared_reason(removed)
            if shared is not None:  # thousands of nodes, one text: filled at C speed
                target = shared.kind is Kind.UNMET
                texts_of = dict.fromkeys(removed, shared.short())
                if maps[target]:
                    maps[target].update(texts_of)
                else:
                    maps[target] = texts_of
                continue
            texts: dict[int, tuple[dict[str, str], str]] = {}
            for name, reason in plain(removed).items():
                known = texts.get(id(reason))
                if known is None:
                    known = texts[id(reason)] = (maps[reason.kind is Kind.UNMET], reason.short())
                known[0][name] = known[1]
        return maps[False], maps[True]

    def blocked(self) -> int:
        """How many of the nodes are infeasible."""
        return sum(blocking(r) for r in self.removals)

    def set_aside(self) -> tuple[tuple[str, int], ...]:
        """(step, how many feasible nodes it set aside), in chain order, for the steps that did."""
        out = []
        for removed in self.removals:
            count = len(removed) - blocking(removed)
            if count:
                shared = shared_reason(removed)
                reason = shared or next(r for r in plain(removed).values() if r.kind is Kind.SET_ASIDE)
                out.append((reason.step, count))
        return tuple(out)

    def reason_of(self, name: str) -> Reason | None:
        for removed in self.removals:
            if name in removed:
                return removed[name]
        return None

    # -- the Decision's full values --------------------------------------------------------------
    def results(self) -> tuple[NodeResult, ...]:
        kept = self.kept
        columns = self.columns
        out = []
        for name in self.names:
            reason = self.reason_of(name)
            out.append(
                NodeResult(
                    name=name,
                    feasible=reason is None or reason.kind is Kind.SET_ASIDE,
                    reasons=(reason,) if reason is not None else (),
                    parts={c.step: c[name] for c in columns if name in c},
                    candidate=name in kept,
                )
            )
        return tuple(out)

    def traces(self) -> tuple[StepTrace, ...]:
        return tuple(run.trace() for run in self.runs)
