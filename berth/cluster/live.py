"""The live cluster cache: list and watch Nodes, Pods and PlacementPolicies into one ClusterView.

Each kind has a reflector that lists, then watches from the list's resourceVersion with bookmarks,
resumes from the last resourceVersion it saw when the stream ends, and relists (diffing against the
view, so deletions in the gap are not lost) when the server answers 410 Gone. A list is read as a
watch that sends the current objects first and then a bookmark (Kubernetes' streaming list, KEP-3157:
served from the API server's watch cache, no page of it made for berth), or page by page from a server
that does not take that form. Everything
runs in one event loop with the extender, so a decision always sees one consistent view.

When its scheduler takes the Lease (berth serve --follow-lease), the view must hold every placement the
scheduler that led before made. The view is warm (the watches ran all along), so berth does not list
the cluster again: it writes a condition on its own pod (`--fence-pod`) and waits for the pod watch to
show it. A watch shows one resource's changes in the order they were stored, so once the fence comes
back every binding stored before it has been applied. Without a fence pod, or when the fence does not
come back within CATCH_UP_SECONDS, it lists nodes and pods again, converting only the pods whose
resourceVersion moved since the watch showed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from berth import annotations as ann
from berth.cluster import collection
from berth.cluster.convert import forget_pod, node_from_k8s, pod_from_k8s
from berth.cluster.events import FENCE_CONDITION, fence_patch
from berth.cluster.kubeapi import OPENED, ApiError, Credentials, KubeClient
from berth.cluster.model import Pod
from berth.cluster.per_pod import PodStates
from berth.cluster.snapshot import Snapshot
from berth.cluster.view import ClusterView
from berth.errors import BerthError

log = logging.getLogger("berth.cache")

# The server ends every watch after this long and the reflector resumes it from its resourceVersion;
# a watch silent for WATCH_IDLE_SECONDS (no event, no bookmark) is taken as lost.
WATCH_TIMEOUT_SECONDS = 120
WATCH_IDLE_SECONDS = 30.0
RETRY_SECONDS = 2.0
# A placement berth made that the watch has not shown stored after this long is checked with the API
# server (every VERIFY_EVERY_SECONDS), and undone only when the API server says the pod is not bound.
RESERVATION_SECONDS = 30.0
VERIFY_EVERY_SECONDS = 5.0
# The uids of pods the watch showed deleted, kept this long (a bind's answer comes back within
# kube-scheduler's timeout of the call, 30 s by default) and at most this many.
GONE_SECONDS = 120.0
GONE_REMEMBERED = 10_000
# How long berth waits for the pod watch to show its fence (catch_up) before it lists again instead.
CATCH_UP_SECONDS = 10.0
YIELD_EVERY = 100  # objects of a list page taken in between two turns of the event loop
# What a streaming list's bookmark carries once every object of the list has been sent.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


# (kind, name, list path): the objects whose selectors and labels kube-scheduler's default spreading
# and pod affinity read, and the PodDisruptionBudgets preemption counts (ClusterView.upsert_workload).
WORKLOADS = (
    ("Service", "services", "/api/v1/services"),
    ("ReplicaSet", "replicasets", "/apis/apps/v1/replicasets"),
    ("StatefulSet", "statefulsets", "/apis/apps/v1/statefulsets"),
    ("ReplicationController", "replicationcontrollers", "/api/v1/replicationcontrollers"),
    ("Namespace", "namespaces", "/api/v1/namespaces"),
    ("PodDisruptionBudget", "poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets"),
)


class PodHandler(Protocol):
    """What a server is told of the pods the watch shows (berth.extender.placer.Placer)."""

    def pod_seen(self, obj: dict[str, Any]) -> None:
        """Every pod as the watch shows it, once the view holds it."""

    def pod_left(self, gone: Pod) -> None:
        """A bound pod left its node (deleted, or done), once the view no longer holds it."""


@dataclass(frozen=True, slots=True)
class Reservation:
    node: str
    key: str  # namespace/name, to ask the API server about the pod
    deadline: float  # monotonic time from which the API server is asked


@dataclass
class Watched:
    name: str
    path: str
    params: dict[str, str]
    apply: Callable[[dict[str, Any]], None]
    delete: Callable[[dict[str, Any]], None]
    keys: Callable[[], set[str]]
    key_of: Callable[[dict[str, Any]], str]
    forget: Callable[[str], None]
    optional: bool = False  # a CRD that may not be installed
    # Not needed to place pods by berth's rules: without the right to read it (403), berth serves
    # without it (kube's default spreading and pod affinity then miss what it holds), and says so.
    forbidden_ok: bool = False
    # The cache holds this object (its key, the object) at this resourceVersion already: a relist
    # passes over it without converting it again.
    held: Callable[[str, dict[str, Any]], bool] | None = None


class Touched(Protocol):
    """What a reflector tells the cache it feeds besides the objects: it heard from the API server."""

    def touched(self) -> None: ...


def meta_key(obj: dict[str, Any]) -> str:
    """namespace/name of an object, or its name when it has no namespace."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Reflector:
    def __init__(self, client: KubeClient, kind: Watched, cache: Touched) -> None:
        self.client = client
        self.kind = kind
        self.cache = cache
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.forbidden = False  # the last list was refused (403) for a kind berth can do without
        self.streams = True  # lists are read as a stream of the current objects (until refused once)

    async def run(self) -> None:
        while True:
            try:
                if not self.resource_version:
                    await self._relist()
                await self._watch()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.status == 410:
                    log.info("%s: resourceVersion expired, relisting", self.kind.name)
                    self.resource_version = ""
                    continue
                if exc.status == 403 and self.kind.forbidden_ok:
                    if not self.forbidden:
                        log.warning(
                            "%s: not allowed to list (%s); kube-scheduler's default spreading and pod "
                            "affinity leave them out until it is (grant list and watch on %s)",
                            self.kind.name,
                            exc.message,
                            self.kind.name,
                        )
                    self.forbidden = True
                    self.synced.set()
                    await asyncio.sleep(10 * RETRY_SECONDS)
                    continue
                if exc.status == 404 and self.kind.optional:
                    # The CRD is not installed (yet): nothing to cache, look again later. One that was
                    # served before is most likely an API server still starting: look again soon, and
                    # keep what was cached (forgetting policies would place pods without them).
                    self.synced.set()
                    await asyncio.sleep(RETRY_SECONDS if self.resource_version else 10 * RETRY_SECONDS)
                    continue
                log.warning("%s: %s", self.kind.name, exc.message)
                self.synced.clear()  # not ready until the watch is back
                await asyncio.sleep(RETRY_SECONDS)
            except Exception as exc:  # network errors, server restarts: resume from the last resourceVersion
                log.warning("%s: watch failed (%s: %s); retrying", self.kind.name, type(exc).__name__, exc)
                # Not ready until the watch is back: the view may be missing what happened meanwhile.
                self.synced.clear()
                await asyncio.sleep(RETRY_SECONDS)

    async def _relist(self) -> None:
        # Each object is taken into the view as it arrives and let go: the decoded list and the view
        # are never held whole side by side (a relist after 410 Gone included).
        if self.streams:
            try:
                await self._list_streamed()
                return
            except ApiError as exc:
                if exc.status not in (400, 422):  # anything but "this server takes no streaming list"
                    raise
                self.streams = False
                log.info(
                    "%s: the API server does not send a list as a watch (%s); listing page by page",
                    self.kind.name,
                    exc.message,
                )
        await self._list_paged()

    async def _list_streamed(self) -> None:
        """The list as a watch that sends every current object, then a bookmark marked as their end
        (sendInitialEvents, resourceVersionMatch=NotOlderThan: at least as new as a quorum read)."""
        params = {
            **self.kind.params,
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        }
        seen: set[str] = set()
        held, key_of = self.kind.held, self.kind.key_of
        at = 0
        with collection.held_off():
            events = self.client.watch(
                self.kind.path, params, idle=WATCH_IDLE_SECONDS + WATCH_TIMEOUT_SECONDS
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind in ("ADDED", "MODIFIED"):
                        key = key_of(obj)
                        seen.add(key)
                        if held is None or not held(key, obj):
                            self.kind.apply(obj)
                        at += 1
                        if at % YIELD_EVERY == 0:
                            await asyncio.sleep(0)  # the probes and the extender's calls go on meanwhile
                    elif kind == "DELETED":
                        seen.discard(key_of(obj))
                        self.kind.delete(obj)
                    elif kind == "BOOKMARK":
                        meta = obj.get("metadata") or {}
                        if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                            self._listed(seen, str(meta.get("resourceVersion") or ""))
                            return
                    elif kind == "ERROR":
                        raise ApiError(
                            obj.get("message", "watch error"),
                            status=obj.get("code", 500),
                            reason=obj.get("reason", ""),
                        )
        raise ApiError(f"{self.kind.name}: the list's stream ended before its last object", status=0)

    async def _list_paged(self) -> None:
        seen: set[str] = set()
        rv = ""
        with collection.held_off():
            async for items, version in self.client.pages(self.kind.path, self.kind.params):
                held = self.kind.held
                for at, obj in enumerate(items, 1):
                    key = self.kind.key_of(obj)
                    seen.add(key)
                    if held is None or not held(key, obj):
                        self.kind.apply(obj)
                    if at % YIELD_EVERY == 0:
                        await asyncio.sleep(0)  # the next page's request and the probes go on meanwhile
                rv = version
                del items
        self._listed(seen, rv)

    def _listed(self, seen: set[str], rv: str) -> None:
        """A list read whole: what the view holds that it did not list is gone; watch from `rv`."""
        for gone in self.kind.keys() - seen:
            self.kind.forget(gone)
        self.resource_version = rv
        self.relists += 1
        self.forbidden = False
        self.cache.touched()
        self.synced.set()

    async def _watch(self) -> None:
        params = {
            **self.kind.params,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS),
        }
        async for event in self.client.watch(
            self.kind.path, params, idle=WATCH_IDLE_SECONDS + WATCH_TIMEOUT_SECONDS
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == OPENED:
                if not self.synced.is_set():
                    log.info("%s: watching from resourceVersion %s", self.kind.name, self.resource_version)
                self.synced.set()
                continue
            if kind == "ERROR":
                status = obj.get("code", 500)
                raise ApiError(obj.get("message", "watch error"), status=status, reason=obj.get("reason", ""))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                self.kind.apply(obj)
            elif kind == "DELETED":
                self.kind.delete(obj)
            if rv:
                self.resource_version = rv
            self.cache.touched()


class LiveCluster:
    """A ClusterView fed by watches, plus the bindings berth made that the watch has not shown yet.

    What the watch shows is the truth: a pod the watch shows with `spec.nodeName` counts on that node
    until the watch shows it gone, terminal or elsewhere, however long it stays Pending. A reservation
    stands only for a binding berth chose or made that the watch has not shown stored yet; it never
    overrides a binding the watch has shown, and it is undone only when the binding surely failed (the
    scheduler's bind check or the API server refused it) or when the API server, asked once the
    reservation is `reservation_seconds` old, answers that the pod is not bound (or is gone).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        reservation_seconds: float = RESERVATION_SECONDS,
        verify_every: float = VERIFY_EVERY_SECONDS,
        pod_states: PodStates | None = None,
        fence_pod: tuple[str, str] | None = None,
        catch_up_seconds: float = CATCH_UP_SECONDS,
    ) -> None:
        """`pod_states`: what the server keeps per pod (berth.cluster.per_pod), forgotten here when the
        watch shows a pod gone or bound. `fence_pod`: (namespace, name) of berth serve's own pod, on
        which catch_up writes its fence."""
        self.client = client
        self.view = ClusterView()
        self.pod_states = pod_states if pod_states is not None else PodStates()
        self._handlers: list[PodHandler] = []
        self.last_event = 0.0
        self.reservation_seconds = reservation_seconds
        self.verify_every = verify_every
        # pod uid -> reservation: placed by berth, not yet seen bound by the watch
        self._reserved: dict[str, Reservation] = {}
        # uids the watch showed deleted lately, with when: a bind answer arriving after the deletion
        # adds no ghost
        self._gone: OrderedDict[str, float] = OrderedDict()
        self.fence_pod = fence_pod
        self.catch_up_seconds = catch_up_seconds
        # The fence being waited for: (its pod's key, its token, what is set when the watch shows it).
        self._fence: tuple[str, str, asyncio.Future[None]] | None = None
        self.catch_ups = 0  # takeovers caught up by the fence, without listing again
        self.kinds = [
            Watched(
                "nodes",
                "/api/v1/nodes",
                {},
                apply=self._apply_node,
                delete=lambda o: self.view.remove_node(meta_key(o)),
                keys=lambda: set(self.view.node_names()),
                key_of=meta_key,
                forget=self.view.remove_node,
            ),
            Watched(
                "pods",
                "/api/v1/pods",
                {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
                apply=self._apply_pod,
                delete=self._delete_pod,
                keys=lambda: {p.key for p in self.view.pods()},
                key_of=meta_key,
                forget=self._forget_pod,
                held=self._holds_pod,
            ),
        ]
        self.kinds.append(
            Watched(
                "placementpolicies",
                "/apis/berth.dev/v1alpha1/placementpolicies",
                {},
                apply=self.view.upsert_policy,
                delete=lambda o: self.view.remove_policy(*meta_key(o).split("/", 1)),
                keys=lambda: {f"{p.namespace}/{p.name}" for p in self.view.policies()},
                key_of=meta_key,
                forget=lambda key: self.view.remove_policy(*key.split("/", 1)),
                optional=True,
            )
        )
        # What kube's default spreading and pod affinity read: selectors and namespace labels.
        for kind, name, path in WORKLOADS:
            self.kinds.append(self._workload_kind(kind, name, path))
        self.reflectors = [Reflector(client, k, self) for k in self.kinds]
        self._tasks: list[asyncio.Task] = []

    def _workload_kind(self, kind: str, name: str, path: str) -> Watched:
        view = self.view

        def forget(key: str) -> None:
            namespace, _, rest = key.rpartition("/")
            view.remove_workload(kind, namespace, rest)

        return Watched(
            name,
            path,
            {},
            apply=lambda o: view.upsert_workload(o, kind),
            delete=lambda o: forget(meta_key(o)),
            keys=lambda: view.workload_keys(kind),
            key_of=meta_key,
            forget=forget,
            optional=True,
            forbidden_ok=True,
        )

    def add_handler(self, handler: PodHandler) -> None:
        """Tell `handler` of every pod the watch shows, and of every bound pod that leaves its node,
        as client-go's informers tell their event handlers."""
        self._handlers.append(handler)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        self._tasks = [asyncio.create_task(r.run(), name=f"reflector-{r.kind.name}") for r in self.reflectors]
        self._tasks.append(asyncio.create_task(self._after_sync(), name="cache-sync"))
        self._tasks.append(asyncio.create_task(self._verify_loop(), name="cache-reservations"))

    async def _after_sync(self) -> None:
        await asyncio.gather(*(r.synced.wait() for r in self.reflectors))
        # The cache's objects are long-lived: keep them out of every later collection (the end of
        # the last list collected what it left, berth.cluster.collection).
        if collection.holding():
            gc.collect()
        gc.freeze()
        log.info("cache synced: %d nodes, %d pods", len(self.view), sum(1 for _ in self.view.pods()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.aclose()

    def ready(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    async def relist(self) -> None:
        """List nodes and pods again while their watches go on: what the watch has not shown yet (the
        placements another berth made just before) is then in the view."""
        for reflector in self.reflectors:
            if reflector.kind.name in ("nodes", "pods"):
                await reflector._relist()

    async def catch_up(self) -> None:
        """Make the view hold every pod change stored until now (what the scheduler that led before
        placed and the watch has not shown yet): by the fence on berth's own pod when it has one,
        else (or when the fence does not come back in time) by listing nodes and pods again."""
        if self.fence_pod is not None:
            # Taken at the start, the lease comes while the first list is read: the fence is written
            # once it is (the watch goes on from the list's version, so the fence still comes last).
            await next(r for r in self.reflectors if r.kind.name == "pods").synced.wait()
            began = time.monotonic()
            try:
                await self._await_fence(self.fence_pod)
            except (ApiError, TimeoutError) as exc:
                why = exc.message if isinstance(exc, ApiError) else f"not seen in {self.catch_up_seconds:g} s"
                log.warning("fence on pod %s: %s; listing the cluster again", "/".join(self.fence_pod), why)
            else:
                self.catch_ups += 1
                log.info(
                    "caught up with the watch in %.2f s (fence on its own pod)", time.monotonic() - began
                )
                return
        began = time.monotonic()
        await self.relist()
        log.info("listed nodes and pods again in %.2f s", time.monotonic() - began)

    async def _await_fence(self, pod: tuple[str, str]) -> None:
        namespace, name = pod
        token = uuid.uuid4().hex
        seen: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fence = (f"{namespace}/{name}", token, seen)
        try:
            path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
            await self.client.patch(path, fence_patch(token), strategic=True)
            await asyncio.wait_for(seen, self.catch_up_seconds)
        finally:
            self._fence = None

    def _fence_seen(self, obj: dict[str, Any]) -> None:
        assert self._fence is not None
        key, token, seen = self._fence
        if seen.done() or meta_key(obj) != key:
            return
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == FENCE_CONDITION and token in (condition.get("message") or ""):
                seen.set_result(None)

    def waiting(self) -> list[str]:
        """The kinds whose watch is not (yet, or no longer) established."""
        return [r.kind.name for r in self.reflectors if not r.synced.is_set()]

    def lag_seconds(self) -> float:
        return time.monotonic() - self.last_event if self.last_event else float("inf")

    def touched(self) -> None:
        self.last_event = time.monotonic()

    def reservations(self) -> int:
        """How many placements berth counts that the watch has not shown stored yet."""
        return len(self._reserved)

    # -- applying objects ---------------------------------------------------------------------
    def _apply_node(self, obj: dict[str, Any]) -> None:
        try:
            self.view.upsert_node(node_from_k8s(obj))
        except BerthError as exc:
            log.warning("ignoring node %s: %s", meta_key(obj), exc.message)

    def _apply_pod(self, obj: dict[str, Any]) -> None:
        if self._fence is not None:
            self._fence_seen(obj)
        try:
            pod = pod_from_k8s(obj, record=False, memo=True)
        except BerthError as exc:
            log.warning("ignoring pod %s: %s", meta_key(obj), exc.message)
            return
        done_with = bool(pod.node_name or pod.terminal)  # as the API server stored it
        reserved = self._reserved.get(pod.uid) if pod.uid else None
        if reserved is not None:
            if pod.node_name or pod.terminal:
                # The binding is stored (or the pod is done): the watch's word replaces the reservation.
                del self._reserved[pod.uid]
            else:
                # Not shown bound yet: the binding may be in flight. Keep counting the pod where berth put it.
                pod = msgspec.structs.replace(pod, node_name=reserved.node)
        elif not pod.node_name and not pod.terminal and pod.uid:
            # Kubernetes never unbinds a pod: an unbound copy of a pod already seen bound is older news
            # (an API server answer applied ahead of the watch), so the binding stays.
            current = self.view.pod(pod.key)
            if current is not None and current.node_name and current.uid == pod.uid:
                pod = msgspec.structs.replace(pod, node_name=current.node_name)
        held = self.view.pod(pod.key) if pod.terminal else None
        self.view.add_pod(pod)
        for handler in self._handlers:
            handler.pod_seen(obj)
        if done_with:
            # berth decides about pods waiting for a node: what it kept about this one is done with.
            self.pod_states.forget(pod.uid, pod.key)
        if held is not None and held.node_name and not held.terminal:
            for handler in self._handlers:
                handler.pod_left(held)

    def _holds_pod(self, key: str, obj: dict[str, Any]) -> bool:
        """The view holds this pod as stored at this resourceVersion (a relist's pod unchanged since
        the watch showed it: converting it again would give the record the view holds)."""
        pod = self.view.pod(key)
        if pod is None or not pod.version:
            return False
        meta = obj.get("metadata") or {}
        return pod.version == meta.get("resourceVersion") and pod.uid == meta.get("uid")

    def _delete_pod(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if ann.REBALANCE_TARGET in (meta.get("annotations") or {}):
            # Deleted at once (no grace period): the watch never showed it going.
            with contextlib.suppress(BerthError):
                self.view.planned.note(
                    msgspec.structs.replace(pod_from_k8s(obj, record=False, memo=True), deleting=True)
                )
        uid = meta.get("uid")
        if uid:
            self._reserved.pop(uid, None)
            self._gone[uid] = time.monotonic()
            self._gone.move_to_end(uid)
            self.let_go_of_gone()
        key = meta_key(obj)
        self.pod_states.forget(uid or "", key)
        if uid:
            forget_pod(uid)
        gone = self.view.remove_pod(key)
        if gone is not None and gone.node_name:
            for handler in self._handlers:
                handler.pod_left(gone)

    def _forget_pod(self, key: str) -> None:
        """A relist no longer lists the pod: it was deleted while the watch was down. A pod berth has
        reserved stays until the API server, asked about the reservation, says it is gone."""
        pod = self.view.pod(key)
        if pod is not None and not (pod.uid and pod.uid in self._reserved):
            self.pod_states.forget(pod.uid, key)
            forget_pod(pod.uid)
            self.view.remove_pod(key)

    def remembered_gone(self) -> int:
        """How many uids of deleted pods the cache still keeps."""
        return len(self._gone)

    def let_go_of_gone(self) -> None:
        """Forget the uids of pods deleted more than GONE_SECONDS ago (or beyond GONE_REMEMBERED)."""
        gone, since = self._gone, time.monotonic() - GONE_SECONDS
        while gone and (len(gone) > GONE_REMEMBERED or next(iter(gone.values())) < since):
            gone.popitem(last=False)

    # -- berth's own placements ---------------------------------------------------------------
    def reserve(self, pod: Pod, node: str) -> None:
        """Count the pod on `node` at once, before the binding is seen, so the next pod of a burst
        sees it. Nothing changes when the watch has already shown the pod bound: the watch's event and
        the bind's answer race, and what the API server stored is never overridden by a reservation."""
        if pod.uid and pod.uid in self._gone:
            return  # deleted before the bind's answer came back
        current = self.view.pod(pod.key)
        if (
            current is not None
            and current.node_name
            and current.same_pod(pod)
            and (not pod.uid or pod.uid not in self._reserved)
        ):
            if current.node_name != node:
                log.warning("%s: bound to %s, not %s as reserved", pod.key, current.node_name, node)
            return
        if pod.uid:
            self._reserved[pod.uid] = Reservation(node, pod.key, time.monotonic() + self.reservation_seconds)
        base = current if current is not None and current.same_pod(pod) else pod
        self.view.add_pod(msgspec.structs.replace(base, node_name=node))

    def release(self, pod: Pod) -> None:
        """Undo a reservation: the binding surely did not happen. A binding the watch has shown stays."""
        reserved = self._reserved.pop(pod.uid, None) if pod.uid else None
        if reserved is None and pod.uid:
            return
        current = self.view.pod(pod.key)
        if current is not None and current.same_pod(pod):
            self.view.add_pod(msgspec.structs.replace(current, node_name=""))

    # -- reservations the watch does not confirm ----------------------------------------------
    async def _verify_loop(self) -> None:
        while True:
            await asyncio.sleep(self.verify_every)
            self.let_go_of_gone()
            try:
                await self.verify_reservations()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the loop die; the next round asks again
                log.warning("checking reservations failed: %s: %s", type(exc).__name__, exc)

    async def verify_reservations(self) -> None:
        """Ask the API server about each reservation older than `reservation_seconds`: bound, it is
        applied as the watch would; not bound or gone, it is undone; no answer, it stays and is asked
        about again next round (counting a pod too many is safe, counting one too few is not)."""
        now = time.monotonic()
        due = [(uid, r) for uid, r in self._reserved.items() if now > r.deadline]
        for uid, reservation in due:
            namespace, _, name = reservation.key.partition("/")
            try:
                obj: dict[str, Any] | None = await self.client.get(
                    f"/api/v1/namespaces/{namespace}/pods/{name}"
                )
            except ApiError as exc:
                if exc.status != 404:
                    log.info(
                        "reservation of %s on %s kept: %s", reservation.key, reservation.node, exc.message
                    )
                    continue
                obj = None
            if self._reserved.get(uid) is not reservation:
                continue  # the watch (or a bind) settled it while the API server answered
            del self._reserved[uid]
            if obj is not None and ((obj.get("metadata") or {}).get("uid")) == uid:
                if (obj.get("spec") or {}).get("nodeName"):
                    self._apply_pod(obj)  # bound: the API server confirms what the watch has not shown yet
                    continue
                # The API server's word: not bound. The pod counts on no node until it is.
                self.release_view(reservation.key, uid)
                log.info("reservation of %s on %s undone: not bound", reservation.key, reservation.node)
                continue
            # Gone, or replaced by another pod of the same name.
            current = self.view.pod(reservation.key)
            if current is not None and current.uid == uid:
                self.view.remove_pod(reservation.key)
            log.info("reservation of %s on %s undone: the pod is gone", reservation.key, reservation.node)

    def release_view(self, key: str, uid: str) -> None:
        current = self.view.pod(key)
        if current is not None and current.uid == uid and current.node_name:
            self.view.add_pod(msgspec.structs.replace(current, node_name=""))


async def fetch_snapshot(creds: Credentials) -> Snapshot:
    """The cluster as it is now, read once (for `berth simulate --live`); writes nothing."""
    client = KubeClient(creds)
    try:
        view = ClusterView()
        nodes, _ = await client.list_pages("/api/v1/nodes")
        pods, _ = await client.list_pages(
            "/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
        )
        try:
            policies, _ = await client.list_pages("/apis/berth.dev/v1alpha1/placementpolicies")
        except ApiError as exc:
            if exc.status != 404:
                raise
            policies = []
        for obj in nodes:
            view.upsert_node(node_from_k8s(obj))
        for obj in pods:
            view.add_pod(pod_from_k8s(obj))
        for obj in policies:
            view.upsert_policy(obj)
        for kind, _, path in WORKLOADS:
            try:
                objects, _ = await client.list_pages(path)
            except ApiError as exc:  # not allowed to read them: kube's default spreading by workload is lost
                if exc.status not in (403, 404):
                    raise
                log.warning("cannot list %s (%s): kube's default spreading leaves them out", path, exc.status)
                continue
            for obj in objects:
                view.upsert_workload(obj, kind)
        return Snapshot(view=view, policies=policies, source="live")
    finally:
        await client.aclose()
