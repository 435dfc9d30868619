"""kube-scheduler's order of the nodes, learned from its filter calls, to find a call's names at once.

With a sample (percentageOfNodesToScore below 100), kube-scheduler checks its nodes in the order of its
snapshot, starting where the last pod's check stopped (algorithm.go, nextStartNodeIndex), and sends
the extender the feasible ones in the order their checks finished. Its filter runs on parallel
workers, yet most calls are one worker's run: on the e2e control plane (5000 nodes, 500 names a
call, 1500 calls; bench/HISTORY.md, "kube-scheduler's order of the nodes, learned") 65 % of the calls
were one run of kube's order and 10 % two; the rest had its workers' runs interleaved. Such a run is
found here by its first name and one comparison of its bytes with kube's order as JSON, where
decoding the names and finding each one's slot costs a cache miss or more a name.

The order is learned by a majority vote of the names asked one after the other, by slot. A wrong vote
only costs a call found the usual way; what is found is exact: the order's bytes are made from the
view's own names, so equal bytes are the same names (a view with a name JSON would escape, or one
that is not ASCII, is never rendered). Where kube's calls are seldom runs (a kube-scheduler whose
workers all run at once, on many cores), the learning pays for nothing and rests a while.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from berth.cluster.name_table import Found

VOTES_AT_MOST = 8  # a run found is worth this many votes: an interleaved call's vote does not undo it
RENDER_AFTER = 2  # calls not found, while the votes changed the order, before it is first rendered ...
RENDER_AFTER_AT_MOST = 256  # ... twice as many before each render after, up to this
TRIAL = 128  # calls after which the order is judged by the share of them found: ...
# ... at least this, and the order is kept until a trial finds less: only calls that agree with it
# vote (AGREED), so the interleaved calls' votes do not keep changing it, nor have it rendered again
# and again (a few ms each, cold, in kube-scheduler's cycle) ...
KEEP = 0.25
# While it is kept, a call not found votes only when this share of its names follow one another as
# the order has it: one worker's run where the order is wrong in a few places, not workers interleaved.
AGREED = 0.9
PAYS = 0.2  # ... less than this in two trials running while learning, and the learning ...
RESTS = 4096  # ... rests for this many calls, then starts again from nothing
_BREAK = b"\n"  # between two stretches of the order not known to follow each other: no call holds it


class KubeOrder:
    """kube-scheduler's node order as far as learned, for one layout of the view (Slots). recall()
    for every call; learn() for one not recalled, with the slots found the usual way."""

    def __init__(self, layout: Any) -> None:
        self.layout = layout
        names = layout.names
        self.plain = all(name.isascii() and '"' not in name and "\\" not in name for name in names)
        self.calls = self.hits = 0  # in this trial
        self.idle = 0  # trials running that found less than PAYS while learning
        self.resting = 0  # calls left to answer without the order
        self._forget()

    def moved_to(self, layout: Any) -> KubeOrder:
        """The order learned so far on a new layout of the view (a node added or removed): kube's own
        order changes as little, so the votes carry over by name and the order is rendered at once
        (without the nodes gone; the nodes added are learned as before)."""
        order = KubeOrder(layout)
        # A learning at rest stays so, and renders that found nothing stay rare: where calls are
        # seldom runs, nodes coming and going must not start it again each time.
        order.resting, order.idle, order.wait, order.kept = self.resting, self.idle, self.wait, self.kept
        index = layout.index
        to = np.array([index.get(name, -1) for name in self.layout.names], dtype=np.intp)
        a = np.flatnonzero(self.next >= 0)
        b = self.next[a]
        kept = (to[a] >= 0) & (to[b] >= 0)
        order.next[to[a[kept]]] = to[b[kept]]
        order.votes[to[a[kept]]] = self.votes[a[kept]]
        if len(self.stops) and not self.resting:
            order._render()
        return order

    def _forget(self) -> None:
        n = len(self.layout.names)
        self.kept = False  # the order is kept: only calls that agree with it vote
        self.wait = RENDER_AFTER
        self.next = np.full(n, -1, dtype=np.intp)  # the slot voted to follow each slot
        self.votes = np.zeros(n, dtype=np.intp)
        self.last = -1  # the last slot of the last call: the next call's first usually follows it
        self.changed = 0  # successors changed since the order was rendered
        self.missed = 0  # calls not found since then
        self.rendered = b""  # the order as `"name",` after `"name",`; a cycle's names again after it
        self.slots = np.zeros(0, dtype=np.intp)  # the slot at each place of rendered
        self.starts = np.zeros(0, dtype=np.intp)  # where each place's `"name",` starts in rendered
        self.stops = np.zeros(0, dtype=np.intp)  # ... and where it ends
        self.place = np.full(n, -1, dtype=np.intp)  # each slot's first place

    def recall(self, raw: bytes) -> Found | None:
        """The names of a filter call's NodeNames (its bytes) with their slots, when they are a run
        of the order as rendered; None otherwise."""
        if self.resting:
            self.resting -= 1
            if not self.resting:
                self._forget()
            return None
        self.calls += 1
        if self.calls >= TRIAL:
            self._judge()
        end = raw.find(b'"', 2)
        if end < 0 or not raw.startswith(b'["') or not len(self.stops):
            return None
        slot = self.layout.index.get(raw[2:end].decode("utf-8", "replace"))
        if slot is None or (p := int(self.place[slot])) < 0:
            return None
        j = p + raw.count(b'","')  # the place of the last name, if the names are a run from p
        # The array's names and the comma after the last take as many bytes as those places do ...
        if j >= len(self.stops) or self.stops[j] - self.starts[p] != len(raw) - 1:
            return None
        # ... and are the same bytes.
        if not self.rendered.startswith(memoryview(raw)[1:-1], int(self.starts[p])):
            return None
        self.hits += 1
        self.last = int(self.slots[j])
        run = self.slots[p : j + 1]
        if not self.kept:
            self.votes[run] = VOTES_AT_MOST  # one worker's run: kube's order
        return Found(self.layout, run)

    def _judge(self) -> None:
        share = self.hits / self.calls
        self.calls = self.hits = 0
        if self.kept and share < KEEP:
            self.wait = RENDER_AFTER  # kube's order changed: learned again as from the start
        elif not self.kept and share >= KEEP and self.changed:
            self._render()  # kept from now on: with every vote so far
        self.kept = share >= KEEP
        self.idle = 0 if share >= PAYS else self.idle + 1
        if self.idle >= 2:
            self.idle, self.resting = 0, RESTS

    def learn(self, slots: np.ndarray) -> None:
        """A call not recalled, with the slots of its names found the usual way (by their hashes: a
        rare wrong slot spoils a vote, nothing else); the order rendered again once enough calls
        were not found while the votes changed it."""
        if self.resting or not len(slots):
            return
        self.missed += 1
        if self.kept and (self.next[slots[:-1]] == slots[1:]).mean() < AGREED:
            return  # kube's workers interleaved: no vote against the order kept
        self._vote(slots)
        if self.changed and self.missed >= self.wait:
            # Each render waits for twice the calls the last one did: while the interleaved calls'
            # votes keep changing the order, a render a few calls would cost more than it finds.
            self.wait = min(2 * self.wait, RENDER_AFTER_AT_MOST)
            self._render()

    def _vote(self, run: np.ndarray) -> None:
        """Each slot of the call for the slot after it (the first for the last call's last): a
        successor with no vote left is replaced (Boyer and Moore's majority vote)."""
        a = run[:-1] if self.last < 0 else np.concatenate(([self.last], run[:-1]))
        b = run[1:] if self.last < 0 else run
        self.last = int(run[-1])
        nxt, votes = self.next, self.votes
        same = nxt[a] == b
        agreed = a[same]
        votes[agreed] = np.minimum(votes[agreed] + 1, VOTES_AT_MOST)
        a, b = a[~same], b[~same]
        if not len(a):
            return
        held = votes[a]
        lost = held <= 1
        nxt[a[lost]] = b[lost]
        votes[a[lost]] = 1
        votes[a[~lost]] = held[~lost] - 1
        self.changed += int(lost.sum())

    def _render(self) -> None:
        """The order as bytes: each stretch of slots that follow one another, from a slot no other is
        voted to precede (then the cycles left), a cycle's names again after its end for a run
        across it."""
        self.changed = self.missed = 0
        if not self.plain:
            return
        nxt = self.next.tolist()
        preceded = np.zeros(len(nxt), dtype=bool)
        preceded[self.next[self.next >= 0]] = True
        seen = [False] * len(nxt)
        stretches: list[list[int]] = []
        for first in [*np.flatnonzero(~preceded).tolist(), *range(len(nxt))]:
            if seen[first] or nxt[first] < 0:
                continue
            stretch, s = [], first
            while s >= 0 and not seen[s]:
                seen[s] = True
                stretch.append(s)
                s = nxt[s]
            if s == first:
                stretch.extend(stretch[:-1])
            stretches.append(stretch)
        names = self.layout.names
        parts, slots, lens = [], [], []
        for stretch in stretches:
            parts.append("".join(f'"{names[s]}",' for s in stretch).encode() + _BREAK)
            slots.extend(stretch)
            lens.extend(len(names[s]) + 3 for s in stretch)
            lens[-1] += len(_BREAK)  # (taken off its stop below)
        self.rendered = b"".join(parts)
        self.slots = np.array(slots, dtype=np.intp)
        ends = np.cumsum(np.array(lens, dtype=np.intp))
        self.starts = np.concatenate(([0], ends[:-1])).astype(np.intp)
        self.stops = self.starts + np.array([len(names[s]) + 3 for s in slots], dtype=np.intp)
        self.place = np.full(len(nxt), -1, dtype=np.intp)
        held, first = np.unique(self.slots, return_index=True)
        self.place[held] = first
