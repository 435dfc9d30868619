"""What the extender's verbs do, free of HTTP: filter, prioritize, bind, preempt, simulate.

kube-scheduler calls filter, then (with more than one node left) prioritize, then bind, one pod at a
time; the binding itself runs asynchronously in the scheduler. berth decides once, at filter: it
answers with the one node it chose, so the scheduler skips scoring, and reserves the pod there at once
so that the next pod of a burst sees it. bind then only checks that nothing the decision read has
changed since (the node and its pods, the PlacementPolicies, the pod itself) and decides again, for
that node alone, only when something has. prioritize stays correct for configurations that call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from berth.analysis.preemption import Victims, nominated_here, overlay, select_victims
from berth.cluster import placement_record
from berth.cluster.convert import decoded_pod, pod_from_k8s, watched_pod
from berth.cluster.kube_order import KubeOrder
from berth.cluster.kubeapi import ApiError
from berth.cluster.model import Pod
from berth.cluster.names import Found, Guessed
from berth.cluster.placement_record import seed_for
from berth.cluster.view import ClusterView
from berth.engine import Decision, Event, Pipeline, decide, listed
from berth.engine.types import Kind
from berth.errors import BerthError
from berth.extender import wire
from berth.extender.sample import (
    MIN_FEASIBLE_NODES,
    WRITE_AFTER_AT_MOST,
    HandOvers,
    feasible_nodes_to_find,
    sampled,
    thin,
)

log = logging.getLogger("berth.extender")

DECISION_CACHE = 10_000
# The events a placed pod can get (`berth serve --placement-events`); refusals and invalid
# specifications are always recorded.
PLACEMENT_EVENTS = ("Placed", "HadNoChoice", "FinalCandidates", "HighestAffinity")
# A NodeNames array of this many names or more is found in the view's name table; fewer cost less
# decoded (numpy's fixed cost per call; measured in the extender's filter at 500 to 5000 names).
FIND_FROM_NAMES = 1200
NOT_READY = "berth: the cluster cache is not synced yet; the pod will be retried"
NOT_LEADING = (
    "berth: this replica's scheduler does not hold the lease, or berth has not listed the cluster since "
    "it took it; the pod will be retried"
)
# Nodes a refused pod that may preempt is checked on for blocks only berth's rules make.
BLOCKS_CHECKED = 5
REFUSAL_EVENT_EVERY = 60.0  # seconds between repeated refusal events for the same pod and text
# How a bind ended: bound as decided at filter with nothing changed since (confirmed) or after deciding
# again for the node (rechecked); refused (the node no longer fits, the pod is unknown, the cache is not
# synced); or the Binding write failed.
BIND_OUTCOMES = ("confirmed", "rechecked", "refused", "failed")


# How long after berth's answer to a preemption a new one waits while the victims of the node kube
# chose are going (their deletion reaches kube-scheduler's cache within a second or two).
SETTLING_SECONDS = 15.0


@dataclass(slots=True)
class Preempting:
    """berth's last answer to kube-scheduler's preemption for a pod: when, and per node its victims and
    kube's; told: the events of the node kube chose are recorded."""

    at: float
    nodes: dict[str, tuple[Victims, list[Pod]]]
    told: bool = False


class Cluster(Protocol):
    view: ClusterView

    def ready(self) -> bool: ...
    def reserve(self, pod: Pod, node: str) -> None: ...
    def release(self, pod: Pod) -> None: ...


Binder = Callable[[Pod, str, dict[str, str]], Awaitable[None]]  # pod, node, annotations for the pod
Nominator = Callable[[Pod, str], Awaitable[None]]  # writes the pod's status.nominatedNodeName
Retrier = Callable[[Pod, str], Awaitable[None]]  # asks kube-scheduler to try the pod again, saying why
RETRY_AT_MOST = 50  # pods retried for one pod that left
RETRY_EVERY = 5.0  # seconds between two retries of the same pod
Recorder = Callable[[Pod, list[Event]], Awaitable[None]]


@dataclass(slots=True)
class Remembered:
    """A decision and what it read: the view's generation of the chosen node after the reservation,
    of the PlacementPolicies, and the view's record of the pod."""

    pod: Pod
    decision: Decision
    node_generation: int = -1
    policy_generation: int = -1
    record: Pod | None = None


