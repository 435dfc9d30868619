"""The extender's verbs free of HTTP, in kube-scheduler's order: filter, prioritize, bind, preempt.

kube-scheduler calls filter, then (with more than one node left) prioritize, then bind, one pod at a
time; the binding itself runs asynchronously in the scheduler. berth decides once, at filter: it
answers with the one node it chose, so the scheduler skips scoring, and reserves the pod there at once
so that the next pod of a burst sees it. bind then only checks that nothing the decision read has
changed since (berth.extender.decisions) and decides again, for that node alone, only when something
has. prioritize stays correct for configurations that call it. The rest has a module each, as
kube-scheduler splits its cycle: preemption (berth.extender.preempt), the hand-over past kube's sample
(berth.extender.sample), the retries when a neighbour leaves (berth.extender.requeue), the events on
pods (berth.extender.pod_events), the placement record (berth.cluster.placement_record). Everything they
keep per pod is made by one PodStates (berth.cluster.per_pod), which the watch empties.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from berth.cluster import placement_record
from berth.cluster.convert import decoded_pod, pod_from_k8s, watched_pod
from berth.cluster.kube_order import KubeOrder
from berth.cluster.kubeapi import ApiError
from berth.cluster.model import Pod
from berth.cluster.name_table import Found, Guessed, names_of
from berth.cluster.per_pod import PodStates, pod_key
from berth.cluster.placement_record import seed_for
from berth.engine import Decision, Pipeline, decide
from berth.errors import BerthError
from berth.extender import wire
from berth.extender.decisions import Cluster, Decisions, Remembered
from berth.extender.pod_events import PodEvents, Recorder
from berth.extender.preempt import Preemption
from berth.extender.requeue import Requeue, Retrier
from berth.extender.sample import Nominator, PastTheSample

log = logging.getLogger("berth.extender")

# A NodeNames array of this many names or more is found in the view's name table; fewer cost less
# decoded (numpy's fixed cost per call; measured in the extender's filter at 500 to 5000 names).
FIND_FROM_NAMES = 1200
NOT_READY = "berth: the cluster cache is not synced yet; the pod will be retried"
NOT_LEADING = (
    "berth: this replica's scheduler does not hold the lease, or berth has not listed the cluster since "
    "it took it; the pod will be retried"
)
# How a bind ended: bound as decided at filter with nothing changed since (confirmed) or after deciding
# again for the node (rechecked); refused (the node no longer fits, the pod is unknown, the cache is not
# synced); or the Binding write failed.
BIND_OUTCOMES = ("confirmed", "rechecked", "refused", "failed")

Binder = Callable[[Pod, str, dict[str, str]], Awaitable[None]]  # pod, node, annotations for the pod


def _uncounted(value: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Writes:
    """What the verbs write to the API server, as functions: a live cluster's client writes them
    (berth.extender.serve), a snapshot or a test keeps them."""

    bind: Binder
    record: Recorder  # events on pods
    nominate: Nominator | None = None  # a hand-over's status.nominatedNodeName; None: no hand-over
    retry: Retrier | None = None  # a refused pod tried again when a neighbour leaves; None: not asked


@dataclass(frozen=True, slots=True)
class Observers:
    """What the verbs count, each told one label value per event (the metrics of berth.extender.app)."""

    decision: Callable[[str], None] = _uncounted  # placed, invalid, no_fit, not_ready
    bind: Callable[[str], None] = _uncounted  # BIND_OUTCOMES
    sample: Callable[[str], None] = _uncounted  # decided, widened, handed_over, refused
    names_read: Callable[[str], None] = _uncounted  # bytes, recalled, decoded
    pod_read: Callable[[str], None] = _uncounted  # watched, decoded


class Placer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        rules: Pipeline,
        with_kube: Pipeline,
        writes: Writes,
        observers: Observers = Observers(),
        placement_events: Iterable[str] = (),
        kube_sample: Mapping[str, int] | None = None,
        leadership: Any = None,
        pod_states: PodStates | None = None,
    ) -> None:
        """`rules`: berth's chain over the nodes kube-scheduler's filters passed; `with_kube`: the same
        with kube's filters as berth models them, for the nodes kube did not ask about (past its sample,
        preemption). `kube_sample`: kube-scheduler's percentageOfNodesToScore per profile (berth serve
        --kube-sample). `leadership`: berth serve --follow-lease (berth.cluster.leadership), None when
        every call is answered. `pod_states`: the maker of every per-pod map, shared with the watch that
        empties them (by default the live cluster's own, so that its watch empties them; a new one over
        a snapshot)."""
        self.cluster = cluster
        self.rules = rules
        self.with_kube = with_kube
        self.writes = writes
        self.observers = observers
        self.leadership = leadership
        self.kube_sample = dict(kube_sample or {})
        if pod_states is None:
            pod_states = getattr(cluster, "pod_states", None)
        if pod_states is None:
            pod_states = PodStates()
        self.pod_states = pod_states
        states = self.pod_states
        self.background: set[asyncio.Task] = set()  # work under way in the background
        self._after: list[Callable[[], None]] = []  # what bookkeep() does once the answer is sent
        self._kube_order: KubeOrder | None = None
        self.decisions = Decisions(cluster, rules, states)
        self.events = PodEvents(writes.record, states, placement_events)
        self.preemption = Preemption(cluster, rules, with_kube, writes.record, states, self.kube_sample)
        self.past_sample = PastTheSample(
            cluster,
            rules,
            with_kube,
            kube_sample=self.kube_sample,
            nominate=writes.nominate,
            recorder=writes.record,
            states=states,
            nominations_placed=self.preemption.nominations_placed,
            may_filter=lambda: leadership is None or leadership.may_filter(),
            spawn=self._spawn,
            observe=observers.sample,
        )
        self.requeue = (
            Requeue(cluster, writes.retry, states, self._spawn) if writes.retry is not None else None
        )

    # -- what the watch tells (berth.cluster.live) ----------------------------------------------
    def pod_seen(self, obj: dict[str, Any]) -> None:
        """Every pod as the watch shows it: the hand-overs' nominations are written from it."""
        self.past_sample.pod_seen(obj)

    def pod_left(self, gone: Pod) -> None:
        """A bound pod left its node, and the view no longer holds it."""
        if self.requeue is not None:
            self.requeue.pod_left(gone)

    # -- bookkeeping ----------------------------------------------------------------------------
    def bookkeep(self) -> None:
        """The bookkeeping the last answer left for after it was sent (the node a filter chose
        counted taken, the decision's summary worked out); done before any other call or event is
        taken, since nothing awaits between the answer and this."""
        after, self._after = self._after, []
        for work in after:
            try:
                work()
            except Exception:  # the answer is sent: a failure here is a bug to see, not the call's
                log.exception("bookkeeping after an answer failed")

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def _placed(self, pod: Pod, remembered: Remembered, node: str) -> None:
        """The pod counted on the node berth chose for it, and what the decision read stamped."""
        self.cluster.reserve(pod, node)
        self.decisions.stamp(remembered, node)

    def _decide(self, pod: Pod, names: list[str] | Found) -> tuple[Remembered, Decision]:
        view = self.cluster.view
        with self.preemption.nominations_placed(pod):
            decision = decide(pod, view, self.rules, candidates=names, seed=seed_for(pod))
        outcome = (
            "placed" if decision.error is None else ("invalid" if decision.error.code == 400 else "no_fit")
        )
        self.observers.decision(outcome)
        remembered = self.decisions.remember(pod, decision)
        # The summary is worked out once the answer is sent, on every path (until then the kept
        # outcome holds the decision's ledger, which is large).
        self._after.append(decision.work_out_summary)
        return remembered, decision

    # -- verbs ----------------------------------------------------------------------------------
    def nodes_asked(self, args: wire.ExtenderFilterArgs | wire.ExtenderArgs) -> list[str] | Found:
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
                self.observers.names_read("bytes")
                return found
        layout = self.cluster.view.slots()
        order = self._kube_order
        if order is None or order.layout is not layout:
            self._kube_order = order = KubeOrder(layout) if order is None else order.moved_to(layout)
        found = order.recall(raw)
        if found is not None:
            self.observers.names_read("recalled")
            return found
        names = args.candidate_names()
        self.observers.names_read("decoded")
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
        bookkeep: bool = True,
    ) -> wire.ExtenderFilterResult:
        """The filter verb; `bookkeep=False` leaves the bookkeeping of a placement to the caller's
        bookkeep() once the answer is sent."""
        answer = await self._filter(args, asked)
        if bookkeep:
            self.bookkeep()
        return answer

    async def _filter(
        self, args: wire.ExtenderFilterArgs | wire.ExtenderArgs, asked: list[str] | Found | None
    ) -> wire.ExtenderFilterResult:
        if not self.cluster.ready():
            # Fail closed: a view that may be missing placements must not place pods. The scheduler
            # takes the error as a failed attempt and tries the pod again after a backoff.
            self.observers.decision("not_ready")
            return wire.ExtenderFilterResult(error=NOT_READY)
        if self.leadership is not None and not self.leadership.may_filter():
            self.observers.decision("not_ready")
            return wire.ExtenderFilterResult(error=NOT_LEADING)
        if asked is None:
            asked = self.nodes_asked(args)
        try:
            if isinstance(args, wire.ExtenderFilterArgs):
                watched = watched_pod(args.pod)
                self.observers.pod_read("watched" if watched is not None else "decoded")
                pod = watched or decoded_pod(args.pod)
            else:
                pod = pod_from_k8s(args.pod, memo=True)
        except BerthError as exc:
            reason = f"berth: the pod cannot be read: {exc.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(names_of(asked), reason)
            )
        preemption = self.preemption
        if pod.nominated_node and preemption:
            await preemption.tell(pod, pod.nominated_node)
        if self.kube_sample:
            self.past_sample.attempt(pod, asked)
        remembered, decision = self._decide(pod, asked)
        await self.events.warn_once(pod, decision)
        if decision.error is not None and decision.error.code == 400:
            await self.events.refused(pod, decision)
            reason = f"berth: invalid placement specification: {decision.error.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(names_of(asked), reason)
            )
        if self.kube_sample:  # (an invalid specification was answered above)
            handed = await self.past_sample.decide_past(pod, asked, decision)
            if handed is not None:
                return handed
        if (
            decision.chosen is not None
            and preemption
            and preemption.room_being_made(pod_key(pod)) == decision.chosen  # its victims went
        ):
            # Placed where kube preempted for it, perhaps on an attempt whose copy of the pod does not
            # carry kube's nomination yet (v1.38's asynchronous preemption): told now, if not before.
            await preemption.tell(pod, decision.chosen)
        if decision.chosen is not None:
            # Decided: the one node, no failure map. The scheduler skips scoring with one node left.
            # The node is counted taken (and the summary worked out) once the answer is on its way:
            # kube-scheduler's cycle waits for the answer, not for berth's bookkeeping (bookkeep).
            self._after.append(partial(self._placed, pod, remembered, decision.chosen))
            return wire.ExtenderFilterResult(node_names=[decision.chosen])
        # Nothing fits: the reasons per node, for the scheduler's "0/N nodes are available" message
        # and for preemption (nodes in FailedAndUnresolvableNodes are never preempted on).
        failed, unresolvable = decision.failure_texts()
        if self.requeue is not None:
            self.requeue.refused(pod)
        note = preemption.only_berth_blocks(pod, list(failed)) + self.past_sample.unasked_note(pod, asked)
        await self.events.refused(pod, decision, note)
        return wire.ExtenderFilterResult(
            node_names=[], failed_nodes=failed or None, failed_and_unresolvable_nodes=unresolvable or None
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
        observe = self.observers.bind
        if not self.cluster.ready():
            observe("refused")
            return wire.ExtenderBindingResult(error=NOT_READY)
        if self.leadership is not None and not self.leadership.may_bind():
            # A scheduler that lost the lease: the new leader decides this pod again, so the
            # reservation made at filter goes.
            held = self.decisions.recall(args.pod_uid, key)
            if held is not None:
                self.cluster.release(held.pod)
            observe("refused")
            return wire.ExtenderBindingResult(error=NOT_LEADING)
        remembered = self.decisions.recall(args.pod_uid, key)
        pod = remembered.pod if remembered else self.cluster.view.pod(key)
        if pod is None:
            # Nothing to check the rules against: refuse, and the scheduler tries again later.
            observe("refused")
            return wire.ExtenderBindingResult(error=f"berth: {key} is not in berth's cluster view yet")
        if remembered is not None and self.decisions.unchanged(remembered, args.node):
            outcome = "confirmed"
            decision = remembered.decision
        else:
            # Something the decision read has changed (a placement that raced this one, an extender
            # restart, a policy edit): decide again for this node alone. A node that no longer fits
            # is never bound.
            check = decide(pod, self.cluster.view, self.rules, candidates=[args.node], seed=seed_for(pod))
            if check.error is not None:
                self.cluster.release(pod)
                observe("refused")
                return wire.ExtenderBindingResult(
                    error=f"berth: {args.node} no longer fits {key}: {check.error.message}"
                )
            outcome = "rechecked"
            decision = remembered.decision if remembered else check
        try:
            record = placement_record.write(decision, args.node, self.rules.digest)
            await self.writes.bind(pod, args.node, {placement_record.ANNOTATION: record})
        except Exception as exc:
            if refused_for_sure(exc):
                self.cluster.release(pod)
            # Otherwise the API server may have stored the binding before the answer was lost (a
            # reset, a timeout, a 5xx): keep counting the pod on the node until the watch shows where
            # it really is, or the API server says it is not bound. Releasing it could let the next
            # pod share the node.
            detail = exc.message if isinstance(exc, BerthError) else f"{type(exc).__name__}: {exc}"
            observe("failed")
            return wire.ExtenderBindingResult(error=f"berth: binding {key} to {args.node} failed: {detail}")
        self.cluster.reserve(pod, args.node)
        observe(outcome)
        await self.events.placed(pod, decision, args.node)
        return wire.ExtenderBindingResult()

    async def preempt(self, args: wire.ExtenderPreemptionArgs) -> wire.ExtenderPreemptionResult:
        """kube-scheduler's candidates for preempting, each with the fewest victims that make room under
        kube's filters and berth's rules together (berth.extender.preempt)."""
        return await self.preemption.answer(args)

    def simulate(self, pod_obj: dict[str, Any], *, seed: int | None = None) -> Decision:
        pod = pod_from_k8s(pod_obj)
        return decide(pod, self.cluster.view, self.with_kube, seed=seed)


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
