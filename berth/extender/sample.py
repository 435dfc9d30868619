"""kube-scheduler's sample of nodes, as the extender sees it, and the hand-over of a pod whose rules only
nodes outside the sample meet.

kube-scheduler stops its filter pass once it has found `numFeasibleNodesToFind` feasible nodes (at least
100; `percentageOfNodesToScore` of the cluster, by default 50 % less one point per 125 nodes, at least
5 %) and asks the extender about those only: a rule that only a few nodes meet (a `require_with_tag`
neighbour, MATCH_TAG, a trait, strict `near`) may find none of them in the sample. berth then looks past
it (PastTheSample, below): a pod whose hard rules leave fewer nodes than kube's own minimum ("thin")
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

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.cluster.convert import pod_from_k8s
from berth.cluster.model import Pod
from berth.cluster.name_table import Found, names_of
from berth.cluster.per_pod import PerPod, PodStates, pod_key
from berth.cluster.placement_record import seed_for
from berth.engine import Decision, Event, Pipeline, decide, indexed_candidates
from berth.engine.types import Kind
from berth.errors import BerthError
from berth.extender import wire
from berth.extender.decisions import Cluster
from berth.extender.pod_events import NOTE_EVERY

log = logging.getLogger("berth.extender")

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


def asked_a_sample(asked: int, nodes: int, percentage: int) -> bool:
    """kube-scheduler stopped its filter pass early: it asked about as many nodes as it looks for, fewer
    than the cluster's (a full pass asks about fewer: only the nodes its filters accept)."""
    if percentage >= 100 or asked >= nodes:
        return False
    return asked >= feasible_nodes_to_find(percentage, nodes)


def too_few_in_sample(feasible: int, asked: int) -> bool:
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

    def __init__(self, clock: Callable[[], float] = time.monotonic, states: PodStates | None = None) -> None:
        self.clock = clock
        states = states if states is not None else PodStates()
        self._pods: PerPod[_Pod] = states.map("hand-overs", KEPT_AT_MOST)
        # the pods considered for a nomination on arrival
        self._seen: PerPod[bool] = states.map("pods seen arriving", KEPT_AT_MOST)

    def _of(self, key: str) -> _Pod:
        pod = self._pods.get(key)
        if pod is None:
            pod = _Pod()
            self._pods.set(key, pod)
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
        self._seen.set(key, True)
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
        self._pods.pop(key)


Nominator = Callable[[Pod, str], Awaitable[None]]  # writes the pod's status.nominatedNodeName
Recorder = Callable[[Pod, list[Event]], Awaitable[None]]