class Placer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        online: Pipeline,
        offline: Pipeline,
        binder: Binder,
        recorder: Recorder,
        observe: Callable[[str], None] = lambda outcome: None,
        observe_bind: Callable[[str], None] = lambda outcome: None,
        placement_events: Iterable[str] = (),
        digest: str = "",
        leadership: Any = None,
        kube_sample: Mapping[str, int] | None = None,
        nominate: Nominator | None = None,
        retry: Retrier | None = None,
    ) -> None:
        self.cluster = cluster
        # berth serve --follow-lease: filter only as the leader's sidecar after a fresh list, bind only
        # while the leader's (berth.cluster.leadership); None: every call is answered.
        self.leadership = leadership
        self.online = online
        self.offline = offline
        self.binder = binder
        self.recorder = recorder
        self.observe = observe
        # bind's outcome (BIND_OUTCOMES): a bind checked again, refused or failed costs the pod another
        # scheduling cycle, or says that something raced the decision.
        self.observe_bind = observe_bind
        self.placement_events = frozenset(placement_events)
        self.digest = digest or online.digest
        self._decisions: OrderedDict[str, Remembered] = OrderedDict()
        # "bytes", "recalled" (a run of kube-scheduler's order, berth.cluster.kube_order) or "decoded"
        self.read_names: Callable[[str], None] = lambda how: None
        self._kube_order: KubeOrder | None = None
        self.read_pod: Callable[[str], None] = lambda how: None  # "watched" or "decoded", per filter
        self._refusals: dict[str, tuple[str, float]] = {}
        self._unasked_notes: dict[str, tuple[str, float]] = {}
        self._warned: set[str] = set()
        # Per preemptor: berth's last answer to kube's preemption (berth.analysis.preemption).
        self._preempted: dict[str, Preempting] = {}
        # kube-scheduler's percentageOfNodesToScore per profile (berth serve --kube-sample): for a pod
        # of one of them, berth looks past kube's sample when its rules are thin (berth.extender.sample).
        self.kube_sample = dict(kube_sample or {})
        self.nominate = nominate
        self.handovers = HandOvers()
        self.observe_sample: Callable[[str], None] = lambda outcome: None
        # The pods berth refused (409), by namespace: retried when a pod of theirs leaves a node.
        self.retry = retry
        self._refused_pods: dict[str, dict[str, tuple[Pod, float]]] = {}
        self._background: set[asyncio.Task] = set()  # work under way in the background
        self._after: list[Callable[[], None]] = []  # what settle() does once the answer is sent

    # -- bookkeeping ----------------------------------------------------------------------------
    def _remember(self, pod: Pod, decision: Decision) -> Remembered:
        """Keep what bind needs of a decision (the chosen node, the summary, the events), not its
        per-node ledger: thousands of remembered ledgers over thousands of nodes would be gigabytes."""
        key = pod.uid or pod.key
        remembered = self._decisions[key] = Remembered(pod, decision.outcome())
        # The summary is worked out once the answer is sent, on every path (until then the kept
        # outcome holds the decision's ledger, which is large).
        self._after.append(decision.settle)
        self._decisions.move_to_end(key)
        while len(self._decisions) > DECISION_CACHE:
            self._decisions.popitem(last=False)
        return remembered

    def _recall(self, uid: str, key: str) -> Remembered | None:
        return self._decisions.get(uid or key)

    def _placed(self, pod: Pod, remembered: Remembered, node: str) -> None:
        """The pod counted on the node berth chose for it, and what the decision read stamped."""
        self.cluster.reserve(pod, node)
        self._stamp(remembered, node)

    def settle(self) -> None:
        """The bookkeeping the last answer left for after it was sent (the node a filter chose
        counted taken); done before any other call or event is taken, since nothing awaits between
        the answer and this."""
        after, self._after = self._after, []
        for work in after:
            try:
                work()
            except Exception:  # the answer is sent: a failure here is a bug to see, not the call's
                log.exception("bookkeeping after an answer failed")

    def _stamp(self, remembered: Remembered, node: str) -> None:
        view = self.cluster.view
        state = view.state(node)
        remembered.node_generation = state.generation if state is not None else -1
        remembered.policy_generation = view.policy_generation
        remembered.record = view.pod(remembered.pod.key)

    def _unchanged(self, remembered: Remembered, node: str) -> bool:
        """Nothing the decision read about `node` has changed since it was made. A pod governed by a
        rule that reads the whole cluster (ctx.session of a RULE_BASED policy) or the other nodes of the
        node's topology domain (a topologyKey) is always checked again."""
        view = self.cluster.view
        if remembered.decision.chosen != node or remembered.record is None:
            return False
        state = view.state(node)
        if state is None or state.generation != remembered.node_generation:
            return False
        if view.policy_generation != remembered.policy_generation:
            return False
        if view.pod(remembered.pod.key) is not remembered.record:
            return False
        if any(p.reads_session or p.per_domain for p in view.policies_for(remembered.pod)):
            return False
        try:
            return not self.online.compile_pod(remembered.pod).per_domain
        except BerthError:  # refused at filter: never bound unchecked
            return False

    def _nominations_placed(self, pod: Pod) -> contextlib.AbstractContextManager:
        """Pods kube-scheduler nominated to a node (it evicted for them there) of equal or higher
        priority count there as placed: the room a preemption freed is not taken by another pod. And
        the victims berth named for this pod's preemption on the node kube nominated it to count as
        gone (_victims_going)."""
        view = self.cluster.view
        waiting = nominated_here(view, pod, view.nominated_nodes()) if view.nominated_nodes() else []
        going = self._victims_going(pod) if self._preempted else []
        return overlay(view, remove=going, place=waiting) if waiting or going else contextlib.nullcontext()

    def _victims_going(self, pod: Pod) -> list[Pod]:
        """The victims of berth's last preemption answer for the pod on the node kube-scheduler then
        nominated it to, within SETTLING_SECONDS, that the view still holds there. kube-scheduler
        deletes them once it has the answer, and its cache may show them gone before berth's watch
        does: held in the decision, they would have berth refuse the node kube made room on, and kube
        preempt again on another (its guard against that looks for victims still terminating)."""
        node = pod.nominated_node
        last = self._preempted.get(pod.uid or pod.key) if node else None
        if last is None or node not in last.nodes or time.monotonic() - last.at > SETTLING_SECONDS:
            return []
        view = self.cluster.view
        return [
            held
            for victim in last.nodes[node][0].pods
            if (held := view.pod(victim.key)) is not None
            and held.uid == victim.uid
            and held.node_name == node
        ]

    def _decide(self, pod: Pod, names: list[str] | Found) -> tuple[Remembered, Decision]:
        view = self.cluster.view
        with self._nominations_placed(pod):
            decision = decide(pod, view, self.online, candidates=names, seed=seed_for(pod))
        outcome = (
            "placed" if decision.error is None else ("invalid" if decision.error.code == 400 else "no_fit")
        )
        self.observe(outcome)
        return self._remember(pod, decision), decision

    async def _warn_once(self, pod: Pod, decision: Decision) -> None:
        refusals = ("FailedPlacement", "InvalidPlacementSpec")  # recorded by _refused, rate-limited
        warnings = [e for e in decision.early_events if e.type == "Warning" and e.reason not in refusals]
        key = pod.uid or pod.key
        if warnings and key not in self._warned:
            self._warned.add(key)
            await self.recorder(pod, warnings)

    async def _refused(self, pod: Pod, decision: Decision, note: str = "") -> None:
        assert decision.error is not None
        message = decision.error.message + note
        key = pod.uid or pod.key
        last = self._refusals.get(key)
        now = time.monotonic()
        if last and last[0] == message and now - last[1] < REFUSAL_EVENT_EVERY:
            return
        self._refusals[key] = (message, now)
        reason = "InvalidPlacementSpec" if decision.error.code == 400 else "FailedPlacement"
        await self.recorder(pod, [Event("Warning", reason, message)])

    def _only_berth_blocks(self, pod: Pod, failed: list[str]) -> str:
        """For a pod that may preempt, refused where lower-priority pods block only under berth's rules:
        kube-scheduler up to v1.37 proposes no such node for preemption (its own filters pass there), so
        the refusal says so and names those pods of the pod's namespace (others are counted, not named)."""
        if pod.priority <= 0 or not pod.preempts or not failed:
            return ""
        view = self.cluster.view
        found = select_victims(
            pod, view, self.online, {n: [] for n in failed[:BLOCKS_CHECKED]}, seed=seed_for(pod)
        )
        if not found:
            return ""
        node, victims = next(iter(found.items()))
        own = [p.name for p in victims.pods if p.namespace == pod.namespace]
        others = len(victims.pods) - len(own)
        named = ", ".join(own) + (f" and {others} pod(s) of other namespaces" if others else "")
        return (
            f"; lower-priority pods block it only under berth's rules (on {node}: {named}): kube-scheduler "
            "up to v1.37 cannot preempt for that, as its own filters pass there"
        )

    def _fits_unasked(self, pod: Pod, asked: list[str] | Found) -> str:
        """For a pod refused on every node kube-scheduler asked about, when it asked about fewer than
        the cluster's nodes: a node it did not ask about that berth's rules and kube's filters (as
        `berth simulate` models them) accept, named in the refusal. With percentageOfNodesToScore
        below 100, kube-scheduler asks only about its sample, and a node that alone meets a berth rule
        may be outside it (docs/extender.md, "percentageOfNodesToScore"). Worked out at most once per
        pod per REFUSAL_EVENT_EVERY: it is a decision over the nodes left out."""
        view = self.cluster.view
        if len(asked) >= len(view):
            return ""
        key = pod.uid or pod.key
        now = time.monotonic()
        kept = self._unasked_notes.get(key)
        if kept is not None and now - kept[1] < REFUSAL_EVENT_EVERY:
            return kept[0]
        wanted = set(_names(asked))
        unasked = [n for n in view.node_names() if n not in wanted]
        decision = decide(pod, view, self.offline, candidates=unasked, seed=seed_for(pod))
        note = ""
        if decision.chosen is not None:
            note = (
                f"; kube-scheduler asked about {len(asked)} of the cluster's {len(view)} nodes, and "
                f"{decision.chosen}, which it did not ask about, meets berth's rules and kube's filters "
                "as berth models them: with percentageOfNodesToScore below 100 berth sees only "
                "kube-scheduler's sample"
            )
        if len(self._unasked_notes) >= DECISION_CACHE:
            self._unasked_notes.clear()
        self._unasked_notes[key] = (note, now)
        return note

    # -- verbs ----------------------------------------------------------------------------------
    def asked(self, args: wire.ExtenderFilterArgs | wire.ExtenderArgs) -> list[str] | Found:
        """The nodes a filter call asks about: a long NodeNames array is found in the view's name
        table straight from its bytes; a run of kube-scheduler's node order as learned from earlier
        calls is found by its bytes too (berth.cluster.kube_order); anything else decoded
        (msgspec.ValidationError when it is not an array of strings) and its slots found by the
        names' hashes, which decide() checks where its answer rests on them (Guessed)."""
        if not isinstance(args, wire.ExtenderFilterArgs):
            return args.candidate_names()
        raw = bytes(args.node_names)
        if len(raw) >= 4 * FIND_FROM_NAMES and raw.count(b",") + 1 >= FIND_FROM_NAMES:
            found = self.cluster.view.name_table().find(raw)
            if found is not None:
                self.read_names("bytes")
                return found
        layout = self.cluster.view.slots()
        order = self._kube_order
        if order is None or order.layout is not layout:
            self._kube_order = order = KubeOrder(layout) if order is None else order.moved_to(layout)
        found = order.recall(raw)
        if found is not None:
            self.read_names("recalled")
            return found
        names = args.candidate_names()
        self.read_names("decoded")
        slots = layout.guess(names)
        if slots is None:
            return names
        order.learn(slots)
        return Guessed(layout, slots, names)

    async def filter(
        self,
        args: wire.ExtenderFilterArgs | wire.ExtenderArgs,
        asked: list[str] | Found | None = None,
        *,
        settled: bool = True,
    ) -> wire.ExtenderFilterResult:
        """The filter verb; `settled=False` leaves the bookkeeping of a placement to the caller's
        settle() once the answer is sent."""
        answer = await self._filter(args, asked)
        if settled:
            self.settle()
        return answer

    async def _filter(
        self, args: wire.ExtenderFilterArgs | wire.ExtenderArgs, asked: list[str] | Found | None
    ) -> wire.ExtenderFilterResult:
        if not self.cluster.ready():
            # Fail closed: a view that may be missing placements must not place pods. The scheduler
            # takes the error as a failed attempt and tries the pod again after a backoff.
            self.observe("not_ready")
            return wire.ExtenderFilterResult(error=NOT_READY)
        if self.leadership is not None and not self.leadership.may_filter():
            self.observe("not_ready")
            return wire.ExtenderFilterResult(error=NOT_LEADING)
        if asked is None:
            asked = self.asked(args)
        try:
            if isinstance(args, wire.ExtenderFilterArgs):
                watched = watched_pod(args.pod)
                self.read_pod("watched" if watched is not None else "decoded")
                pod = watched or decoded_pod(args.pod)
            else:
                pod = pod_from_k8s(args.pod, memo=True)
        except BerthError as exc:
            reason = f"berth: the pod cannot be read: {exc.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(_names(asked), reason)
            )
        if pod.nominated_node and self._preempted:
            await self._tell_preemption(pod, pod.nominated_node)
        rejected = bool(self.kube_sample and pod.nominated_node) and self.handovers.attempt(
            pod.uid or pod.key, pod.nominated_node, _names(asked)
        )
        if rejected:  # kube-scheduler rejected the node berth handed the pod over to
            self.cluster.release(pod)
        remembered, decision = self._decide(pod, asked)
        await self._warn_once(pod, decision)
        if decision.error is not None and decision.error.code == 400:
            await self._refused(pod, decision)
            reason = f"berth: invalid placement specification: {decision.error.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(_names(asked), reason)
            )
        if self.kube_sample:  # (an invalid specification was answered above)
            handed = await self._past_the_sample(pod, asked, decision)
            if handed is not None:
                return handed
        if (
            decision.chosen is not None
            and self._preempted
            and self._room_being_made(pod.uid or pod.key) == decision.chosen  # its victims went
        ):
            # Placed where kube preempted for it, perhaps on an attempt whose copy of the pod does not
            # carry kube's nomination yet (v1.38's asynchronous preemption): told now, if not before.
            await self._tell_preemption(pod, decision.chosen)
        if decision.chosen is not None:
            # Decided: the one node, no failure map. The scheduler skips scoring with one node left.
            # The node is counted taken (and the summary worked out) once the answer is on its way:
            # kube-scheduler's cycle waits for the answer, not for berth's bookkeeping (settle).
            self._after.append(partial(self._placed, pod, remembered, decision.chosen))
            return wire.ExtenderFilterResult(node_names=[decision.chosen])
        # Nothing fits: the reasons per node, for the scheduler's "0/N nodes are available" message
        # and for preemption (nodes in FailedAndUnresolvableNodes are never preempted on).
        failed, unresolvable = decision.failure_texts()
        if self.retry is not None:
            self._remember_refused(pod)
        note = self._only_berth_blocks(pod, list(failed)) + self._fits_unasked(pod, asked)
        await self._refused(pod, decision, note)
        return wire.ExtenderFilterResult(
            node_names=[], failed_nodes=failed or None, failed_and_unresolvable_nodes=unresolvable or None
        )

    async def _past_the_sample(
        self, pod: Pod, asked: list[str] | Found, decision: Decision
    ) -> wire.ExtenderFilterResult | None:
        """For a pod kube-scheduler asked about a sample of the nodes, whose hard rules leave fewer of
        them than kube's own minimum ("thin"): a decision over every node with kube's filters as berth
        models them, and, when its node is outside the sample, the hand-over (berth.extender.sample).
        None: the decision over the sample stands."""
        percentage = self.kube_sample.get(pod.scheduler_name)
        view = self.cluster.view
        if percentage is None or not sampled(len(asked), len(view), percentage):
            return None
        feasible = decision.feasible
        if not thin(feasible, len(asked)):
            self.observe_sample("decided")
            return None
        key = pod.uid or pod.key
        if pod.nominated_node and not self.handovers.nominated_by_berth(key, pod.nominated_node):
            return None  # kube-scheduler's own nomination (it preempted there): never written over
        pending = self.handovers.pending(key, pod.nominated_node)
        if pending is not None:  # handed over already; kube-scheduler has not seen the nomination yet
            if decision.chosen is not None and decision.chosen == self.handovers.node(key):
                return None  # ... but its sample holds the node, and the decision over it agrees
            return wire.ExtenderFilterResult(error=pending)
        if self.nominate is None or not self.handovers.allowed(key):
            self.observe_sample("refused")
            return None
        names = set(_names(asked))
        wide = self._looked_past(pod, self.handovers.excluded(key))
        if wide.chosen is None or wide.chosen in names:
            self.observe_sample("widened" if wide.chosen else "refused")
            return None
        node = wide.chosen
        message = (
            f"berth: {node}, outside kube-scheduler's sample ({len(asked)} of {len(view)} nodes), is where "
            f"berth's rules place the pod ({feasible} of the sample meet them): nominated it, so that "
            f"kube-scheduler's next attempt evaluates it first (hand-over {self.handovers.count(key) + 1})"
        )
        # Written once kube-scheduler has recorded this attempt (pod_status), or WRITE_AFTER_AT_MOST on.
        await self.recorder(pod, [self._hand_over(pod, key, node, message, at_once=False)])
        return wire.ExtenderFilterResult(error=message)

    def _hand_over(self, pod: Pod, key: str, node: str, message: str, *, at_once: bool) -> Event:
        """Remember the hand-over, count the pod on its node, have the nomination written (`at_once`,
        or once kube-scheduler has recorded the attempt): the event that says so."""
        self.handovers.handed_over(key, node, message, pod, written=at_once)
        # Counted there at once, as a placement is: the next pods of a burst see it (kube-scheduler
        # counts nominated pods on their node too, and would reject a node berth filled past its room).
        self.cluster.reserve(pod, node)
        write = self._write_nomination(pod, node) if at_once else self._write_when_overdue(key, node)
        self._in_background(write)
        self.observe_sample("handed_over")
        return Event("Normal", "HandedOver", message.removeprefix("berth: "))

    def pod_status(self, obj: dict[str, Any]) -> None:
        """The watch's copy of a pod, for the hand-overs (berth.extender.sample): the nomination is
        written once kube-scheduler has recorded the attempt that handed the pod over, and written again
        if kube cleared it."""
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
            self._in_background(self._write_nomination(*write))

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

    def _in_background(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _looked_past(self, pod: Pod, excluded: set[str], some: list[str] | None = None) -> Decision:
        """The decision for a thin pod past kube's sample: over the nodes berth's rules accept (`some`:
        those its hard steps list, when already worked out) that kube would look for, with kube's
        filters as berth models them; over all of them when kube's filters refuse those."""
        view = self.cluster.view
        with self._nominations_placed(pod):
            nodes, wanted = self._widened(pod, excluded, some)
            wide = decide(pod, view, self.offline, candidates=nodes[:wanted], seed=seed_for(pod))
            if wide.chosen is None and len(nodes) > wanted:  # kube's filters refused those: every one
                wide = decide(pod, view, self.offline, candidates=nodes, seed=seed_for(pod))
        return wide

    def _nominate_on_arrival(self, obj: dict[str, Any], key: str) -> None:
        """A new pod kube-scheduler has not tried yet, whose hard rules list fewer nodes than kube's
        own minimum of feasible nodes: any sample kube takes is thin for it, and its first attempt
        would end in a hand-over. Nominated at once instead, so that the first attempt evaluates the
        node berth's rules place it on (berth.extender.sample, "on arrival")."""
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
            or (self.leadership is not None and not self.leadership.may_filter())
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
        some = listed(pod, view, self.online)
        if some is None or len(some) >= MIN_FEASIBLE_NODES:
            return  # a sample may well hold enough of its nodes: kube's attempt decides
        node = self._looked_past(pod, set(), some).chosen
        if node is None:
            return  # nothing fits now: the first attempt says why
        message = (
            f"berth: {node} is where berth's rules place the pod; they leave {len(some)} of {len(view)} "
            f"nodes, fewer than kube-scheduler's sample ({wanted}) needs to hold one for sure: nominated it "
            "before kube-scheduler's first attempt, so that the attempt evaluates it first (hand-over 1)"
        )
        self._in_background(self.recorder(pod, [self._hand_over(pod, key, node, message, at_once=True)]))

    def _widened(self, pod: Pod, excluded: set[str], some: list[str] | None = None) -> tuple[list[str], int]:
        """The nodes a thin pod is decided over past kube's sample: those berth's own rules accept
        (one decision over every node, as the extender decides), less the ones kube rejected after a
        hand-over, in a rotation seeded by the pod; and how many of them kube-scheduler would look
        for. kube's filters, as berth models them, are then asked about these first, the rest only
        when they refuse them all."""
        view = self.cluster.view
        # Only the nodes a hard step lists from an index (a tag's holders) can pass: those asked alone.
        if some is None:
            some = listed(pod, view, self.online)
        rules = decide(pod, view, self.online, candidates=some, seed=seed_for(pod))
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

    async def preempt(self, args: wire.ExtenderPreemptionArgs) -> wire.ExtenderPreemptionResult:
        """kube-scheduler's candidates for preempting, each with the fewest victims that make room under
        kube's filters and berth's rules together (berth.analysis.preemption): nodes berth would still refuse
        are dropped, lower-priority pods that block under berth's rules are added, and kube's victims
        that berth's make room for are reprieved."""
        if not self.cluster.ready():
            return wire.ExtenderPreemptionResult()  # no node: preemption does not go ahead
        pod = pod_from_k8s(args.pod, memo=True)
        key = pod.uid or pod.key
        under_way = self._room_being_made(key, pod.nominated_node)
        if under_way is not None:
            # kube-scheduler's own guard (PodEligibleToPreemptOthers: a terminating victim on the
            # nominated node) misses this when the nomination or the victims' end has not reached its
            # cache yet: preempting again would evict elsewhere too. No candidate: the pod is tried
            # again when the victims' deletion reaches kube-scheduler, and fits on that node.
            log.info("preemption for %s already made room on %s: not preempting again", pod.key, under_way)
            return wire.ExtenderPreemptionResult()
        if self.kube_sample.get(pod.scheduler_name, 100) < 100:
            # Past kube-scheduler's sample a node may fit without evictions: the hand-over, not an
            # eviction, is the answer there (berth.extender.sample).
            view = self.cluster.view
            if decide(pod, view, self.offline, seed=seed_for(pod)).chosen is not None:
                log.info("no preemption for %s: a node fits it without evictions", pod.key)
                return wire.ExtenderPreemptionResult()
        proposed: dict[str, list[str]] = {}
        for node, meta in (args.node_name_to_meta_victims or {}).items():
            proposed[node] = [m.uid for m in (meta.pods or [])]
        for node, full in (args.node_name_to_victims or {}).items():
            pods = (full or {}).get("Pods") or []
            proposed[node] = [((p.get("metadata") or {}).get("uid") or "") for p in pods]
        # The fewest victims under kube's filters (as berth models them) and berth's rules together.
        view = self.cluster.view
        chosen = select_victims(pod, view, self.offline, proposed, seed=seed_for(pod))
        if len(self._preempted) >= DECISION_CACHE:
            self._preempted.clear()
        self._preempted[key] = Preempting(
            time.monotonic(),
            {
                node: (victims, [p for uid in proposed[node] if (p := view.pod_by_uid(uid)) is not None])
                for node, victims in chosen.items()
                if victims.pods
            },
        )
        # A node kube proposed with victims keeps at least one (kube up to v1.37 refuses an empty list).
        return wire.ExtenderPreemptionResult(
            node_name_to_meta_victims={
                node: wire.MetaVictims(
                    pods=[wire.MetaPod(uid=p.uid) for p in victims.pods],
                    num_pdb_violations=victims.pdb_violations,
                )
                for node, victims in chosen.items()
                if victims.pods or not proposed[node]
            }
        )

    def _remember_refused(self, pod: Pod) -> None:
        refused = self._refused_pods.setdefault(pod.namespace, {})
        if len(refused) >= DECISION_CACHE:
            refused.clear()
        held = refused.get(pod.key)
        refused[pod.key] = (pod, held[1] if held is not None else 0.0)

    def pod_left(self, gone: Pod) -> None:
        """A bound pod left its node, and the view no longer holds it. kube-scheduler retries the pods
        an extender refused on any pod event, but it may do so before berth's view has the news, and
        then files the pod as unschedulable again for minutes. So, now that the view has it, the pods
        berth refused in the pod's namespace (berth's rules see only their own namespace) are asked to
        be tried again: at most RETRY_AT_MOST, each at most once per RETRY_EVERY seconds."""
        refused = self._refused_pods.get(gone.namespace)
        if not refused or self.retry is None:
            return
        now = time.monotonic()
        view = self.cluster.view
        chosen = []
        for key, (pod, last) in list(refused.items()):
            current = view.pod(key)
            if current is None or current.node_name:
                del refused[key]  # placed, or gone
                continue
            if now - last >= RETRY_EVERY and len(chosen) < RETRY_AT_MOST:
                refused[key] = (pod, now)
                chosen.append(pod)
        if not chosen:
            return
        why = f"pod {gone.name} left node {gone.node_name}"
        self._in_background(self._retry_all(chosen, why))

    async def _retry_all(self, pods: list[Pod], why: str) -> None:
        assert self.retry is not None
        for pod in pods:
            try:
                await self.retry(pod, why)
            except Exception as exc:  # the pod waits for kube-scheduler's own flush
                log.info("retry of %s not written: %s", pod.key, exc)

    def _room_being_made(self, key: str, nominated: str = "") -> str | None:
        """The node of berth's last preemption answer for the pod that kube-scheduler nominated it to
        (`nominated`, as the pod says), or where every victim is now deleting or gone, within
        SETTLING_SECONDS of it: kube-scheduler preempted there, and the room is being made."""
        last = self._preempted.get(key)
        if last is None or time.monotonic() - last.at > SETTLING_SECONDS:
            return None
        if nominated and nominated in last.nodes:
            return nominated
        view = self.cluster.view
        for node, (victims, _) in last.nodes.items():
            if all((p := view.pod(v.key)) is None or p.uid != v.uid or p.deleting for v in victims.pods):
                return node
        return None

    async def _tell_preemption(self, pod: Pod, node: str) -> None:
        """Once kube-scheduler has nominated a preemptor to a node (it evicted there), what berth chose
        of the victims and why, where it differs from kube's dry run: an event on each victim berth
        added, naming the rule and the preemptor, and one on the preemptor naming berth's victims and
        kube's it spared. Pods of other namespaces are counted, never named, to the preemptor (and do
        not learn its name)."""
        answer = self._preempted.get(pod.uid or pod.key)
        if answer is None or answer.told or node not in answer.nodes:
            return
        answer.told = True
        victims, kubes = answer.nodes[node]
        kube_keys = {p.key for p in kubes}
        added = [p for p in victims.pods if p.key not in kube_keys]
        spared = [p for p in kubes if p.key not in {v.key for v in victims.pods}]
        if not added and not spared:
            return  # kube's victims, as kube chose them: its own events say so
        for victim in added:
            why = victims.reason_of(victim)
            who = f"{pod.name} (priority {pod.priority})" if victim.namespace == pod.namespace else "a pod"
            message = f"evicted on {node} for {who}: with this pod there, berth refuses it: {why}"
            await self.recorder(victim, [Event("Normal", "PreemptedForBerthRule", message)])
        await self.recorder(
            pod, [Event("Normal", "BerthPreemption", _preemption_message(pod, node, added, spared, victims))]
        )

    async def prioritize(self, args: wire.ExtenderArgs) -> list[wire.HostPriority]:
        names = args.candidate_names()
        try:
            pod = pod_from_k8s(args.pod, memo=True)
        except BerthError:
            return [wire.HostPriority(host=n, score=0) for n in names]
        # Only configurations without berth's filter call this with several nodes: decide here.
        remembered, decision = self._decide(pod, names)
        priorities = to_priorities(decision, names)
        if decision.chosen:
            self._placed(pod, remembered, decision.chosen)
        return priorities

    async def bind(self, args: wire.ExtenderBindingArgs) -> wire.ExtenderBindingResult:
        key = f"{args.pod_namespace}/{args.pod_name}"
        if not self.cluster.ready():
            self.observe_bind("refused")
            return wire.ExtenderBindingResult(error=NOT_READY)
        if self.leadership is not None and not self.leadership.may_bind():
            # A scheduler that lost the lease: the new leader decides this pod again, so the
            # reservation made at filter goes.
            held = self._recall(args.pod_uid, key)
            if held is not None:
                self.cluster.release(held.pod)
            self.observe_bind("refused")
            return wire.ExtenderBindingResult(error=NOT_LEADING)
        remembered = self._recall(args.pod_uid, key)
        pod = remembered.pod if remembered else self.cluster.view.pod(key)
        if pod is None:
            # Nothing to check the rules against: refuse, and the scheduler tries again later.
            self.observe_bind("refused")
            return wire.ExtenderBindingResult(error=f"berth: {key} is not in berth's cluster view yet")
        if remembered is not None and self._unchanged(remembered, args.node):
            outcome = "confirmed"
            decision = remembered.decision
        else:
            # Something the decision read has changed (a placement that raced this one, an extender
            # restart, a policy edit): decide again for this node alone. A node that no longer fits
            # is never bound.
            check = decide(pod, self.cluster.view, self.online, candidates=[args.node], seed=seed_for(pod))
            if check.error is not None:
                self.cluster.release(pod)
                self.observe_bind("refused")
                return wire.ExtenderBindingResult(
                    error=f"berth: {args.node} no longer fits {key}: {check.error.message}"
                )
            outcome = "rechecked"
            decision = remembered.decision if remembered else check
        try:
            record = placement_record.write(decision, args.node, self.digest)
            await self.binder(pod, args.node, {placement_record.ANNOTATION: record})
        except Exception as exc:
            if refused_for_sure(exc):
                self.cluster.release(pod)
            # Otherwise the API server may have stored the binding before the answer was lost (a
            # reset, a timeout, a 5xx): keep counting the pod on the node until the watch shows where
            # it really is, or the API server says it is not bound. Releasing it could let the next
            # pod share the node.
            detail = exc.message if isinstance(exc, BerthError) else f"{type(exc).__name__}: {exc}"
            self.observe_bind("failed")
            return wire.ExtenderBindingResult(error=f"berth: binding {key} to {args.node} failed: {detail}")
        self.cluster.reserve(pod, args.node)
        self.observe_bind(outcome)
        if self.placement_events:
            events = placement_events(decision, args.node, self.placement_events)
            if events:
                await self.recorder(pod, events)
        return wire.ExtenderBindingResult()

    def simulate(self, pod_obj: dict[str, Any], *, seed: int | None = None) -> Decision:
        pod = pod_from_k8s(pod_obj)
        return decide(pod, self.cluster.view, self.offline, seed=seed)


def _names(asked: list[str] | Found) -> list[str]:
    return asked.names() if isinstance(asked, Found) else asked


def refused_for_sure(exc: Exception) -> bool:
    """The API server answered and did not store the binding (4xx other than 409 Conflict, which
    means the pod is already bound somewhere)."""
    status = getattr(exc, "status", 0)
    return isinstance(exc, ApiError) and 400 <= status < 500 and status != 409


def to_priorities(decision: Decision, names: list[str]) -> list[wire.HostPriority]:
    """0..10: the node berth chose gets the maximum, the others 0..9 by their score."""
    scores = decision.scores()
    low = min(scores.values(), default=0.0)
    high = max(scores.values(), default=0.0)
    top = wire.MAX_EXTENDER_PRIORITY - 1
    priority = wire.HostPriority
    if high > low:
        span = high - low
        get = scores.get
        out = [
            priority(host=n, score=int((s - low) / span * top) if (s := get(n)) is not None else 0)
            for n in names
        ]
    else:
        out = [priority(host=n, score=0) for n in names]
    chosen, at = decision.chosen, -1
    while chosen is not None:  # the node berth chose gets the maximum (named twice: both times)
        try:
            at = names.index(chosen, at + 1)
        except ValueError:
            break
        out[at] = priority(host=chosen, score=wire.MAX_EXTENDER_PRIORITY)
    return out


def placement_events(decision: Decision, node: str, wanted: frozenset[str]) -> list[Event]:
    """The events of a placed pod that `berth serve --placement-events` asks for."""
    if node != decision.chosen:
        if "Placed" not in wanted:
            return []
        message = f"placed on {node} by the scheduler; berth ranked {decision.chosen} first"
        return [Event("Normal", "Placed", message)]
    out = []
    for event in decision.events:
        if event.reason not in wanted:
            continue
        if event.reason == "Placed":
            event = Event(event.type, event.reason, f"{event.message}; seed {decision.seed}")
        out.append(event)
    return out


def _preemption_message(pod: Pod, node: str, added: list[Pod], spared: list[Pod], victims: Victims) -> str:
    def named(pods: list[Pod], why: bool) -> str:
        own = [p for p in pods if p.namespace == pod.namespace]
        text = ", ".join(f"{p.name} ({victims.reason_of(p)})" if why else p.name for p in own)
        others = len(pods) - len(own)
        if others:
            text += f"{', ' if own else ''}{others} pod(s) of other namespaces"
        return text

    message = f"preempting on {node}, berth chose the victims"
    if added:
        message += f": added {named(added, True)}"
    if spared:
        message += (
            f"{';' if added else ':'} spared {named(spared, False)}, which kube-scheduler's dry run chose"
        )
        message += " (the room is made without them)"
    return message
