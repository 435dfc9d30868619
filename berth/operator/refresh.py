"""governedPods and violatingPods kept current as pods and nodes change, without a kopf timer.

A kopf timer (or daemon) makes kopf put a finalizer on every PlacementPolicy, to stop the timer before
the object goes. Once the operator is uninstalled nothing removes that finalizer, and deleting the CRD
hangs. berth's refresh needs no end-of-life step, so it is one loop per operator instead: the
operator's cache (berth.operator.cache) marks the namespaces whose pods changed (every namespace when a
node changed), and every `interval` seconds the loop recounts the policies of those namespaces and
patches the counts that differ. It waits for the cache to have listed the cluster, and writes only while
the replica is the active one of its peering (berth.operator.peering): a paused replica keeps its marks
and writes nothing, and recounts what changed meanwhile when it takes over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from berth.cluster.kubeapi import ApiError, KubeClient

log = logging.getLogger("berth.operator")
EVERY_NAMESPACE = "*"
INTERVAL_SECONDS = 30.0
COUNTS = ("governedPods", "violatingPods")

_marked: set[str] = set()

# (namespace, name, the status fields to patch)
Stale = Callable[[Iterable[str]], list[tuple[str, str, dict[str, int]]]]


def mark(namespace: str) -> None:
    _marked.add(namespace)


def take(known: Iterable[str]) -> list[str]:
    """The marked namespaces, cleared; every known one if a node changed."""
    marked = set(_marked)
    _marked.clear()
    if EVERY_NAMESPACE in marked:
        return sorted(known)
    return sorted(marked)


def policy_record(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the refresh reads of a policy: a copy, since kopf's body changes under the index."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "generation", "uid")},
        "spec": _plain(body.get("spec") or {}),
        "status": {k: status.get(k) for k in COUNTS},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def status_path(namespace: str, name: str) -> str:
    return f"/apis/berth.dev/v1alpha1/namespaces/{namespace}/placementpolicies/{name}/status"


async def run(
    client: KubeClient,
    stale: Stale,
    known: Callable[[], Iterable[str]],
    interval: float,
    *,
    ready: Callable[[], bool] = lambda: True,
    active: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Every `interval` seconds, once `ready` and while `active`: the marked namespaces recounted."""
    while True:
        await asyncio.sleep(interval)
        try:
            if not ready() or (active is not None and not await active()):
                continue  # the marks wait for the next round
            await refresh_once(client, stale, take(known()))
        except Exception:  # the next round tries again; never end the loop
            log.exception("refreshing the policies' pod counts failed")


async def refresh_once(client: KubeClient, stale: Stale, namespaces: Iterable[str]) -> int:
    patched = 0
    for namespace, name, counts in stale(namespaces):
        try:
            await client.patch(status_path(namespace, name), {"status": counts})
            patched += 1
        except ApiError as exc:
            if exc.status != 404:  # a policy deleted since: nothing to count
                log.warning("pod counts of %s/%s not written: %s", namespace, name, exc)
    return patched
