"""The operator's nodes and pods, listed and watched by berth's own reflector, not by kopf.

kopf starts a worker for every object a handler or an index watches, and holds each until every index
is ready: with `kopf.index("pods")` an operator of a cluster of 150,000 pods spent ten minutes at a full
core starting and peaked at 2.2 GiB, its policies' counts wrong all the while (and at 25,000 pods it was
over its memory limit already). So kopf keeps what it serves well, the PlacementPolicies' handlers and the
admission webhooks, and the nodes and pods come from the reflector berth serve's cache uses
(berth.cluster.live.Reflector: a list page by page, then a watch with bookmarks, a relist after 410 Gone).

What is kept is what the operator reads: each node's record; of each pod, by namespace, what the policy
counts read (`CountedPod`: about 650 bytes with its name, age and map entry, where berth serve's whole
record with its share of the view's indexes is about a kilobyte; a namespace's pods are made into records
when its policies are counted); and, for the retries when a policy changes (berth.operator.policy_requeue),
the pending pods kube-scheduler found unschedulable. Pods that are done
(Succeeded, Failed) are not listed. A change that can alter a policy's counts marks its namespace for the
refresh (berth.operator.refresh); a node's change marks every namespace. Every replica keeps its cache,
active in its peering or paused, so that one taking over counts at once.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import msgspec

from berth import annotations as ann
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.kubeapi import KubeClient
from berth.cluster.live import Reflector, Watched, meta_key
from berth.cluster.model import Node, Pod
from berth.errors import SnapshotError
from berth.operator import policy_requeue, refresh
from berth.operator.policy_requeue import Waiting

log = logging.getLogger("berth.operator")

NOT_DONE = "status.phase!=Succeeded,status.phase!=Failed"


class OperatorCache:
    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str] = (),
        mark: Callable[[str], None] = refresh.mark,
    ) -> None:
        """`namespaces`: the operator's (empty: the whole cluster); `mark`: told the namespace of every
        change that can alter a policy's counts (refresh.EVERY_NAMESPACE for a node's)."""
        self.client = client
        self.mark = mark
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, dict[str, CountedPod]] = {}  # namespace -> name -> what the counts read
        self.waiting: dict[str, dict[str, Waiting]] = {}  # namespace -> name -> what the retry reads
        self.last_event = 0.0
        kinds = [
            Watched(
                "nodes",
                "/api/v1/nodes",
                {},
                apply=self._apply_node,
                delete=lambda o: self._forget_node(meta_key(o)),
                keys=lambda: set(self.nodes),
                key_of=meta_key,
                forget=self._forget_node,
            )
        ]
        for namespace in namespaces or ("",):
            path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
            kinds.append(
                Watched(
                    f"pods in {namespace}" if namespace else "pods",
                    path,
                    {"fieldSelector": NOT_DONE},
                    apply=self._apply_pod,
                    delete=lambda o: self._forget_pod(meta_key(o)),
                    keys=partial(self._pod_keys, namespace),
                    key_of=meta_key,
                    forget=self._forget_pod,
                )
            )
        self.reflectors = [Reflector(client, kind, self) for kind in kinds]
        self._tasks: list[asyncio.Task] = []

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        self._tasks = [asyncio.create_task(r.run(), name=f"operator-{r.kind.name}") for r in self.reflectors]
        self._tasks.append(asyncio.create_task(self._after_sync(), name="operator-cache-sync"))

    async def _after_sync(self) -> None:
        await self.synced()
        gc.collect()
        gc.freeze()  # the records are long-lived: out of every later collection
        pods = sum(len(by_name) for by_name in self.pods.values())
        log.info("cache synced: %d nodes, %d pods", len(self.nodes), pods)

    async def synced(self) -> None:
        await asyncio.gather(*(r.synced.wait() for r in self.reflectors))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.aclose()

    def ready(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    def touched(self) -> None:
        self.last_event = time.monotonic()

    # -- what the counts and the retries read -------------------------------------------------
    def pods_of(self, namespace: str) -> list[Pod]:
        """A namespace's pods as the counts read them."""
        return [counted.pod(namespace) for counted in self.pods.get(namespace, {}).values()]

    def waiting_by_namespace(self) -> Mapping[str, Iterable[Waiting]]:
        return {namespace: list(by_name.values()) for namespace, by_name in self.waiting.items()}

    # -- applying objects ---------------------------------------------------------------------
    def _apply_node(self, obj: dict[str, Any]) -> None:
        name = meta_key(obj)
        try:
            record = node_from_k8s(obj)
        except SnapshotError:
            record = Node(name=name, ready=False)
        if self.nodes.get(name) != record:  # a heartbeat changes nothing the counts read
            self.nodes[name] = record
            self.mark(refresh.EVERY_NAMESPACE)

    def _forget_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.mark(refresh.EVERY_NAMESPACE)

    def _apply_pod(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        if not namespace or not name:
            return
        record = counted(obj, namespace, name)
        by_name = self.pods.setdefault(namespace, {})
        if record.phase in ("Succeeded", "Failed"):
            self._forget_pod(f"{namespace}/{name}")
            return
        if by_name.get(name) != record:  # a status the counts do not read changes nothing
            by_name[name] = record
            self.mark(namespace)
        if policy_requeue.is_waiting(obj):
            self.waiting.setdefault(namespace, {})[name] = policy_requeue.waiting_record(obj)
        else:
            self._not_waiting(namespace, name)

    def _forget_pod(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        by_name = self.pods.get(namespace)
        if by_name is not None and by_name.pop(name, None) is not None:
            if not by_name:
                del self.pods[namespace]
            self.mark(namespace)
        self._not_waiting(namespace, name)

    def _not_waiting(self, namespace: str, name: str) -> None:
        waiting = self.waiting.get(namespace)
        if waiting is not None and waiting.pop(name, None) is not None and not waiting:
            del self.waiting[namespace]

    def _pod_keys(self, namespace: str) -> set[str]:
        """The pods one reflector lists (all of them, or one namespace's)."""
        spaces = [namespace] if namespace else list(self.pods)
        return {f"{ns}/{name}" for ns in spaces for name in self.pods.get(ns, ())}


class CountedPod(msgspec.Struct, frozen=True, gc=False):
    """Of a pod, what a PlacementPolicy's counts read (its namespace is the cache's key): the labels and
    annotations its selector and rules read, where it runs, its tags, requests and limits (a RULE_BASED
    rule may read them), and its age (the younger of two pods too many is the one counted)."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    node_name: str
    phase: str
    tags: frozenset[str]
    requests: dict[str, int]
    limits: dict[str, int]
    creation: str
    deleting: bool

    def pod(self, namespace: str) -> Pod:
        return Pod(
            namespace,
            self.name,
            labels=self.labels,
            annotations=self.annotations,
            node_name=self.node_name,
            phase=self.phase,
            tags=self.tags,
            requests=self.requests,
            limits=self.limits,
            creation=self.creation,
            deleting=self.deleting,
        )


def counted(obj: Mapping[str, Any], namespace: str, name: str) -> CountedPod:
    """What the counts read of a pod; one whose resources berth cannot read is still governed and
    counted, without them."""
    try:
        pod = pod_from_k8s(dict(obj), record=False)
    except SnapshotError:
        meta = obj.get("metadata") or {}
        notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(ann.PREFIX)}
        node = (obj.get("spec") or {}).get("nodeName") or ""
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        labels = dict(meta.get("labels") or {})
        pod = Pod(namespace, name, labels=labels, annotations=notes, node_name=node, phase=phase)
    return CountedPod(
        pod.name,
        pod.labels,
        pod.annotations,
        pod.node_name,
        pod.phase,
        pod.tags,
        pod.requests,
        pod.limits,
        pod.creation,
        pod.deleting,
    )
