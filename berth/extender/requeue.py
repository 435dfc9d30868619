"""The pods berth refused, asked to be tried again when a pod of their namespace leaves a node.

kube-scheduler retries the pods an extender refused on any pod event ("Extender" is registered for
every event; berth.operator.policy_requeue reads the source), but it may do so before berth's view has
the news, and then files the pod as unschedulable again for minutes. So, once the view no longer holds
the pod that left, the pods berth refused in its namespace (berth's rules see only their own namespace)
are asked to be tried again, through the same status write the operator uses: at most RETRY_AT_MOST
per pod that left, each at most once per RETRY_EVERY seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from berth.cluster.model import Pod
from berth.cluster.per_pod import PodStates, pod_key
from berth.extender.decisions import DECISION_CACHE, Cluster

log = logging.getLogger("berth.extender")

RETRY_AT_MOST = 50  # pods retried for one pod that left
RETRY_EVERY = 5.0  # seconds between two retries of the same pod

Retrier = Callable[[Pod, str], Awaitable[None]]  # asks kube-scheduler to try the pod again, saying why


class Requeue:
    def __init__(
        self,
        cluster: Cluster,
        retry: Retrier,
        states: PodStates,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.retry = retry
        self.spawn = spawn
        self.clock = clock
        # pod -> (the pod, when it was last retried), by namespace
        self._refused = states.map("refused pods", DECISION_CACHE, grouped=True)

    def refused(self, pod: Pod) -> None:
        key = pod_key(pod)
        held = self._refused.get(key)
        self._refused.set(key, (pod, held[1] if held is not None else 0.0), pod.namespace)

    def pod_left(self, gone: Pod) -> None:
        """A bound pod left its node, and the view no longer holds it: the pods refused in its
        namespace that wait for a node are retried."""
        keys = self._refused.in_namespace(gone.namespace)
        if not keys:
            return
        now = self.clock()
        view = self.cluster.view
        chosen = []
        for key in keys:
            held = self._refused.get(key)
            assert held is not None
            pod, last = held
            current = view.pod(pod.key)
            if current is None or current.node_name:
                self._refused.pop(key)  # placed, or gone
                continue
            if now - last >= RETRY_EVERY and len(chosen) < RETRY_AT_MOST:
                self._refused.set(key, (pod, now), pod.namespace)
                chosen.append(pod)
        if chosen:
            self.spawn(self._retry_all(chosen, f"pod {gone.name} left node {gone.node_name}"))

    async def _retry_all(self, pods: list[Pod], why: str) -> None:
        for pod in pods:
            try:
                await self.retry(pod, why)
            except Exception as exc:  # the pod waits for kube-scheduler's own flush
                log.info("retry of %s not written: %s", pod.key, exc)
