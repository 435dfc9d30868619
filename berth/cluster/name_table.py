"""Node names found by the thousand in the raw bytes of a JSON array of strings.

kube-scheduler's filter call names every feasible node, 5000 of them at 5000 nodes, in a new order for
every pod. Decoding them into Python strings and looking each up in a dict was half of `berth serve`'s
time for the call (py-spy, the extender benchmark at 5000 nodes): one string made and two cache misses
per name. Here numpy cuts the array's bytes into names, hashes each, finds the hash in a table of the
view's names, and compares the bytes of every name found with the table's. The answer is exact;
anything out of the ordinary (an escape sequence, an element that is not a string, a name the table
does not hold) gives None, and the caller decodes the array as usual.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

_BASE = 0x100000001B3  # odd, so invertible modulo 2**64
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_SEPARATOR = b'","'  # between two names in a compact JSON array (what Go's encoding/json writes)


class _Powers:
    """_BASE**i and its inverse modulo 2**64, for i up to the longest buffer hashed so far."""

    def __init__(self) -> None:
        self.up = np.ones(1, dtype=np.uint64)
        self.down = np.ones(1, dtype=np.uint64)

    def upto(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.up) < n:
            size = max(n, 2 * len(self.up), 1 << 16)
            up = np.full(size, _BASE, dtype=np.uint64)
            down = np.full(size, pow(_BASE, -1, 2**64), dtype=np.uint64)
            up[0] = down[0] = 1
            self.up, self.down = np.cumprod(up), np.cumprod(down)  # wraps modulo 2**64
        return self.up, self.down


_powers = _Powers()


class _Scratch:
    """Arrays as long as the longest buffer so far, reused from call to call: a fresh array of half a
    megabyte is fresh pages from the kernel each time, and the page faults cost more than the work."""

    def __init__(self) -> None:
        self.size = 0

    def upto(self, n: int) -> _Scratch:
        if self.size < n:
            self.size = size = max(n, 2 * self.size, 1 << 16)
            self.words = np.empty(size, dtype=np.uint64)
            self.shifts = np.empty(size, dtype=np.intp)
            self.places = np.arange(size, dtype=np.intp)
            self.bytes = np.empty(size, dtype=np.uint8)
        return self


def _hashes(buf: np.ndarray, starts: np.ndarray, stops: np.ndarray, scratch: _Scratch) -> np.ndarray:
    """A 64-bit polynomial hash of each buf[start:stop] (start >= 1), the same wherever the bytes sit."""
    up, down = _powers.upto(len(buf))
    prefix = np.multiply(buf, up[: len(buf)], out=scratch.upto(len(buf)).words[: len(buf)])
    np.cumsum(prefix, out=prefix)  # prefix[i]: the bytes up to i, each times _BASE**its place
    return (prefix[stops - 1] - prefix[starts - 1]) * down[starts]


class Found(Sequence[str]):
    """The asked-for names, found: their slots in `layout` (a view's Slots), in the order asked. A
    sequence of the names, made into strings only when read: a placed pod never needs them."""

    __slots__ = ("_names", "layout", "slots")

    def __init__(self, layout: Any, slots: np.ndarray) -> None:
        self.layout = layout
        self.slots = slots
        self._names: list[str] | None = None

    def names(self) -> list[str]:
        if self._names is None:
            self._names = list(map(self.layout.names.__getitem__, self.slots.tolist()))
        return self._names

    def __len__(self) -> int:
        return len(self.slots)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self.names()[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


class Guessed(Found):
    """Names asked about, decoded, with the slots their hashes lead to (Slots.guess). Read as a
    sequence, it is the names as asked, so whatever names the nodes names them as kube-scheduler
    did; the slots are checked against the names only where an answer rests on them (answers):
    comparing every name with the node's held at its slot costs a cache miss a name, about a
    tenth of a filter's time cold, for what happens about once in 2**64 names."""

    __slots__ = ()

    def __init__(self, layout: Any, slots: np.ndarray, asked: list[str]) -> None:
        super().__init__(layout, slots)
        self._names = asked

    def answers(self, chosen: str | None) -> bool:
        """Whether a decision over these slots answers only for nodes asked about: the node it
        chose was asked for by its own name; with no node chosen (its failure map names every
        node), every name is the one held at its slot."""
        asked = self.names()
        if chosen is None:
            return self.layout.named(asked, self.slots)
        slot = self.layout.index.get(chosen)
        return slot is not None and self.layout.named_at(asked, self.slots, slot)


class NameTable:
    """A view's node names (slot -> name) as one buffer of UTF-8 bytes, with an open-addressing table
    from a name's hash to its slot."""

    def __init__(self, layout: Any) -> None:
        self.layout = layout
        names: Sequence[str] = layout.names
        encoded = [n.encode() for n in names]
        self.lens = np.fromiter(map(len, encoded), dtype=np.intp, count=len(encoded))
        # The names as a compact JSON array writes them: a name, then `","` before the next.
        self.starts = np.full(len(encoded), 2, dtype=np.intp)
        if len(encoded) > 1:
            np.cumsum(self.lens[:-1] + len(_SEPARATOR), out=self.starts[1:])
            self.starts[1:] += 2
        self.buf = np.frombuffer(b'["' + _SEPARATOR.join(encoded) + _SEPARATOR, dtype=np.uint8)
        self.scratch = _Scratch()  # find() is not for two threads at once: the extender's loop calls it
        self.hashes = _hashes(self.buf, self.starts, self.starts + self.lens, self.scratch)
        size = 1 << max(4, (4 * max(len(names), 1) - 1).bit_length())  # at most a quarter full
        self.mask = np.uint64(size - 1)
        table, mask = [-1] * size, size - 1
        for slot, h in enumerate(self.hashes.tolist()):
            at = h & mask
            while table[at] >= 0:
                at = (at + 1) & mask
            table[at] = slot
        self.table = np.array(table, dtype=np.intp)

    def find(self, raw: bytes | memoryview) -> Found | None:
        """The slots of the names in `raw`, a compact JSON array of strings (valid JSON: msgspec
        checked it); None when they are not found exactly this way."""
        buf = np.frombuffer(raw, dtype=np.uint8)
        if len(buf) < 2 or buf[0] != ord("[") or buf[-1] != ord("]") or (buf == _BACKSLASH).any():
            return None
        quotes = np.flatnonzero(buf == _QUOTE)
        if not len(quotes):
            return Found(self.layout, np.zeros(0, dtype=np.intp)) if len(buf) == 2 else None
        starts, stops = quotes[0::2] + 1, quotes[1::2]
        # Only strings, one comma between each two: with no escape, every quote opens or closes a
        # string, so nothing else can sit in the array.
        if len(quotes) % 2 or starts[0] != 2 or stops[-1] != len(buf) - 2:
            return None
        between = stops[:-1]
        if (starts[1:] - between != len(_SEPARATOR)).any() or (buf[between + 1] != _COMMA).any():
            return None
        scratch = self.scratch.upto(len(buf))
        slots = self._lookup(_hashes(buf, starts, stops, scratch))
        if slots is None or not np.array_equal(self.lens[slots], stops - starts):
            return None
        # Every byte against the table's: each name and the `","` after it sit in the table as in
        # the array, so one shift per name maps the array's bytes onto the table's.
        # The shift is set where a name starts in the array and carried on by a running sum.
        shift = self.starts[slots] - starts
        end = int(stops[-1])
        shifts = scratch.shifts[: end - 2]
        shifts.fill(0)
        shifts[starts - 2] = np.diff(shift, prepend=0)
        np.cumsum(shifts, out=shifts)
        np.add(shifts, scratch.places[2:end], out=shifts)
        held = np.take(self.buf, shifts, out=scratch.bytes[: end - 2])
        return Found(self.layout, slots) if np.array_equal(held, buf[2:end]) else None

    def _lookup(self, hashes: np.ndarray) -> np.ndarray | None:
        """The slot holding each hash, by linear probing; None when one is not held."""
        table, mask = self.table, self.mask
        at = (hashes & mask).astype(np.intp)
        slots = np.empty(len(hashes), dtype=np.intp)
        todo = np.arange(len(hashes))
        while len(todo):
            slot = table[at]
            if (slot < 0).any():  # an empty place before the hash: not held
                return None
            hit = self.hashes[slot] == hashes[todo]
            slots[todo[hit]] = slot[hit]
            todo, at = todo[~hit], (at[~hit] + 1) & int(mask)
        return slots


def names_of(asked: list[str] | Found) -> list[str]:
    """The names of the nodes a call asked about, as a list."""
    return asked.names() if isinstance(asked, Found) else asked
