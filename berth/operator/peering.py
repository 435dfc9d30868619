"""Whether this replica is the active one of its kopf peering, read from the peering object.

kopf pauses every operator of a peering that sees a live peer of a higher priority, or of the same one,
and says so to no handler (kopf._core.engines.peering.process_peering_event). Its own watches stop while
it is paused; the operator's cache (berth.operator.cache) does not, so the refresh of the policies'
counts asks here before it writes: active when the peering object lists this replica's priority and no
other live peer of the same or a higher priority.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from berth.cluster.kubeapi import ApiError, KubeClient

GROUP = "/apis/kopf.dev/v1"


def peering_paths(name: str, namespaces: Sequence[str]) -> list[str]:
    """The peering objects kopf keeps alive for an operator of `namespaces` (empty: cluster-wide)."""
    if not namespaces:
        return [f"{GROUP}/clusterkopfpeerings/{name}"]
    return [f"{GROUP}/namespaces/{ns}/kopfpeerings/{name}" for ns in namespaces]


def leads(status: Mapping[str, Any], priority: int, now: dt.datetime | None = None) -> bool:
    """kopf's rule over a peering's status (peer id -> priority, lifetime, lastseen): this replica, of
    `priority`, is listed, and no other live peer has the same or a higher priority."""
    now = now or dt.datetime.now(dt.UTC)
    alive = [int(p.get("priority", 0)) for p in status.values() if isinstance(p, Mapping) and _alive(p, now)]
    return alive.count(priority) == 1 and all(p <= priority for p in alive)


def _alive(peer: Mapping[str, Any], now: dt.datetime) -> bool:
    try:
        seen = dt.datetime.fromisoformat(str(peer["lastseen"]))
        lifetime = dt.timedelta(seconds=int(peer.get("lifetime", 60)))
    except (KeyError, ValueError, TypeError):
        return False
    if seen.tzinfo is None:
        seen = seen.replace(tzinfo=dt.UTC)
    return seen + lifetime > now


async def active(client: KubeClient, name: str | None, priority: int, namespaces: Sequence[str] = ()) -> bool:
    """This replica leads its peering `name` (None: standalone, always active) in every namespace."""
    if name is None:
        return True
    for path in peering_paths(name, namespaces):
        try:
            body = await client.get(path)
        except ApiError as exc:
            if exc.status == 404:  # no peering object (yet): kopf pauses a mandatory peering too
                return False
            raise
        if not leads(body.get("status") or {}, priority):
            return False
    return True
