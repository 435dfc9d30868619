"""kube-scheduler's sample of nodes, as the extender sees it, and the hand-over of a pod whose rules only
nodes outside the sample meet.

kube-scheduler stops its filter pass once it has found `numFeasibleNodesToFind` feasible nodes (at least
100; `percentageOfNodesToScore` of the cluster, by default 50 % less one point per 125 nodes, at least
5 %) and asks the extender about those only: a rule that only a few nodes meet (a `require_with_tag`
neighbour, MATCH_TAG, a trait, strict `near`) may find none of them in the sample. berth then looks past
it (berth.extender.placer): a pod whose hard rules leave fewer nodes than kube's own minimum ("thin")
is decided over every node with the model of kube's filters `berth simulate` uses, and when the best
node is outside the sample the pod is handed over to it: berth writes it as the pod's
`status.nominatedNodeName` and answers the attempt with an error, so that kube-scheduler's next attempt
evaluates that node first (schedule_one.go, evaluateNominatedNode), filters and extender included, with
no preemption and no full pass. An error, not a refusal: kube runs no PostFilter, so neither a
preemption dry run nor a clearing of the nomination follows.

The nomination is written once kube-scheduler has recorded the failed attempt (the pod's PodScheduled
condition carries berth's message), not while the attempt is under way: kube's failure handling
answers an error with "clear the nomination", and a nomination that reached its cache before the
attempt ended was cleared (measured: 40 pods at once on 200 nodes, most handed over 2 to 4 times).
Should kube clear it anyway, it is written again, at most REWRITES_AT_MOST times.

On arrival: a new pod whose hard rules list fewer nodes than kube's minimum of feasible nodes is thin in
any sample, so berth nominates its node as soon as the watch shows it, before kube-scheduler's first
attempt, which then evaluates that node first: no failed attempt, no backoff.

The hand-over never depends on luck: a node kube rejected (the next attempt came with other nodes) is
not nominated again for that pod for a while, a pod is handed over at most HANDOVERS_AT_MOST times in
HANDOVER_WINDOW, and a nomination kube-scheduler made itself (preemption) is never written over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MIN_FEASIBLE_NODES = 100  # kube's minFeasibleNodesToFind
MIN_FEASIBLE_PERCENTAGE = 5  # kube's minFeasibleNodesPercentageToFind
DEFAULT_PERCENTAGE = 0  # kube's default percentageOfNodesToScore: adaptive
HANDOVERS_AT_MOST = 3
HANDOVER_WINDOW = 600.0  # seconds
REJECTED_FOR = 60.0  # seconds a node kube rejected is not nominated again for the same pod
KEPT_AT_MOST = 10_000
NOMINATION_SEEN_WITHIN = 10.0  # seconds for berth's write of the nomination to reach kube-scheduler
# seconds to wait for kube-scheduler to record the failed attempt (it does not when the pod's condition
# already says the same) before the nomination is written all the same
WRITE_AFTER_AT_MOST = 2.0
REWRITES_AT_MOST = 2  # a nomination kube cleared is written again this many times


def feasible_nodes_to_find(percentage: int, nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind (pkg/scheduler/schedule_one.go): how many feasible nodes
    its filter pass looks for before it stops, over a cluster of `nodes` nodes."""
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    found = nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES)


def parse_profiles(text: str) -> dict[str, int]:
    """`berth serve --kube-sample`: PROFILE=PERCENT[,PROFILE=PERCENT...] as kube-scheduler's
    configuration sets percentageOfNodesToScore per profile (0: kube's adaptive default)."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) > 100:
            raise ValueError(
                f"--kube-sample: {part!r} is not PROFILE=PERCENT with PERCENT from 0 to 100 "
                "(0 is kube-scheduler's adaptive default)"
            )
        out[name.strip()] = int(value)
    return out


def sampled(asked: int, nodes: int, percentage: int) -> bool:
    """kube-scheduler stopped its filter pass early: it asked about as many nodes as it looks for, fewer
    than the cluster's (a full pass asks about fewer: only the nodes its filters accept)."""
    if percentage >= 100 or asked >= nodes:
        return False
    return asked >= feasible_nodes_to_find(percentage, nodes)


def thin(feasible: int, asked: int) -> bool:
    """berth's hard rules leave fewer of the asked nodes than kube-scheduler's own minimum of feasible
    nodes: the sample may hold none of, or not the best of, the nodes the rules want."""
    return feasible < min(MIN_FEASIBLE_NODES, asked)


@dataclass
class _Pod:
    times: list[float] = field(default_factory=list)  # when it was handed over, within the window
    node: str = ""  # the node it was last handed over to
    rejected: dict[str, float] = field(default_factory=dict)  # node -> until when it is not nominated
    message: str = ""  # berth's answer to the attempt it handed the pod over in
    written: float | None = None  # when the nomination was written
    stored: bool = False  # the watch showed it stored
    rewrites: int = 0
    evaluated: bool = False  # kube-scheduler's attempt asked about the nominated node alone
    pod: Any = None  # the pod, for the write


