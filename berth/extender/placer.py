"""What the extender's verbs do, free of HTTP: filter, prioritize, bind, simulate.

kube-scheduler calls filter, then (with more than one node left) prioritize, then bind, one pod at a
time; the binding itself runs asynchronously in the scheduler. So that the next pod of a burst sees
this one, berth reserves the pod on its node as soon as it knows the node: at filter when one node is
left, at prioritize otherwise (the scheduler configuration leaves scoring to berth, so the node berth
ranks first is the node the scheduler picks), and confirms it at bind.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from berth.cluster.convert import pod_from_k8s
from berth.cluster.kubeapi import ApiError
from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.engine import Decision, Event, Pipeline, decide
from berth.errors import BerthError
from berth.extender import wire

log = logging.getLogger("berth.extender")

DECISION_CACHE = 10_000
NOT_READY = "berth: the cluster cache is not synced yet; the pod will be retried"
REFUSAL_EVENT_EVERY = 60.0  # seconds between repeated refusal events for the same pod and text


class Cluster(Protocol):
    view: ClusterView

    def ready(self) -> bool: ...
    def reserve(self, pod: Pod, node: str) -> None: ...
    def release(self, pod: Pod) -> None: ...


Binder = Callable[[Pod, str], Awaitable[None]]
Recorder = Callable[[Pod, list[Event]], Awaitable[None]]


def seed_for(pod: Pod) -> int:
    """A pod's own seed: the same pod breaks ties the same way, and `berth simulate --seed` with the
    seed from its event replays the decision."""
    return zlib.crc32((pod.uid or pod.key).encode())


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
    ) -> None:
        self.cluster = cluster
        self.online = online
        self.offline = offline
        self.binder = binder
        self.recorder = recorder
        self.observe = observe
        self._decisions: OrderedDict[str, tuple[Pod, Decision]] = OrderedDict()
        self._refusals: dict[str, tuple[str, float]] = {}
        self._warned: set[str] = set()

    # -- bookkeeping ----------------------------------------------------------------------------
    def _remember(self, pod: Pod, decision: Decision) -> None:
        key = pod.uid or pod.key
        self._decisions[key] = (pod, decision)
        self._decisions.move_to_end(key)
        while len(self._decisions) > DECISION_CACHE:
            self._decisions.popitem(last=False)

    def _recall(self, uid: str, key: str) -> tuple[Pod, Decision] | None:
        return self._decisions.get(uid or key)

    def _decide(self, pod: Pod, names: list[str]) -> Decision:
        decision = decide(pod, self.cluster.view, self.online, candidates=names, seed=seed_for(pod))
        self._remember(pod, decision)
        outcome = (
            "placed" if decision.error is None else ("invalid" if decision.error.code == 400 else "no_fit")
        )
        self.observe(outcome)
        return decision

    async def _warn_once(self, pod: Pod, decision: Decision) -> None:
        refusals = ("FailedPlacement", "InvalidPlacementSpec")  # recorded by _refused, rate-limited
        warnings = [e for e in decision.events if e.type == "Warning" and e.reason not in refusals]
        key = pod.uid or pod.key
        if warnings and key not in self._warned:
            self._warned.add(key)
            await self.recorder(pod, warnings)

    async def _refused(self, pod: Pod, decision: Decision) -> None:
        assert decision.error is not None
        key = pod.uid or pod.key
        last = self._refusals.get(key)
        now = time.monotonic()
        if last and last[0] == decision.error.message and now - last[1] < REFUSAL_EVENT_EVERY:
            return
        self._refusals[key] = (decision.error.message, now)
        reason = "InvalidPlacementSpec" if decision.error.code == 400 else "FailedPlacement"
        await self.recorder(pod, [Event("Warning", reason, decision.error.message)])

    # -- verbs ----------------------------------------------------------------------------------
    async def filter(self, args: wire.ExtenderArgs) -> wire.ExtenderFilterResult:
        names = args.candidate_names()
        if not self.cluster.ready():
            # Fail closed: a view that may be missing placements must not place pods. The scheduler
            # takes the error as a failed attempt and tries the pod again after a backoff.
            self.observe("not_ready")
            return wire.ExtenderFilterResult(error=NOT_READY)
        try:
            pod = pod_from_k8s(args.pod)
        except BerthError as exc:
            reason = f"berth: the pod cannot be read: {exc.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(names, reason)
            )
        decision = self._decide(pod, names)
        await self._warn_once(pod, decision)
        if decision.error is not None and decision.error.code == 400:
            await self._refused(pod, decision)
            reason = f"berth: invalid placement specification: {decision.error.message}"
            return wire.ExtenderFilterResult(
                node_names=[], failed_and_unresolvable_nodes=dict.fromkeys(names, reason)
            )

        keep = decision.candidate_names()
        failed, unresolvable = decision.failure_texts()
        if len(keep) == 1:
            self.cluster.reserve(pod, keep[0])
        if not keep:
            await self._refused(pod, decision)
        return wire.ExtenderFilterResult(
            node_names=keep, failed_nodes=failed or None, failed_and_unresolvable_nodes=unresolvable or None
        )

    async def prioritize(self, args: wire.ExtenderArgs) -> list[wire.HostPriority]:
        names = args.candidate_names()
        try:
            pod = pod_from_k8s(args.pod)
        except BerthError:
            return [wire.HostPriority(host=n, score=0) for n in names]
        remembered = self._recall(pod.uid, pod.key)
        if remembered and set(remembered[1].candidate_names()) == set(names):
            decision = remembered[1]
        else:
            decision = self._decide(pod, names)
        priorities = to_priorities(decision, names)
        if decision.chosen:
            self.cluster.reserve(pod, decision.chosen)
        return priorities

    async def bind(self, args: wire.ExtenderBindingArgs) -> wire.ExtenderBindingResult:
        key = f"{args.pod_namespace}/{args.pod_name}"
        if not self.cluster.ready():
            return wire.ExtenderBindingResult(error=NOT_READY)
        remembered = self._recall(args.pod_uid, key)
        pod = remembered[0] if remembered else self.cluster.view.pod(key)
        if pod is None:
            # Nothing to check the rules against: refuse, and the scheduler tries again later.
            return wire.ExtenderBindingResult(error=f"berth: {key} is not in berth's cluster view yet")
        # The last check, against the view as it is now: whatever happened since filter (an extender
        # restart, a placement that raced this one), a node that no longer fits is never bound.
        check = decide(pod, self.cluster.view, self.online, candidates=[args.node], seed=seed_for(pod))
        if check.error is not None:
            self.cluster.release(pod)
            return wire.ExtenderBindingResult(
                error=f"berth: {args.node} no longer fits {key}: {check.error.message}"
            )
        try:
            await self.binder(pod, args.node)
        except Exception as exc:
            if refused_for_sure(exc):
                self.cluster.release(pod)
            # Otherwise the API server may have stored the binding before the answer was lost (a
            # reset, a timeout, a 5xx): keep counting the pod on the node until the watch shows where
            # it really is, or the reservation lapses. Releasing it could let the next pod share the node.
            detail = exc.message if isinstance(exc, BerthError) else f"{type(exc).__name__}: {exc}"
            return wire.ExtenderBindingResult(error=f"berth: binding {key} to {args.node} failed: {detail}")
        self.cluster.reserve(pod, args.node)
        if remembered:
            await self.recorder(pod, [placement_event(remembered[1], args.node)])
        return wire.ExtenderBindingResult()

    def simulate(self, pod_obj: dict[str, Any], *, seed: int | None = None) -> Decision:
        pod = pod_from_k8s(pod_obj)
        return decide(pod, self.cluster.view, self.offline, seed=seed)


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


def placement_event(decision: Decision, node: str) -> Event:
    """The one event a placed pod gets: the node, its score and margin and the top candidates, or
    that it had no choice."""
    by_reason = {e.reason: e for e in decision.events}
    if node != decision.chosen:
        return Event(
            "Normal", "Placed", f"placed on {node} by the scheduler; berth ranked {decision.chosen} first"
        )
    if decision.had_no_choice:
        return by_reason["HadNoChoice"]
    parts = [by_reason["Placed"].message, f"seed {decision.seed}"]
    for reason in ("FinalCandidates", "HighestAffinity"):
        if reason in by_reason:
            parts.append(by_reason[reason].message)
    return Event("Normal", "Placed", "; ".join(parts))


def pod_with_node(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, node_name=node)