class PastTheSample:
    """The flow of a thin pod past kube-scheduler's sample: the decision over every node, the hand-over
    (its nomination written when kube-scheduler has recorded the attempt, and again if kube cleared
    it), the nomination on arrival, and the refusal's note about nodes kube did not ask about."""

    def __init__(
        self,
        cluster: Cluster,
        rules: Pipeline,
        with_kube: Pipeline,
        *,
        kube_sample: Mapping[str, int],
        nominate: Nominator | None,
        recorder: Recorder,
        states: PodStates,
        nominations_placed: Callable[[Pod], contextlib.AbstractContextManager],
        may_filter: Callable[[], bool],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        observe: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.rules = rules
        self.with_kube = with_kube
        self.kube_sample = kube_sample
        self.nominate = nominate
        self.record = recorder
        self.nominations_placed = nominations_placed
        self.may_filter = may_filter
        self.spawn = spawn
        self.observe = observe
        self.clock = clock
        self.handovers = HandOvers(clock, states)
        self._unasked_notes = states.map("notes on unasked nodes", KEPT_AT_MOST)  # pod -> (note, when)

    def attempt(self, pod: Pod, asked: list[str] | Found) -> None:
        """A new attempt of kube-scheduler's for the pod: when it asks about other nodes than the one
        berth handed the pod over to, kube's filters rejected that node, and the pod is no longer
        counted there."""
        if pod.nominated_node and self.handovers.attempt(pod_key(pod), pod.nominated_node, names_of(asked)):
            self.cluster.release(pod)

    async def decide_past(
        self, pod: Pod, asked: list[str] | Found, decision: Decision
    ) -> wire.ExtenderFilterResult | None:
        """For a pod kube-scheduler asked about a sample of the nodes, whose hard rules leave fewer of
        them than kube's own minimum ("thin"): a decision over every node with kube's filters as berth
        models them, and, when its node is outside the sample, the hand-over. None: the decision over
        the sample stands."""
        percentage = self.kube_sample.get(pod.scheduler_name)
        view = self.cluster.view
        if percentage is None or not asked_a_sample(len(asked), len(view), percentage):
            return None
        feasible = decision.feasible
        if not too_few_in_sample(feasible, len(asked)):
            self.observe("decided")
            return None
        key = pod_key(pod)
        if pod.nominated_node and not self.handovers.nominated_by_berth(key, pod.nominated_node):
            return None  # kube-scheduler's own nomination (it preempted there): never written over
        pending = self.handovers.pending(key, pod.nominated_node)
        if pending is not None:  # handed over already; kube-scheduler has not seen the nomination yet
            if decision.chosen is not None and decision.chosen == self.handovers.node(key):
                return None  # ... but its sample holds the node, and the decision over it agrees
            return wire.ExtenderFilterResult(error=pending)
        if self.nominate is None or not self.handovers.allowed(key):
            self.observe("refused")
            return None
        names = set(names_of(asked))
        wide = self.looked_past(pod, self.handovers.excluded(key))
        if wide.chosen is None or wide.chosen in names:
            self.observe("widened" if wide.chosen else "refused")
            return None
        node = wide.chosen
        message = (
            f"berth: {node}, outside kube-scheduler's sample ({len(asked)} of {len(view)} nodes), is where "
            f"berth's rules place the pod ({feasible} of the sample meet them): nominated it, so that "
            f"kube-scheduler's next attempt evaluates it first (hand-over {self.handovers.count(key) + 1})"
        )
        # Written once kube-scheduler has recorded this attempt (pod_seen), or WRITE_AFTER_AT_MOST on.
        await self.record(pod, [self._hand_over(pod, key, node, message, at_once=False)])
        return wire.ExtenderFilterResult(error=message)

    def _hand_over(self, pod: Pod, key: str, node: str, message: str, *, at_once: bool) -> Event:
        """Remember the hand-over, count the pod on its node, have the nomination written (`at_once`,
        or once kube-scheduler has recorded the attempt): the event that says so."""
        self.handovers.handed_over(key, node, message, pod, written=at_once)
        # Counted there at once, as a placement is: the next pods of a burst see it (kube-scheduler
        # counts nominated pods on their node too, and would reject a node berth filled past its room).
        self.cluster.reserve(pod, node)
        self.spawn(self._write_nomination(pod, node) if at_once else self._write_when_overdue(key, node))
        self.observe("handed_over")
        return Event("Normal", "HandedOver", message.removeprefix("berth: "))

    def pod_seen(self, obj: dict[str, Any]) -> None:
        """The watch's copy of a pod: the nomination is written once kube-scheduler has recorded the
        attempt that handed the pod over, and written again if kube cleared it; a new pod is considered
        for a nomination on arrival."""
        meta = obj.get("metadata") or {}
        key = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        if not self.handovers.awaiting(key):
            self._nominate_on_arrival(obj, key)
            return
        if (obj.get("spec") or {}).get("nodeName"):
            self.handovers.bound(key)
            return
        status = obj.get("status") or {}
        conditions = status.get("conditions") or ()
        condition = next((c.get("message") for c in conditions if c.get("type") == "PodScheduled"), None)
        write = self.handovers.to_write(key, condition, status.get("nominatedNodeName") or "")
        if write is not None:
            self.spawn(self._write_nomination(*write))

    async def _write_when_overdue(self, key: str, node: str) -> None:
        await asyncio.sleep(WRITE_AFTER_AT_MOST)
        write = self.handovers.overdue(key, node)
        if write is not None:
            await self._write_nomination(*write)

    async def _write_nomination(self, pod: Pod, node: str) -> None:
        assert self.nominate is not None
        try:
            await self.nominate(pod, node)
        except Exception as exc:  # the next attempt without it is answered as the hand-over was, a while
            log.warning("nominating %s for %s failed: %s", node, pod.key, exc)

    def looked_past(self, pod: Pod, excluded: set[str], some: list[str] | None = None) -> Decision:
        """The decision for a thin pod past kube's sample: over the nodes berth's rules accept (`some`:
        those its hard steps list, when already worked out) that kube would look for, with kube's
        filters as berth models them; over all of them when kube's filters refuse those."""
        view = self.cluster.view
        with self.nominations_placed(pod):
            nodes, wanted = self._widened(pod, excluded, some)
            wide = decide(pod, view, self.with_kube, candidates=nodes[:wanted], seed=seed_for(pod))
            if wide.chosen is None and len(nodes) > wanted:  # kube's filters refused those: every one
                wide = decide(pod, view, self.with_kube, candidates=nodes, seed=seed_for(pod))
        return wide

    def _nominate_on_arrival(self, obj: dict[str, Any], key: str) -> None:
        """A new pod kube-scheduler has not tried yet, whose hard rules list fewer nodes than kube's
        own minimum of feasible nodes: any sample kube takes is thin for it, and its first attempt
        would end in a hand-over. Nominated at once instead, so that the first attempt evaluates the
        node berth's rules place it on ("on arrival", above)."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        percentage = self.kube_sample.get(spec.get("schedulerName") or "")
        if (
            percentage is None
            or percentage >= 100
            or self.nominate is None
            or spec.get("nodeName")
            or status.get("nominatedNodeName")
            or status.get("phase", "Pending") != "Pending"
            or (obj.get("metadata") or {}).get("deletionTimestamp")
            or any(c.get("type") == "PodScheduled" for c in status.get("conditions") or ())
            or not self.handovers.first_seen(key)
            or not self.cluster.ready()
            or not self.may_filter()
        ):
            return
        view = self.cluster.view
        wanted = feasible_nodes_to_find(percentage, len(view))
        if wanted >= len(view):
            return  # kube asks about every node it finds feasible: nothing to hand over
        try:
            pod = pod_from_k8s(obj, memo=True)
        except BerthError:
            return  # refused with its reason at the first attempt
        some = indexed_candidates(pod, view, self.rules)
        if some is None or len(some) >= MIN_FEASIBLE_NODES:
            return  # a sample may well hold enough of its nodes: kube's attempt decides
        node = self.looked_past(pod, set(), some).chosen
        if node is None:
            return  # nothing fits now: the first attempt says why
        message = (
            f"berth: {node} is where berth's rules place the pod; they leave {len(some)} of {len(view)} "
            f"nodes, fewer than kube-scheduler's sample ({wanted}) needs to hold one for sure: nominated it "
            "before kube-scheduler's first attempt, so that the attempt evaluates it first (hand-over 1)"
        )
        self.spawn(self.record(pod, [self._hand_over(pod, key, node, message, at_once=True)]))

    def _widened(self, pod: Pod, excluded: set[str], some: list[str] | None = None) -> tuple[list[str], int]:
        """The nodes a thin pod is decided over past kube's sample: those berth's own rules accept
        (one decision over every node, as the extender decides), less the ones kube rejected after a
        hand-over, in a rotation seeded by the pod; and how many of them kube-scheduler would look
        for. kube's filters, as berth models them, are then asked about these first, the rest only
        when they refuse them all."""
        view = self.cluster.view
        # Only the nodes a hard step lists from an index (a tag's holders) can pass: those asked alone.
        if some is None:
            some = indexed_candidates(pod, view, self.rules)
        rules = decide(pod, view, self.rules, candidates=some, seed=seed_for(pod))
        refused = rules.failures()
        accepted = [
            n
            for n in (view.node_names() if some is None else sorted(some))
            if n not in excluded and ((why := refused.get(n)) is None or why.kind is Kind.SET_ASIDE)
        ]
        wanted = feasible_nodes_to_find(self.kube_sample.get(pod.scheduler_name, 0), len(view))
        if len(accepted) > wanted:
            start = seed_for(pod) % len(accepted)
            accepted = [*accepted[start:], *accepted[:start]]
        return accepted, wanted

    def unasked_note(self, pod: Pod, asked: list[str] | Found) -> str:
        """For a pod refused on every node kube-scheduler asked about, when it asked about fewer than
        the cluster's nodes: a node it did not ask about that berth's rules and kube's filters (as
        `berth simulate` models them) accept, named in the refusal. With percentageOfNodesToScore
        below 100, kube-scheduler asks only about its sample, and a node that alone meets a berth rule
        may be outside it (docs/extender.md, "percentageOfNodesToScore"). Worked out at most once per
        pod per NOTE_EVERY: it is a decision over the nodes left out."""
        view = self.cluster.view
        if len(asked) >= len(view):
            return ""
        key = pod_key(pod)
        now = self.clock()
        kept = self._unasked_notes.get(key)
        if kept is not None and now - kept[1] < NOTE_EVERY:
            return kept[0]
        wanted = set(names_of(asked))
        unasked = [n for n in view.node_names() if n not in wanted]
        decision = decide(pod, view, self.with_kube, candidates=unasked, seed=seed_for(pod))
        note = ""
        if decision.chosen is not None:
            note = (
                f"; kube-scheduler asked about {len(asked)} of the cluster's {len(view)} nodes, and "
                f"{decision.chosen}, which it did not ask about, meets berth's rules and kube's filters "
                "as berth models them: with percentageOfNodesToScore below 100 berth sees only "
                "kube-scheduler's sample"
            )
        self._unasked_notes.set(key, (note, now))
        return note
