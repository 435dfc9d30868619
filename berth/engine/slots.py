"""Where a decision's candidates sit in the view's arrays by node (ClusterView.slots).

A step that gives every candidate a number (a scorer, the large-server reserve) gathers it from an array
by slot and works on arrays: at 5000 candidates one Python call per node costs more than the rule
itself. The runner hands the steps mappings of name -> NodeState: the candidates asked about as the
places of their nodes (`Picked`, a dict only once a step reads it node by node), then plain dicts (a
dict subclass would make every copy a slow one) or a dict less a few nodes (`Remaining`); what the
engine knows of the sets it made is kept beside them, for the last few made or used. A dict made from
another by removing a few nodes knows its parent and what was removed, so its slots are the parent's
with those masked out, not a lookup of every name; and removing the same nodes from the same dict again
(the next pod of a burst, the same filter) gives back the dict made the first time, slots and all. What
the engine knows is kept by the view the dicts were made from (ClusterView.candidate_sets), so that it
goes with the view and no two views share it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from operator import itemgetter
from typing import Any

import numpy as np

from berth.cluster.view import ClusterView, Slots
from berth.engine.ledger import plain

# How many dicts the engine keeps what it knows of (each held until it is dropped from here).
KNOWN_AT_MOST = 64
# Dicts made from one parent that are kept for reuse (the last few removals asked for).
CHILDREN_KEPT = 4
# Removals of more nodes than this are not kept for reuse (the key would cost what it saves).
REUSE_AT_MOST = 2048
# A Remaining leaves out at most this many of its dict's nodes; one more makes a dict of its own.
LEFT_OUT_AT_MOST = 256


class _Known:
    __slots__ = ("cands", "children", "last", "layout", "memo", "parent", "removed", "slots")

    def __init__(self, cands: Mapping[str, Any], parent: Mapping[str, Any] | None, removed: Any) -> None:
        self.cands = cands  # held, so that its id names it while it is known
        self.parent = parent
        self.removed = removed
        self.slots: np.ndarray | None = None
        self.layout: Slots | None = None  # the view's slots that `slots` are of
        self.children: dict[tuple[str, ...], dict[str, Any]] | None = None
        self.memo: dict[Any, Any] | None = None
        # The removal map last applied to these candidates, and the dict of the nodes it left.
        self.last: tuple[Mapping[str, Any], dict[str, Any]] | None = None


def _info(view: ClusterView, cands: Mapping[str, Any]) -> _Known | None:
    # The most recently used last: the first is dropped first (an OrderedDict moves and drops in O(1)).
    sets = view.candidate_sets
    info = sets.get(id(cands))
    if info is None:
        return None
    sets.move_to_end(id(cands))
    return info if info.cands is cands else None


def known(
    view: ClusterView,
    cands: Mapping[str, Any],
    parent: Mapping[str, Any] | None = None,
    removed: Any = (),
    *,
    slots: tuple[Slots, np.ndarray] | None = None,
) -> Mapping[str, Any]:
    """`cands`, remembered as made from `parent` minus the names `removed` (a root when no parent),
    with its slots when the maker has them."""
    sets = view.candidate_sets
    while len(sets) >= KNOWN_AT_MOST:
        sets.popitem(last=False)
    info = sets[id(cands)] = _Known(cands, parent, removed)
    if slots is not None:
        info.layout, info.slots = slots
    return cands


def is_known(view: ClusterView, cands: Mapping[str, Any]) -> bool:
    """The engine still keeps what it knows of this dict (it may have been dropped since)."""
    return _info(view, cands) is not None


def memo_for(view: ClusterView, cands: Mapping[str, Any]) -> dict[Any, Any] | None:
    """The engine's answers of memoised steps over these candidates (berth.engine.chain._answer),
    kept for a later decision over the same candidates; None when the engine does not know the dict."""
    info = _info(view, cands)
    if info is None:
        return None
    if info.memo is None:
        info.memo = {}
    return info.memo


def without(view: ClusterView, cands: Mapping[str, Any], removed: Mapping[str, Any]) -> Mapping[str, Any]:
    """The candidates minus the removed ones, in order; the candidates themselves when none was."""
    if not removed:
        return cands
    kept_by_step = getattr(removed, "kept_of", None)
    if kept_by_step is not None and (kept := kept_by_step(cands)) is not None:
        if _info(view, kept) is None:  # a step made the dict already, in candidate order
            known(view, kept)
        return kept
    info = _info(view, cands)
    if info is not None and info.last is not None and info.last[0] is removed:
        # The very map a step gave for these candidates before (its memo's): what was left then.
        kept = info.last[1]
        _info(view, kept)
        return kept
    names_of = plain(removed)  # a plain dict underneath is read at C speed
    key: tuple[str, ...] | None = None
    if info is not None and len(removed) <= REUSE_AT_MOST:
        key = tuple(names_of)
        if info.children is not None and (kept := info.children.get(key)) is not None:
            _info(view, kept)
            _remember(info, removed, kept)
            return kept
    names = key if key is not None else names_of
    if len(removed) * 4 < len(cands) * 3 and isinstance(cands, dict | _MadeWhenRead):
        # At C speed, then delete the few: a Remaining (what a spread left) as its dict first, not
        # a test of every candidate against a removal map that may be worked out when read.
        kept = (cands if isinstance(cands, dict) else cands.as_dict()).copy()
        for name in names:
            kept.pop(name, None)
    else:
        kept = {n: s for n, s in cands.items() if n not in names_of}
    known(view, kept, cands, names)
    if info is not None and key is not None:
        if info.children is None:
            info.children = {}
        elif len(info.children) >= CHILDREN_KEPT:
            del info.children[next(iter(info.children))]
        info.children[key] = kept
    if info is not None:
        _remember(info, removed, kept)
    return kept


def _remember(info: _Known, removed: Mapping[str, Any], kept: dict[str, Any]) -> None:
    """Keep the last removal map and what it left: a step answering from its memo gives the same
    map again. Only maps a step keeps as they are (never a plain dict, which a step may fill anew
    for every decision) are remembered by identity."""
    info.last = (removed, kept) if type(removed) is not dict else None


class _MadeWhenRead(Mapping[str, Any]):
    """A mapping of candidates that is made into a dict of its own (`as_dict`) only when it is read
    node by node."""

    __slots__ = ()

    @abstractmethod
    def as_dict(self) -> dict[str, Any]:
        """The dict these candidates stand for, made once."""

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def values(self) -> ValuesView[Any]:
        return self.as_dict().values()

    def items(self) -> ItemsView[str, Any]:
        return self.as_dict().items()


class Remaining(_MadeWhenRead):
    """A dict of candidates less a few of them, made into a dict of its own only when it is read
    node by node. A step that leaves all but a few of thousands of candidates, and one node fewer
    with each pod placed (the spread by owner), would otherwise copy thousands of entries at every
    decision; a copy, and the free of the one before, touch every node's objects, which at 5000
    nodes costs more than the rule (those objects are out of the processor's cache by then). The
    steps after it that only count the candidates, ask for one or gather by slot never pay that."""

    __slots__ = ("_base", "_dict", "_len", "_out")

    def __init__(self, base: dict[str, Any] | Picked, out: frozenset[str]) -> None:
        self._base = base  # never changed: the engine's dicts are never changed once made
        self._out = out  # names of `base` left out
        self._len = len(base) - len(out)
        self._dict: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        if self._dict is None:
            kept = self._base.copy()  # at C speed, then the few left out deleted
            for name in self._out:
                del kept[name]
            self._dict = kept
        return self._dict

    def __len__(self) -> int:
        return self._len

    def __contains__(self, name: object) -> bool:
        return name not in self._out and name in self._base

    def __getitem__(self, name: str) -> Any:
        if name in self._out:
            raise KeyError(name)
        return self._base[name]

    def get(self, name: str, default: Any = None) -> Any:
        return default if name in self._out else self._base.get(name, default)


class Picked(_MadeWhenRead):
    """A decision's candidates as the places of their nodes in the view's lists in name order, made
    into a dict only when read node by node. Live, between two pods the other processes have the
    caches: a dict of 500 entries made for every pod (kube's sample starts elsewhere each time) reads
    every name and state object, one miss each, and the default chain never reads it node by node (it
    counts the candidates, asks for a few and gathers by slot)."""

    __slots__ = ("_dict", "_index", "_marks", "_names", "_places", "_rank", "_states")

    def __init__(
        self, layout: Slots, names: list[str], states: list[Any], places: np.ndarray, marks: np.ndarray
    ) -> None:
        self._names, self._states = names, states  # the view's nodes and states in name order
        self._places = places  # the candidates' places in those lists, in order (read when made a dict)
        self._index, self._rank = layout.index, layout.rank  # name -> slot, slot -> place
        self._marks = marks  # by slot: a candidate
        self._dict: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        if self._dict is None:
            places = self._places.tolist()
            if len(places) > 1:
                pick = itemgetter(*places)
                self._dict = dict(zip(pick(self._names), pick(self._states), strict=True))
            else:
                self._dict = {self._names[r]: self._states[r] for r in places}
        return self._dict

    def copy(self) -> dict[str, Any]:
        return self.as_dict().copy()

    def _slot(self, name: object) -> int | None:
        slot = self._index.get(name) if type(name) is str else None
        return slot if slot is not None and self._marks[slot] else None

    def __len__(self) -> int:
        return len(self._places)

    def __contains__(self, name: object) -> bool:
        return self._slot(name) is not None

    def __getitem__(self, name: str) -> Any:
        slot = self._slot(name)
        if slot is None:
            raise KeyError(name)
        return self._states[self._rank[slot]]

    def get(self, name: str, default: Any = None) -> Any:
        slot = self._slot(name)
        return default if slot is None else self._states[self._rank[slot]]


def remaining(
    view: ClusterView, cands: Mapping[str, Any], removed: Iterable[str], slots: np.ndarray | None = None
) -> Mapping[str, Any]:
    """`cands` less `removed` (a few of them, each once), in order, without copying `cands` while
    few are left out; known to the engine as made from `cands`, so that its slots are `cands`' less
    the removed ones (or `slots`, the kept ones' in order, when the caller has them)."""
    removed = tuple(removed)
    if isinstance(cands, Remaining):
        base, out = cands._base, cands._out.union(removed)
    elif isinstance(cands, dict | Picked):  # (a Picked is read as a dict is, and never changed)
        base, out = cands, frozenset(removed)
    else:
        base, out = dict(cands), frozenset(removed)
    left = Remaining(base, out)
    # Too many left out to look past at every read: a dict of its own.
    kept: Mapping[str, Any] = left.as_dict() if len(out) > LEFT_OUT_AT_MOST else left
    known(view, kept, cands, removed, slots=None if slots is None else (view.slots(), slots))
    return kept


def slots_of(cands: Mapping[str, Any], view: ClusterView) -> np.ndarray:
    """The slot of every candidate, in candidate order (every candidate is a node of the view)."""
    layout = view.slots()
    info = _info(view, cands)
    if info is None:
        found = _lookup(cands, layout.index)
        if isinstance(cands, dict | _MadeWhenRead):  # known from now on, as a root: the next pod reuses them
            known(view, cands, slots=(layout, found))
        return found
    if info.layout is layout:
        assert info.slots is not None  # set with the layout
        return info.slots
    parent = info.parent
    if parent is None or len(info.removed) > len(cands):  # fewer kept than removed: look the kept up
        found = _lookup(cands, layout.index)
    else:
        base = slots_of(parent, view)
        index = layout.index
        try:
            removed = np.fromiter(map(index.__getitem__, info.removed), np.intp)
        except KeyError:  # a name the view does not hold was removed
            removed = np.fromiter((index[n] for n in info.removed if n in index), np.intp)
        marks = np.zeros(len(layout.names), dtype=bool)
        marks[removed] = True
        found = base[~marks[base]]
    info.slots, info.layout = found, layout
    return found


def in_candidate_order(cands: Mapping[str, Any], names: Iterable[str], view: ClusterView) -> list[str]:
    """`names` (some of the candidates, each once) in candidate order. A few of thousands are placed
    by their slots, which costs less than a pass over every candidate."""
    names = list(names)
    if len(names) * 32 >= len(cands):
        wanted = set(names)
        return [n for n in cands if n in wanted]
    index = view.slots().index
    place = np.empty(len(index), dtype=np.intp)
    place[slots_of(cands, view)] = np.arange(len(cands))
    at = place[np.fromiter(map(index.__getitem__, names), np.intp, len(names))]
    return list(map(names.__getitem__, np.argsort(at, kind="stable").tolist()))


def _lookup(names: Iterable[str], index: dict[str, int]) -> np.ndarray:
    return np.fromiter(map(index.__getitem__, names), np.intp)
