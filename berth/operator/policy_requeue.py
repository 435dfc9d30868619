"""Pending pods retried the moment a PlacementPolicy that concerns them is created, changed or deleted.

kube-scheduler does not watch PlacementPolicies. A pod berth refused waits in kube-scheduler's queue of
unschedulable pods for an unrelated cluster event, or for the periodic flush
(podMaxInUnschedulablePodsDuration, 5 minutes): minutes after the policy that lets it in.

The mechanism kube-scheduler honours (read in v1.36.3 and v1.38.0-beta.0; e2e/test_requeue_e2e.py pins
it on both):
- when an extender refuses nodes and the pod ends unschedulable, kube-scheduler adds the pseudo-plugin
  "Extender" to the pod's unschedulable plugins (pkg/scheduler/schedule_one.go in v1.36,
  algorithm.go in v1.38);
- for "Extender" the framework registers every event of every resource with no queueing hint, which
  counts as Queue (pkg/scheduler/framework/runtime/framework.go, defaultEnqueueExtension);
- an update of the unschedulable pod itself (a new resourceVersion) goes through PriorityQueue.Update
  and isPodWorthRequeuing: Queue, so the pod moves to the backoff queue and from there to the active
  queue (its backoff is 1 s, doubling per attempt up to 10 s).
berth writes only the pod's status: a condition of its own, `berth.dev/PlacementRetry`, whose message
names the change. The pod's spec and metadata are untouched: no controller, webhook or GitOps tool
sees the object change.

Bounded: only the pods the change concerns are written (pending, refused as Unschedulable, of a
scheduler other than the default one, in the policy's namespace, naming the policy or matched by its
selector before or after the change), at most MAX_PODS per change, by one loop at most RATE writes a
second, each pod once per round. A change noted again before its round merges with the one waiting.

A running pod leaving a node is an assigned-pod event, which the same "Extender" registration turns
into a retry of every pod berth refused; kube-scheduler may act on it before berth's view has the news,
so berth serve asks again once its view has it (berth.extender.requeue). An allocator
configuration changes by rolling berth-scheduler's pods (the chart's checksum annotation), and a new
kube-scheduler starts with every pending pod in its active queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berth import annotations as ann
from berth.cluster.events import retry_patch
from berth.cluster.kubeapi import ApiError, KubeClient
from berth.cluster.selectors import Selector

log = logging.getLogger("berth.operator")
MAX_PODS = 200  # per change: a policy over thousands of pending pods is retried in rounds
RATE = 20.0  # status writes per second, at most
INTERVAL_SECONDS = 1.0
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Waiting:
    """What the retry reads of a pending pod kube-scheduler found unschedulable."""

    name: str
    labels: Mapping[str, str]
    policy: str | None  # the PlacementPolicy it names in berth.dev/placement-policy


@dataclass(frozen=True, slots=True)
class Change:
    """A PlacementPolicy that changed: the selectors it had before and has now, and what happened."""

    namespace: str
    name: str
    selectors: tuple[Selector, ...]
    what: str  # "created", "changed (generation 3)", "deleted"

    def concerns(self, pod: Waiting) -> bool:
        if pod.policy is not None:
            return pod.policy.strip() == self.name
        return any(s.matches(pod.labels) for s in self.selectors)


_lock = threading.Lock()
_changes: dict[tuple[str, str], Change] = {}


def is_waiting(body: Mapping[str, Any]) -> bool:
    """A pod kube-scheduler tried and found no node for, waiting for a scheduler other than its default."""
    spec = body.get("spec") or {}
    meta = body.get("metadata") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER:
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (body.get("status") or {}).get("conditions") or []
    )


def waiting_record(body: Mapping[str, Any]) -> Waiting:
    meta = body.get("metadata") or {}
    return Waiting(
        name=meta.get("name") or "",
        labels=dict(meta.get("labels") or {}),
        policy=(meta.get("annotations") or {}).get(ann.PLACEMENT_POLICY),
    )


def note(namespace: str, name: str, selectors: Iterable[Selector | None], what: str) -> None:
    """The policy changed: its pods are retried in the loop's next round."""
    change = Change(namespace, name, tuple(s for s in selectors if s is not None), what)
    with _lock:
        before = _changes.get((namespace, name))
        if before is not None:  # noted twice before a round: both selectors count, the last word says
            change = Change(namespace, name, tuple(dict.fromkeys(before.selectors + change.selectors)), what)
        _changes[namespace, name] = change


def take() -> list[Change]:
    with _lock:
        changes = list(_changes.values())
        _changes.clear()
    return changes


def pods_for(change: Change, waiting: Mapping[str, Iterable[Waiting]]) -> list[str]:
    """The names of the waiting pods the change concerns, at most MAX_PODS, in name order."""
    names = sorted({p.name for p in waiting.get(change.namespace, ()) if change.concerns(p)})
    if len(names) > MAX_PODS:
        log.info(
            "PlacementPolicy %s/%s %s: %d pending pods concern it, %d retried now, the others by "
            "kube-scheduler's own flush",
            change.namespace,
            change.name,
            change.what,
            len(names),
            MAX_PODS,
        )
    return names[:MAX_PODS]


async def retry_once(
    client: KubeClient,
    changes: Iterable[Change],
    waiting: Mapping[str, Iterable[Waiting]],
    *,
    rate: float = RATE,
    now: Callable[[], str | None] = lambda: None,
) -> int:
    """Writes the retry condition on the pods each change concerns; the number of pods written."""
    written = 0
    for change in changes:
        names = pods_for(change, waiting)
        for name in names:
            path = f"/api/v1/namespaces/{change.namespace}/pods/{name}/status"
            body = retry_patch(
                "PlacementPolicyChanged", f"PlacementPolicy {change.name} {change.what}", now()
            )
            try:
                await client.patch(path, body, strategic=True)
                written += 1
            except ApiError as exc:
                if exc.status != 404:  # a pod gone since: nothing to retry
                    log.warning("retry of pod %s/%s not written: %s", change.namespace, name, exc)
            await asyncio.sleep(1.0 / rate)
        if names:
            log.info(
                "PlacementPolicy %s/%s %s: asked kube-scheduler to retry %d pending pod(s)",
                change.namespace,
                change.name,
                change.what,
                len(names),
            )
    return written


async def run(
    client: KubeClient,
    waiting: Callable[[], Mapping[str, Iterable[Waiting]]],
    interval: float = INTERVAL_SECONDS,
) -> None:
    while True:
        await asyncio.sleep(interval)
        changes = take()
        if not changes:
            continue
        try:
            await retry_once(client, changes, waiting())
        except Exception:  # the next change tries again; never end the loop
            log.exception("retrying the pending pods of changed PlacementPolicies failed")
