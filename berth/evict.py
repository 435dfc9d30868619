"""Carrying out a rebalance plan (berth.analysis.rebalance) through the Eviction API.

For each planned move, in the plan's order:
1. the planned target is written on the pod (`berth.dev/rebalance-target`, with a deadline), so that
   berth-scheduler steers the replacement there when the watch shows the pod going;
2. the pod is evicted through policy/v1 Eviction, which honours PodDisruptionBudgets: a 429 means a
   budget allows no disruption now, and the pod is skipped (its target taken off again) until a later
   round; a pod already gone is skipped too;
3. an event on the pod and on its owner names the rule and the target.

Every outcome is counted in `berth_rebalance_evictions_total{rule, outcome}`, which `--pushgateway`
sends to a Prometheus Pushgateway at the end of the run.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, push_to_gateway

from berth import annotations as ann
from berth.analysis.rebalance import Move
from berth.cluster.events import event_body, involved
from berth.cluster.kubeapi import ApiError, KubeClient
from berth.cluster.planned import target_annotation

log = logging.getLogger(__name__)

TARGET_SECONDS = 120  # how long berth-scheduler steers a replacement to its planned node
OWNER_API = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicationController": "v1",
    "Job": "batch/v1",
}

REGISTRY = CollectorRegistry()
EVICTIONS = Counter(
    "berth_rebalance_evictions",
    "Pods berth rebalance asked to evict, by the first rule their node broke and by outcome "
    "(evicted, budget: a PodDisruptionBudget allowed none, gone, failed).",
    ["rule", "outcome"],
    registry=REGISTRY,
)


@dataclass(frozen=True, slots=True)
class Eviction:
    move: Move
    outcome: str  # evicted | budget | gone | failed
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"pod": self.move.pod, "outcome": self.outcome}
        return out | ({"detail": self.detail} if self.detail else {})


async def evict(
    client: KubeClient, moves: list[Move], *, target_seconds: float = TARGET_SECONDS
) -> list[Eviction]:
    instance = socket.gethostname()
    out = []
    for move in moves:
        outcome = await _evict_one(client, move, target_seconds, instance)
        EVICTIONS.labels(rule=move.rules[0] if move.rules else "", outcome=outcome.outcome).inc()
        out.append(outcome)
    return out


async def _evict_one(client: KubeClient, move: Move, target_seconds: float, instance: str) -> Eviction:
    namespace, _, name = move.pod.partition("/")
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=target_seconds)
    note = {ann.REBALANCE_TARGET: target_annotation(move.target, until, move.rules)}
    try:
        # Only the pod of the plan: a pod of that name with another uid is a replacement already.
        await client.patch(path, {"metadata": {"uid": move.uid, "annotations": note}})
    except ApiError as exc:
        if exc.status in (404, 409):
            return Eviction(move, "gone", exc.message)
        return Eviction(move, "failed", exc.message)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": move.uid}},
    }
    try:
        await client.post(f"{path}/eviction", eviction)
    except ApiError as exc:
        await _forget_target(client, path, move)
        if exc.status == 429:
            return Eviction(move, "budget", exc.message)
        if exc.status in (404, 409):
            return Eviction(move, "gone", exc.message)
        return Eviction(move, "failed", exc.message)
    await _events(client, move, instance)
    return Eviction(move, "evicted")


async def _forget_target(client: KubeClient, path: str, move: Move) -> None:
    try:
        await client.patch(path, {"metadata": {"uid": move.uid, "annotations": {ann.REBALANCE_TARGET: None}}})
    except ApiError as exc:  # the target's own deadline ends it anyway
        log.warning("%s: planned target not taken off: %s", move.pod, exc.message)


async def _events(client: KubeClient, move: Move, instance: str) -> None:
    namespace, _, name = move.pod.partition("/")
    rules = ", ".join(move.rules)
    planned = f"replacement planned on {move.target}"
    about = [
        (
            involved("v1", "Pod", namespace, name, move.uid),
            f"evicted by berth rebalance: node {move.node} breaks {rules}; {planned}",
        )
    ]
    if move.owner is not None and move.owner[0] in OWNER_API:
        kind, owner = move.owner
        about.append(
            (
                involved(OWNER_API[kind], kind, namespace, owner),
                f"berth rebalance evicted {name} from {move.node} ({rules}); {planned}",
            )
        )
    for obj, text in about:
        try:
            await client.post(
                f"/api/v1/namespaces/{namespace}/events",
                event_body(obj, "Normal", "Rebalanced", text, instance),
            )
        except ApiError as exc:  # an event is best effort
            log.warning("event for %s not recorded: %s", obj["name"], exc.message)


def push_metrics(gateway: str) -> None:
    push_to_gateway(gateway, job="berth-rebalance", registry=REGISTRY)