class HandOvers:
    """What berth remembers of the pods it handed over: the loop guard."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._pods: dict[str, _Pod] = {}
        self._seen: dict[str, None] = {}  # the pods considered for a nomination on arrival

    def _of(self, key: str) -> _Pod:
        pod = self._pods.get(key)
        if pod is None:
            if len(self._pods) >= KEPT_AT_MOST:
                self._pods.clear()
            pod = self._pods[key] = _Pod()
        return pod

    def node(self, key: str) -> str:
        """The node the pod was last handed over to ("" when none)."""
        found = self._pods.get(key)
        return found.node if found is not None else ""

    def nominated_by_berth(self, key: str, node: str) -> bool:
        found = self._pods.get(key)
        return found is not None and found.node == node

    def attempt(self, key: str, nominated: str, asked: list[str]) -> bool:
        """A new attempt for the pod: if berth handed it over to `nominated` and kube asks about other
        nodes (or more), kube's filters rejected that node: it is excluded for a while (True)."""
        found = self._pods.get(key)
        if found is None or not found.node or found.node != nominated:
            return False
        if asked != [nominated]:
            found.rejected[nominated] = self.clock() + REJECTED_FOR
            found.node = ""
            return True
        found.evaluated = True  # kube-scheduler evaluated it: the hand-over is done, whatever the outcome
        return False

    def excluded(self, key: str) -> set[str]:
        found = self._pods.get(key)
        if found is None:
            return set()
        now = self.clock()
        found.rejected = {n: until for n, until in found.rejected.items() if until > now}
        return set(found.rejected)

    def allowed(self, key: str) -> bool:
        found = self._pods.get(key)
        if found is None:
            return True
        now = self.clock()
        found.times = [t for t in found.times if now - t < HANDOVER_WINDOW]
        return len(found.times) < HANDOVERS_AT_MOST

    def pending(self, key: str, nominated: str) -> str | None:
        """berth's answer to the hand-over, while the attempt at hand does not carry the nomination
        (not written yet, or written less than NOMINATION_SEEN_WITHIN ago and not in kube-scheduler's
        cache yet): that attempt gets the same answer, and is not handed over again. The same words, so
        that kube-scheduler's record of the attempt does not change."""
        found = self._pods.get(key)
        if found is None or not found.node or not found.times or nominated == found.node:
            return None
        since = found.times[-1] if found.written is None else found.written
        return found.message if self.clock() - since < NOMINATION_SEEN_WITHIN else None

    def handed_over(
        self, key: str, node: str, message: str = "", pod: Any = None, *, written: bool = False
    ) -> None:
        """`written`: the nomination is written at once (a pod nominated on arrival: no attempt of
        kube's to wait for)."""
        found = self._of(key)
        found.times.append(self.clock())
        found.node, found.message, found.pod = node, message, pod
        found.written = self.clock() if written else None
        found.stored, found.rewrites, found.evaluated = False, 0, False

    def first_seen(self, key: str) -> bool:
        """True the first time berth asks about this pod (the watch shows a pod many times before
        kube-scheduler tries it): a pod is considered for a nomination on arrival once."""
        if key in self._seen:
            return False
        if len(self._seen) >= KEPT_AT_MOST:
            self._seen.clear()
        self._seen[key] = None
        return key not in self._pods

    def count(self, key: str) -> int:
        """The pod's hand-overs within HANDOVER_WINDOW, this one included."""
        found = self._pods.get(key)
        return len(found.times) if found is not None else 0

    def awaiting(self, key: str) -> bool:
        """A hand-over kube-scheduler has not evaluated yet: the watch's copies of the pod matter."""
        found = self._pods.get(key)
        return found is not None and bool(found.node) and not found.evaluated

    def to_write(self, key: str, condition: str | None, nominated: str) -> tuple[Any, str] | None:
        """(pod, node) when the nomination is to be written now, from the watch's copy of the pod: its
        PodScheduled condition message and status.nominatedNodeName. Written once kube-scheduler has
        recorded the attempt berth handed the pod over in (the condition carries berth's answer); again
        when kube cleared it after it was stored, at most REWRITES_AT_MOST times."""
        found = self._pods.get(key)
        if found is None or not found.node or found.evaluated:
            return None
        if found.written is None:
            return self._write(found) if condition == found.message else None
        if nominated == found.node:
            found.stored = True
            return None
        if found.stored and not nominated and found.rewrites < REWRITES_AT_MOST:
            found.rewrites += 1
            found.stored = False
            return self._write(found)
        return None

    def overdue(self, key: str, node: str) -> tuple[Any, str] | None:
        """(pod, node) when the hand-over to `node` is still not written WRITE_AFTER_AT_MOST after it:
        kube-scheduler did not record the attempt (its condition already said the same)."""
        found = self._pods.get(key)
        if found is None or found.node != node or found.written is not None:
            return None
        return self._write(found)

    def _write(self, found: _Pod) -> tuple[Any, str]:
        found.written = self.clock()
        return found.pod, found.node

    def bound(self, key: str) -> None:
        self._pods.pop(key, None)
