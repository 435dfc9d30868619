"""Following the leadership of the kube-scheduler beside berth (`berth serve --follow-lease`).

berth-scheduler runs as several replicas, each a kube-scheduler with its berth sidecar; the schedulers
elect a leader through a Lease, and only the leader schedules. The sidecar reads that Lease: its
scheduler leads while the holder's identity is this pod's (kube-scheduler's identity is the hostname,
an underscore and a uuid) and the holder keeps renewing it within its lease duration (timed on this
process's clock, from when a renewal was seen, so that clock skew does not matter).

- On becoming the leader's sidecar, berth catches up with the API server before it answers filter
  (`on_lead`, berth.cluster.live.LiveCluster.catch_up: a fence on its own pod that its watch shows, or a
  list of nodes and pods): the placements the old leader made that the watch has not shown yet are then
  in the view.
- While its scheduler does not lead (or before that list), filter is refused with an error the
  scheduler retries, and bind is refused: a scheduler that lost the Lease must not bind what it
  decided before the new leader took over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from berth.cluster.kubeapi import ApiError, KubeClient

log = logging.getLogger("berth.leadership")
POLL_SECONDS = 1.0


class Leadership:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        on_lead: Callable[[], Awaitable[None]],
        poll: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.identity = identity
        self.on_lead = on_lead
        self.poll = poll
        self.clock = clock
        self.leading = False  # this pod's scheduler holds the Lease
        self.fresh = False  # and berth has listed the cluster again since it took it
        self._seen: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._seen_at = 0.0

    def may_filter(self) -> bool:
        return self.leading and self.fresh

    def may_bind(self) -> bool:
        return self.leading

    def observe(self, lease: dict[str, Any] | None) -> bool:
        """Whether this pod's scheduler leads, from the Lease as read now (None: there is none)."""
        spec = (lease or {}).get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = (holder, spec.get("renewTime") or "")
        now = self.clock()
        if renewed != self._seen:
            self._seen, self._seen_at = renewed, now
        duration = spec.get("leaseDurationSeconds") or 15
        ours = holder == self.identity or holder.startswith(self.identity + "_")
        return bool(ours and now - self._seen_at <= duration)

    async def step(self) -> None:
        try:
            lease = await self.client.get(self.path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            lease = None
        leads = self.observe(lease)
        if leads and not self.leading:
            log.info(
                "this replica's scheduler holds the lease: catching up with the API server before placing"
            )
            self.leading, self.fresh = True, False
            await self.on_lead()
            self.fresh = self.leading
        elif not leads and self.leading:
            log.warning("this replica's scheduler no longer holds the lease: refusing filter and bind")
            self.leading = self.fresh = False

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API server away: leadership unknown, so not ours
                if self.leading:
                    log.warning("lease unreadable (%s): refusing filter and bind until it is read", exc)
                self.leading = self.fresh = False
            await asyncio.sleep(self.poll)
