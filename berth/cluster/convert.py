"""Kubernetes objects (as decoded JSON or YAML) to berth's compact records.

Both the snapshot loader and the live cache call these, so a pod means the same thing offline and live.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from functools import lru_cache
from typing import Any

from berth import annotations as ann
from berth.cluster.model import Node, Pod, Taint, Toleration
from berth.cluster.quantity import resource_units
from berth.errors import SnapshotError
from berth.vocab.tags import read_neighbour_tags


def _berth_annotations(meta: dict[str, Any], source: str) -> dict[str, str]:
    out = {}
    for key, value in (meta.get("annotations") or {}).items():
        if not key.startswith(ann.PREFIX):
            continue
        if not isinstance(value, str):
            # The API server only stores strings; in a YAML file the JSON must be quoted.
            raise SnapshotError(
                f"annotation {key}: value must be a string (quote the JSON in YAML)", source=source
            )
        out[key] = value
    return out


def _resources(raw: dict[str, Any] | None, source: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = resource_units(name, value)
        except ValueError as exc:
            raise SnapshotError(f"resource {name}: {exc}", source=source) from exc
    return out


def node_from_k8s(obj: dict[str, Any]) -> Node:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise SnapshotError("a Node without metadata.name", source="Node")
    source = f"Node {name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = dict(meta.get("labels") or {})
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return Node(
        name=name,
        uid=meta.get("uid", ""),
        labels=labels,
        annotations=_berth_annotations(meta, source),
        tags=frozenset(k[len(ann.NODE_TAG_PREFIX) :] for k in labels if k.startswith(ann.NODE_TAG_PREFIX)),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=tuple(
            Taint(key=t.get("key", ""), value=t.get("value", "") or "", effect=t.get("effect", ""))
            for t in spec.get("taints") or []
        ),
        allocatable=_resources(status.get("allocatable") or status.get("capacity"), source),
        capacity=_resources(status.get("capacity") or status.get("allocatable"), source),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion", ""),
    )


def _sum(containers: list[dict[str, Any]], field: str, source: str, fallback: str | None = None) -> Counter:
    total: Counter = Counter()
    for c in containers:
        res = c.get("resources") or {}
        values = dict(res.get(fallback) or {}) if fallback else {}
        values.update(res.get(field) or {})
        total.update(_resources(values, source))
    return total


def pod_requests(spec: dict[str, Any], source: str) -> tuple[dict[str, int], dict[str, int]]:
    """(requests as kube-scheduler counts them, limits as the allocator counts them).

    Requests: the sum over containers and restartable (sidecar) init containers, or the largest
    ordinary init container if that is more, plus the pod overhead. Limits: per container its limit,
    its request where it sets no limit, summed.
    """
    containers = list(spec.get("containers") or [])
    inits = list(spec.get("initContainers") or [])
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    ordinary = [c for c in inits if c.get("restartPolicy") != "Always"]
    overhead = Counter(_resources(spec.get("overhead"), source))

    requests = _sum(containers + sidecars, "requests", source)
    for init in ordinary:
        for name, value in _sum([init], "requests", source).items():
            requests[name] = max(requests[name], value)
    requests.update(overhead)

    limits = _sum(containers + sidecars, "limits", source, fallback="requests")
    for init in ordinary:
        for name, value in _sum([init], "limits", source, fallback="requests").items():
            limits[name] = max(limits[name], value)
    limits.update(overhead)
    return dict(requests), dict(limits)


def _word(value: Any) -> Any:
    """Namespaces, node names and phases repeat across thousands of pods: keep one copy of each."""
    return sys.intern(value) if type(value) is str else value


def _shared(mapping: dict[str, Any]) -> dict[str, Any]:
    """One dict for every pod with these items: a cache of 150k pods repeats a few label sets and
    resource shapes, and each pod's own copy would cost more than the rest of its record. Records
    are never changed in place."""
    try:
        return _shared_items(tuple(mapping.items()))
    except (TypeError, AttributeError):  # not hashable or not a mapping (malformed): a copy of its own
        return dict(mapping)


@lru_cache(maxsize=8192)
def _shared_items(items: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return dict(items)


def pod_from_k8s(obj: dict[str, Any], *, default_namespace: str = "default", record: bool = True) -> Pod:
    """A pod as berth reads it; `record=False` leaves out its placement record (the live cache, which
    never reads it, keeps memory per pod small and annotation maps shared)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    if not name:
        raise SnapshotError("a Pod without metadata.name", source="Pod")
    namespace = meta.get("namespace") or default_namespace
    source = f"Pod {namespace}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    annotations = _berth_annotations(meta, source)
    placement = annotations.pop(ann.PLACEMENT_RECORD, "")
    requests, limits = pod_requests(spec, source)
    node_affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return Pod(
        namespace=_word(namespace),
        name=name,
        uid=meta.get("uid", ""),
        labels=_shared(meta.get("labels") or {}),
        annotations=_shared(annotations),
        node_name=_word(spec.get("nodeName") or ""),
        phase=_word(status.get("phase") or "Pending"),
        scheduler_name=_word(spec.get("schedulerName") or "default-scheduler"),
        tags=read_neighbour_tags(annotations.get(ann.TAGS)),
        requests=_shared(requests),
        limits=_shared(limits),
        node_selector=_shared(spec.get("nodeSelector") or {}),
        tolerations=tuple(
            Toleration(
                key=t.get("key", "") or "",
                operator=t.get("operator", "Equal") or "Equal",
                value=t.get("value", "") or "",
                effect=t.get("effect", "") or "",
            )
            for t in spec.get("tolerations") or []
        ),
        required_node_affinity=node_affinity or None,
        creation=meta.get("creationTimestamp", "") or "",
        record=placement if record else "",
    )


WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController")


def pod_template(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The Pod a manifest describes: the Pod itself, or a workload's pod template (namespace and a
    name taken from the workload), or None for any other kind."""
    kind = obj.get("kind")
    if kind == "Pod":
        return obj
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    elif kind not in WORKLOAD_KINDS:
        return None
    template = spec.get("template") or {}
    meta = dict(template.get("metadata") or {})
    owner = obj.get("metadata") or {}
    meta.setdefault("namespace", owner.get("namespace", "default"))
    meta.setdefault("name", f"{owner.get('name', 'pod')}-0")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


REPLICATED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController")


def replicas_of(obj: dict[str, Any]) -> int | None:
    """How many pods a workload runs at once: `spec.replicas` of a Deployment, ReplicaSet,
    StatefulSet or ReplicationController (default 1), a Job's `parallelism` (default 1, at most its
    `completions`), a CronJob's job's; None for a Pod and any other kind."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        kind, spec = "Job", ((spec.get("jobTemplate") or {}).get("spec")) or {}
    if kind in REPLICATED_KINDS:
        return _count(spec, "replicas", obj)
    if kind == "Job":
        parallel = _count(spec, "parallelism", obj)
        completions = spec.get("completions")
        return parallel if completions is None else min(parallel, _count(spec, "completions", obj))
    return None


def _count(spec: dict[str, Any], field: str, obj: dict[str, Any]) -> int:
    value = spec.get(field, 1)
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        name = (obj.get("metadata") or {}).get("name", "")
        raise SnapshotError(
            f"spec.{field} should be a whole number of at least 0, found {value!r}",
            source=f"{obj.get('kind')} {name}",
        )
    return value


def replica_pods(obj: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """`count` pods of the object's template named `<name>-0`...`<name>-<count-1>` as a StatefulSet
    names them, each with its own uid, so that each is a distinct neighbour of the next."""
    template = pod_template(obj)
    if template is None:
        return []
    meta = template.get("metadata") or {}
    base = (obj.get("metadata") or {}).get("name") or meta.get("name") or "pod"
    namespace = meta.get("namespace") or "default"
    pods = []
    for i in range(count):
        name = f"{base}-{i}"
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"berth-simulate/{namespace}/{name}"))
        pods.append({**template, "metadata": {**meta, "name": name, "namespace": namespace, "uid": uid}})
    return pods
