"""Kubernetes objects (as decoded JSON or YAML) to berth's compact records.

Both the snapshot loader and the live cache call these, so a pod means the same thing offline and live.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from functools import lru_cache
from typing import Any

import msgspec
import orjson

from berth import annotations as ann
from berth.cluster import placement_record
from berth.cluster.model import (
    AffinityTerm,
    HostPort,
    Node,
    Pod,
    PodAffinity,
    SpreadConstraint,
    Taint,
    Toleration,
    WeightedTerm,
)
from berth.cluster.quantity import resource_units
from berth.cluster.selectors import Selector, parse_selector
from berth.cluster.tags import read_neighbour_tags
from berth.errors import SnapshotError


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


def _text(value: Any, field: str, source: str) -> Any:
    """A metadata string (a name, a namespace) as the API server only stores it."""
    if value is not None and type(value) is not str:
        raise SnapshotError(f"{field}: should be a string", source=source)
    return value


def _labels(meta: dict[str, Any], source: str) -> dict[str, str]:
    """metadata.labels, a map of strings to strings as the API server only stores it: the indexes
    would otherwise meet a list where a value should be (in a YAML file, `version: 1.0` is a number)."""
    labels = meta.get("labels") or {}
    _strings(labels, "metadata.labels", source)
    return labels


def _strings(value: Any, field: str, source: str) -> None:
    if type(value) is not dict or not all(type(k) is str and type(v) is str for k, v in value.items()):
        raise SnapshotError(f"{field}: should map strings to strings (quote numbers in YAML)", source=source)


def _selector_term(term: Any, field: str, source: str) -> None:
    """A NodeSelectorTerm in the shape kube's NodeAffinity reads (the API server's validation of it)."""
    if type(term) is not dict:
        raise SnapshotError(f"{field}: should be a node selector term (an object)", source=source)
    for part in ("matchExpressions", "matchFields"):
        requirements = term.get(part) or []
        if type(requirements) is not list:
            raise SnapshotError(f"{field}.{part}: should be a list", source=source)
        for i, req in enumerate(requirements):
            where = f"{field}.{part}[{i}]"
            if (
                type(req) is not dict
                or type(req.get("key", "")) is not str
                or type(req.get("operator", "")) is not str
            ):
                raise SnapshotError(
                    f"{where}: should be an object with a string key and operator", source=source
                )
            values = req.get("values") or []
            if type(values) is not list or not all(type(v) is str for v in values):
                raise SnapshotError(f"{where}.values: should be a list of strings", source=source)


def _node_affinity(spec: dict[str, Any], source: str) -> tuple[dict[str, Any] | None, tuple[dict, ...]]:
    """The pod's required node affinity and its preferred terms, checked as the API server would have
    (a file is read as written; the filter and the score read them for every node)."""
    raw = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    base = "spec.affinity.nodeAffinity"
    if type(raw) is not dict:
        raise SnapshotError(f"{base}: should be an object", source=source)
    required = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        field = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = required.get("nodeSelectorTerms") if type(required) is dict else None
        if type(terms) is not list:
            raise SnapshotError(f"{field}.nodeSelectorTerms: should be a list", source=source)
        for i, term in enumerate(terms):
            _selector_term(term, f"{field}.nodeSelectorTerms[{i}]", source)
    preferred = raw.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    field = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    if type(preferred) is not list:
        raise SnapshotError(f"{field}: should be a list", source=source)
    for i, term in enumerate(preferred):
        if type(term) is not dict or type(term.get("weight")) is not int:
            raise SnapshotError(f"{field}[{i}]: should be an object with an integer weight", source=source)
        _selector_term(term.get("preference"), f"{field}[{i}].preference", source)
    return required or None, tuple(preferred)


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
    name = _text(meta.get("name"), "metadata.name", "Node")
    if not name:
        raise SnapshotError("a Node without metadata.name", source="Node")
    source = f"Node {name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = dict(_labels(meta, source))
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return Node(
        name=name,
        uid=_text(meta.get("uid") or "", "metadata.uid", source),
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
        kubelet_version=_text(
            (status.get("nodeInfo") or {}).get("kubeletVersion") or "",
            "status.nodeInfo.kubeletVersion",
            source,
        ),
    )


DEFAULT_CPU = 100  # millicores: kube-scheduler's scoring counts this for a container that requests none
DEFAULT_MEMORY = 200 * 1024 * 1024
NON_ZERO = {"cpu": DEFAULT_CPU, "memory": DEFAULT_MEMORY}


def _container(c: dict[str, Any], field: str, source: str, fallback: str | None = None) -> Counter:
    res = c.get("resources") or {}
    values = dict(res.get(fallback) or {}) if fallback else {}
    values.update(res.get(field) or {})
    return Counter(_resources(values, source))


def _aggregate(spec: dict[str, Any], per_container: Any) -> Counter:
    """kube's AggregateContainerRequests (the sidecar KEP's formula) over `per_container(c)`: the
    containers and the restartable init containers summed; each ordinary init container with the
    restartable ones started before it; the larger of the two per resource."""
    total: Counter = Counter()
    for c in spec.get("containers") or []:
        total.update(per_container(c))
    restartable: Counter = Counter()
    inits: Counter = Counter()
    for c in spec.get("initContainers") or []:
        own = per_container(c)
        if c.get("restartPolicy") == "Always":
            total.update(own)
            restartable.update(own)
            own = Counter(restartable)
        else:
            own = own + restartable if restartable else own
        for name, value in own.items():
            inits[name] = max(inits[name], value)
    for name, value in inits.items():
        total[name] = max(total[name], value)
    return total


def _pod_level(spec: dict[str, Any], totals: Counter, source: str) -> Counter:
    """Pod-level requests of cpu and memory replace the containers' sum; then the overhead."""
    pod_level = _resources((spec.get("resources") or {}).get("requests"), source)
    for name in ("cpu", "memory"):
        if name in pod_level:
            totals[name] = pod_level[name]
    totals.update(_resources(spec.get("overhead"), source))
    return totals


def pod_requests(spec: dict[str, Any], source: str) -> tuple[dict[str, int], dict[str, int]]:
    """(requests as kube-scheduler counts them, limits as the allocator counts them).

    Requests: kube's PodRequests (containers, sidecars and init containers as the sidecar KEP adds
    them up, pod-level requests, the pod overhead), a container's limit standing for a request it
    does not set, as the API server defaults it. Limits: per container its limit, its request where
    it sets no limit, added up the same way, plus the overhead.
    """
    # A container's limit stands for a request it does not set, as the API server defaults it.
    requests = _pod_level(
        spec, _aggregate(spec, lambda c: _container(c, "requests", source, fallback="limits")), source
    )
    limits = _aggregate(spec, lambda c: _container(c, "limits", source, fallback="requests"))
    limits.update(_resources(spec.get("overhead"), source))
    return dict(requests), dict(limits)


def nonzero_requests(spec: dict[str, Any], source: str) -> tuple[int, int]:
    """(cpu millicores, memory bytes) as kube's resource scoring counts the pod: a container that
    requests no cpu or no memory counts 100m or 200 MiB of it."""

    def with_defaults(c: dict[str, Any]) -> Counter:
        own = _container(c, "requests", source, fallback="limits")
        resources = c.get("resources") or {}
        declared = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in NON_ZERO.items():
            if name not in declared:
                own[name] += value
        return own

    totals = _pod_level(spec, _aggregate(spec, with_defaults), source)
    return totals.get("cpu", 0), totals.get("memory", 0)


ResourceFields = tuple[dict[str, int], dict[str, int], int, int]
# The resource fields of the last distinct resource shapes: a workload's pods ask the same, and adding
# them up (quantities parsed, containers and init containers summed) was most of a new pod's conversion.
RESOURCE_SHAPES_KEPT = 1024
_resource_shapes: dict[tuple, ResourceFields] = {}


def _resource_fields(spec: dict[str, Any], source: str) -> ResourceFields:
    """(requests, limits, nonzero cpu, nonzero memory) of a pod's spec (pod_requests,
    nonzero_requests), the maps shared: kept by what they are made from. A spec that fails is never
    kept, so its error names its own pod."""
    try:
        key = _resource_key(spec)
        kept = _resource_shapes.get(key)
    except (TypeError, AttributeError):  # malformed: worked out, and its error raised, below
        key, kept = None, None
    if kept is not None:
        return kept
    requests, limits = pod_requests(spec, source)
    fields = (_shared(requests), _shared(limits), *nonzero_requests(spec, source))
    if key is not None:
        if len(_resource_shapes) >= RESOURCE_SHAPES_KEPT:
            _resource_shapes.clear()
        _resource_shapes[key] = fields
    return fields


def _resource_key(spec: dict[str, Any]) -> tuple:
    """Everything of a spec that its requests and limits are made from, hashable."""

    def containers(field: str) -> tuple:
        return tuple(
            (c.get("restartPolicy"), _items(res.get("requests")), _items(res.get("limits")))
            for c in spec.get(field) or ()
            for res in (c.get("resources") or {},)
        )

    return (
        containers("containers"),
        containers("initContainers"),
        _items((spec.get("resources") or {}).get("requests")),
        _items(spec.get("overhead")),
    )


def _items(mapping: dict[str, Any] | None) -> tuple:
    if not mapping:
        return ()
    items = tuple(mapping.items())
    if not all(type(v) is str for _, v in items):  # quantities as the API server writes them only:
        raise TypeError("not kept")  # 1, 1.0 and true would be one key
    return items


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


def _one(value: Any) -> Any:
    """The first value equal to this one (an immutable value): the tolerations and the owner of a
    workload's pods are the same for all of them, and per pod they cost more than its name."""
    try:
        return _first(value)
    except TypeError:  # not hashable (a malformed file): its own
        return value


@lru_cache(maxsize=8192)
def _first(value: Any) -> Any:
    return value


def _term(raw: Any, field: str, namespace: str, labels: dict[str, str]) -> AffinityTerm:
    if not isinstance(raw, dict):
        raise ValueError(f"{field}: should be a pod affinity term (an object)")
    selector, problems = parse_selector(raw.get("labelSelector"), f"{field}.labelSelector")
    ns_selector: Selector | None = None
    if raw.get("namespaceSelector") is not None:
        ns_selector, more = parse_selector(raw.get("namespaceSelector"), f"{field}.namespaceSelector")
        problems += more
    topology = raw.get("topologyKey")
    if not isinstance(topology, str) or not topology:
        problems.append(f"{field}.topologyKey: is required")
    if problems:
        raise ValueError(problems[0])
    assert isinstance(topology, str)  # a problem above otherwise
    # As the API server does: matchLabelKeys add `key In (the pod's value)`, mismatchLabelKeys
    # `key NotIn (the pod's value)`, for the keys the pod carries (nothing with no labelSelector).
    if raw.get("labelSelector") is not None:
        merged = tuple(
            (key, op, frozenset((labels[key],)))
            for keys, op in ((raw.get("matchLabelKeys"), "In"), (raw.get("mismatchLabelKeys"), "NotIn"))
            for key in keys or ()
            if key in labels
        )
        selector = selector.with_expressions(merged)
    names = frozenset(raw.get("namespaces") or ())
    if not names and ns_selector is None:
        names = frozenset((namespace,))
    return AffinityTerm(selector, topology, names, ns_selector)


def _weighted(raw: Any, field: str, namespace: str, labels: dict[str, str]) -> WeightedTerm:
    if not isinstance(raw, dict) or not isinstance(raw.get("weight"), int):
        raise ValueError(f"{field}: should be an object with weight and podAffinityTerm")
    return WeightedTerm(
        raw["weight"], _term(raw.get("podAffinityTerm"), f"{field}.podAffinityTerm", namespace, labels)
    )


@lru_cache(maxsize=4096)
def _compiled_affinity(raw: bytes, namespace: str, labels: tuple[tuple[str, str], ...]) -> PodAffinity | None:
    """A pod's pod (anti-)affinity, compiled once for every pod with the same one."""
    affinity = orjson.loads(raw)
    on = {k: v for k, v in labels}
    parts: dict[str, Any] = {}
    for kind, short in (("podAffinity", ""), ("podAntiAffinity", "_anti")):
        section = affinity.get(kind) or {}
        base = f"spec.affinity.{kind}"
        required = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = section.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        parts[f"required{short}"] = tuple(
            _term(t, f"{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", namespace, on)
            for i, t in enumerate(required)
        )
        parts[f"preferred{short}"] = tuple(
            _weighted(t, f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]", namespace, on)
            for i, t in enumerate(preferred)
            if isinstance(t, dict) and t.get("weight") != 0
        )
    compiled = PodAffinity(**parts)
    return compiled if any(parts.values()) else None


def _pod_affinity(spec: dict[str, Any], namespace: str, labels: dict[str, str]) -> PodAffinity | None:
    affinity = spec.get("affinity") or {}
    wanted = {k: affinity[k] for k in ("podAffinity", "podAntiAffinity") if affinity.get(k)}
    if not wanted:
        return None
    raw = orjson.dumps(wanted, option=orjson.OPT_SORT_KEYS)
    # Only label keys a term names can change the compiled terms.
    keyed = b"LabelKeys" in raw
    return _compiled_affinity(raw, namespace, tuple(sorted(labels.items())) if keyed else ())


def _spread(spec: dict[str, Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, raw in enumerate(spec.get("topologySpreadConstraints") or []):
        field = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{field}: should be an object")
        selector, problems = parse_selector(raw.get("labelSelector"), f"{field}.labelSelector")
        skew, key, action = raw.get("maxSkew"), raw.get("topologyKey"), raw.get("whenUnsatisfiable")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew < 1:
            problems.append(f"{field}.maxSkew: should be a whole number of at least 1")
        if not isinstance(key, str) or not key:
            problems.append(f"{field}.topologyKey: is required")
        if action not in ("DoNotSchedule", "ScheduleAnyway"):
            problems.append(f"{field}.whenUnsatisfiable: should be DoNotSchedule or ScheduleAnyway")
        domains = raw.get("minDomains")
        if domains is not None and (not isinstance(domains, int) or isinstance(domains, bool) or domains < 1):
            problems.append(f"{field}.minDomains: should be a whole number of at least 1")
        policies = {}
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            value = raw.get(name)
            if value is not None and value not in ("Honor", "Ignore"):
                problems.append(f"{field}.{name}: should be Honor or Ignore")
            policies[name] = value
        if problems:
            raise ValueError(problems[0])
        assert isinstance(skew, int) and isinstance(key, str) and isinstance(action, str)  # as checked
        match = {k: labels[k] for k in raw.get("matchLabelKeys") or () if k in labels}
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                when_unsatisfiable=action,
                selector=selector.with_labels(match),
                min_domains=domains or 1,
                node_affinity_policy=policies["nodeAffinityPolicy"] or "Honor",
                node_taints_policy=policies["nodeTaintsPolicy"] or "Ignore",
            )
        )
    return tuple(out)


def _host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    """The host ports of the containers and restartable init containers (kube's NodePorts)."""
    containers = list(spec.get("containers") or [])
    containers += [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    ports = []
    for c in containers:
        for port in c.get("ports") or []:
            host = port.get("hostPort") or 0
            if isinstance(host, int) and host > 0:
                ports.append(HostPort(host, port.get("protocol") or "TCP", port.get("hostIP") or "0.0.0.0"))
    return tuple(ports)


def _unmodelled(spec: dict[str, Any]) -> tuple[str, ...]:
    """What kube-scheduler would check for the pod that berth's model of its filters leaves out."""
    out = []
    volumes = spec.get("volumes") or []
    if any(isinstance(v, dict) and (v.get("persistentVolumeClaim") or v.get("ephemeral")) for v in volumes):
        out.append("VolumeBinding, VolumeZone and NodeVolumeLimits (the pod's PersistentVolumeClaims)")
    if spec.get("resourceClaims"):
        out.append("DynamicResources (the pod's resource claims)")
    return tuple(out)


def _controller_uid(meta: dict[str, Any]) -> str:
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") and type(uid := ref.get("uid")) is str:
            return uid
    return ""


def _controller(meta: dict[str, Any]) -> tuple[str, str] | None:
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return (_word(ref.get("kind") or ""), ref.get("name") or "")
    return None


class SpecMemo:
    """What a pod's record takes from its spec, labels and namespace, kept for the pods converted
    last, by uid.

    `berth serve` converts a pod at each watch event about it (created, bound, started by its
    kubelet) and at each call of the scheduler about it, and between them its spec and labels do not
    change: the binding sets spec.nodeName, the kubelet writes status. Comparing the spec with the
    one converted before reads it once; converting it again (the requests summed, the affinity,
    spread and tolerations parsed and checked) costs several times that, the more so with the
    processor's caches cold, as they are in a live extender between two calls. Only for objects from
    the API server: it has checked their types, and JSON's 1 == 1.0 == true would otherwise let a
    malformed file pass for a valid one converted before. Two generations of `size` pods each, so
    that the pods in flight are kept without a bound on one dict's order; each entry holds a
    shallow copy of the spec (its nested objects shared with the decoded pod), a few kilobytes."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.new: dict[str, tuple[str, Any, dict[str, Any], dict[str, Any]]] = {}
        self.old: dict[str, tuple[str, Any, dict[str, Any], dict[str, Any]]] = {}
        # by the uid of the workload's controller: one pod of each (its spec kept alive with it)
        self.templates: dict[str, tuple[str, Any, dict[str, Any], dict[str, Any]]] = {}

    def get(
        self, uid: str, namespace: str, labels: Any, spec: dict[str, Any], owner: str = ""
    ) -> dict[str, Any] | None:
        """The fields kept for this pod when its namespace, labels and spec (but spec.nodeName) are
        those converted before, for this pod or (`owner`: its controller's uid) for a pod of the same
        workload; None otherwise."""
        held = self.new.get(uid) or self.old.get(uid)
        if held is None and owner:
            held = self.templates.get(owner)
        if held is None:
            return None
        held_namespace, held_labels, held_spec, fields = held
        if held_namespace != namespace or held_labels != labels:
            return None
        if len(held_spec) != len(spec) - ("nodeName" in spec):
            return None
        missing = _MISSING
        for key, value in held_spec.items():
            if spec.get(key, missing) != value:
                return None
        return fields

    def put_template(
        self, owner: str, namespace: str, labels: Any, spec: dict[str, Any], fields: dict[str, Any]
    ) -> None:
        """Keep the fields for the other pods of the workload whose controller has uid `owner`: a list
        of a running cluster converts each of a ReplicaSet's pods from the same spec and labels."""
        if len(self.templates) >= self.size:
            self.templates.clear()
        kept = {key: value for key, value in spec.items() if key != "nodeName"}
        self.templates[owner] = (namespace, labels, kept, fields)

    def forget(self, uid: str) -> None:
        self.new.pop(uid, None)
        self.old.pop(uid, None)

    def put(
        self, uid: str, namespace: str, labels: Any, spec: dict[str, Any], fields: dict[str, Any]
    ) -> None:
        if len(self.new) >= self.size:
            self.old, self.new = self.new, {}
        kept = {key: value for key, value in spec.items() if key != "nodeName"}
        self.new[uid] = (namespace, labels, kept, fields)


_MISSING = object()
SPEC_MEMO = SpecMemo()


class VersionMemo:
    """The pods waiting for a node as they were converted last, by uid, with their resourceVersion.

    kube-scheduler sends the pod it asks about with every filter call: its informer's copy of the
    object the API server stored at that resourceVersion, which `berth serve`'s watch converted
    already when it was created or changed. The API server gives every change a new resourceVersion,
    so the same uid at the same resourceVersion is the same object: the record is taken from here and
    nothing of the call's pod is read but those two fields (decoding the whole pod into Python objects
    and comparing its spec with SpecMemo's was about a tenth of a cold filter). Only pods without
    spec.nodeName are kept, the ones a scheduler asks about; two generations of `size` each."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.new: dict[str, tuple[str, Pod, str]] = {}
        self.old: dict[str, tuple[str, Pod, str]] = {}

    def get(self, uid: str, version: str) -> tuple[Pod, str] | None:
        """The record converted from this uid at this resourceVersion, and its placement annotation
        (the record may have been made without it); None when that version was not converted."""
        held = self.new.get(uid) or self.old.get(uid)
        if held is None or held[0] != version:
            return None
        return held[1], held[2]

    def forget(self, uid: str) -> None:
        self.new.pop(uid, None)
        self.old.pop(uid, None)

    def put(self, uid: str, version: str, pod: Pod, placement: str) -> None:
        if len(self.new) >= self.size:
            self.old, self.new = self.new, {}
        self.new[uid] = (version, pod, placement)


VERSION_MEMO = VersionMemo()


def forget_pod(uid: str) -> None:
    """The pod is gone: its conversions are not kept for later events (there are none)."""
    SPEC_MEMO.forget(uid)
    VERSION_MEMO.forget(uid)


class _Meta(msgspec.Struct, rename="camel"):
    uid: Any = None
    resource_version: Any = None


class _Versioned(msgspec.Struct):
    """Of a pod's JSON, the two fields that say which version of which pod it is; msgspec passes
    over the rest without making a Python object of it."""

    metadata: _Meta | None = None


_VERSIONED: msgspec.json.Decoder[_Versioned] = msgspec.json.Decoder(_Versioned)
_OBJECT: msgspec.json.Decoder[dict[str, Any]] = msgspec.json.Decoder(dict[str, Any])


def watched_pod(raw: bytes | msgspec.Raw, *, record: bool = True) -> Pod | None:
    """The record converted from the same uid at the same resourceVersion as this JSON's (VersionMemo),
    reading nothing else of it; None when that version was not converted."""
    try:
        meta = _VERSIONED.decode(raw).metadata
    except msgspec.ValidationError:  # a metadata that is not an object: the conversion says what
        return None
    if meta is None or type(meta.uid) is not str or type(meta.resource_version) is not str:
        return None
    held = VERSION_MEMO.get(meta.uid, meta.resource_version)
    if held is None:
        return None
    pod, placement = held
    wanted = placement if record else ""
    return pod if pod.record == wanted else msgspec.structs.replace(pod, record=wanted)


def decoded_pod(raw: bytes | msgspec.Raw, *, record: bool = True) -> Pod:
    """The pod of this JSON decoded and converted (pod_from_k8s with memo=True)."""
    return pod_from_k8s(_OBJECT.decode(raw), record=record, memo=True)


def _from_spec(spec: dict[str, Any], meta: dict[str, Any], namespace: str, source: str) -> dict[str, Any]:
    """The fields of a pod's record made from its spec, labels and namespace (all but spec.nodeName)."""
    requests, limits, nonzero_cpu, nonzero_memory = _resource_fields(spec, source)
    node_affinity, preferred_node_affinity = _node_affinity(spec, source)
    node_selector = spec.get("nodeSelector") or {}
    _strings(node_selector, "spec.nodeSelector", source)
    labels = _labels(meta, source)
    try:
        affinity = _pod_affinity(spec, namespace, labels)
        spread = _spread(spec, labels)
    except ValueError as exc:
        raise SnapshotError(str(exc), source=source) from exc
    return {
        "labels": _shared(labels),
        "scheduler_name": _word(
            _text(spec.get("schedulerName") or "default-scheduler", "spec.schedulerName", source)
        ),
        "requests": requests,
        "limits": limits,
        "node_selector": _shared(node_selector),
        "tolerations": _one(
            tuple(
                Toleration(
                    key=t.get("key", "") or "",
                    operator=t.get("operator", "Equal") or "Equal",
                    value=t.get("value", "") or "",
                    effect=t.get("effect", "") or "",
                )
                for t in spec.get("tolerations") or []
            )
        ),
        "required_node_affinity": node_affinity,
        "preferred_node_affinity": preferred_node_affinity,
        "affinity": affinity,
        "spread": spread,
        "host_ports": _host_ports(spec),
        "nonzero_cpu": nonzero_cpu,
        "nonzero_memory": nonzero_memory,
        "unmodelled": _unmodelled(spec),
        "priority": priority if isinstance(priority := spec.get("priority"), int) else 0,
        "priority_class": _word(_text(spec.get("priorityClassName") or "", "spec.priorityClassName", source)),
        "preempts": spec.get("preemptionPolicy") != "Never",
    }


def pod_from_k8s(
    obj: dict[str, Any], *, default_namespace: str = "default", record: bool = True, memo: bool = False
) -> Pod:
    """A pod as berth reads it; `record=False` leaves out its placement record (the live cache, which
    never reads it, keeps memory per pod small and annotation maps shared). `memo=True`, for objects
    from the API server only: what the pod's spec gives is reused from its last conversion when its
    spec, labels and namespace are the same (SpecMemo)."""
    meta = obj.get("metadata") or {}
    name = _text(meta.get("name") or meta.get("generateName"), "metadata.name", "Pod") or ""
    if not name:
        raise SnapshotError("a Pod without metadata.name", source="Pod")
    namespace = _text(meta.get("namespace"), "metadata.namespace", f"Pod {name}") or default_namespace
    source = f"Pod {namespace}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    annotations = _berth_annotations(meta, source)
    placement = placement_record.strip(annotations)
    uid = meta.get("uid") or ""
    keyed = memo and type(uid) is str and bool(uid)
    owner = _controller_uid(meta) if keyed else ""
    fields = SPEC_MEMO.get(uid, namespace, meta.get("labels"), spec, owner) if keyed else None
    if fields is None:
        fields = _from_spec(spec, meta, namespace, source)
        if owner:
            SPEC_MEMO.put_template(owner, namespace, meta.get("labels"), spec, fields)
        # Kept for a pod waiting for a node, whose next events (bound, started) and the scheduler's
        # calls convert it again; not for one bound already (a list of a running cluster would keep
        # the decoded specs of 8192 pods alive through the memo's shallow copies, 50 MiB).
        if keyed and not spec.get("nodeName"):
            SPEC_MEMO.put(uid, namespace, meta.get("labels"), spec, fields)
    pod = Pod(
        namespace=_word(namespace),
        name=name,
        uid=_text(uid, "metadata.uid", source),
        annotations=_shared(annotations),
        node_name=_word(_text(spec.get("nodeName") or "", "spec.nodeName", source)),
        phase=_word(_text(status.get("phase") or "Pending", "status.phase", source)),
        tags=read_neighbour_tags(annotations.get(ann.TAGS)),
        controller=_one(_controller(meta)),
        deleting=bool(meta.get("deletionTimestamp")),
        nominated_node=_word(
            _text(status.get("nominatedNodeName") or "", "status.nominatedNodeName", source)
        ),
        start_time=status.get("startTime") or "",
        creation=meta.get("creationTimestamp", "") or "",
        record=placement if record else "",
        version=version if type(version := meta.get("resourceVersion")) is str else "",
        **fields,
    )
    if keyed and not pod.node_name and version:
        VERSION_MEMO.put(uid, version, pod, placement)
    return pod


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
    # the replicas are named and placed after it (and kube's spreading reads it as their controller)
    _text(owner.get("name"), "metadata.name", str(kind))
    _text(owner.get("namespace"), "metadata.namespace", str(kind))
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


# The controller that owns a workload's pods, as kube's default spreading reads it: a Deployment's
# pods belong to its ReplicaSet, the other kinds own their pods themselves.
OWNING_KIND = {
    "Deployment": "ReplicaSet",
    "ReplicaSet": "ReplicaSet",
    "StatefulSet": "StatefulSet",
    "ReplicationController": "ReplicationController",
}


def replica_owner(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The controller a workload's pods would have (its ReplicaSet for a Deployment), with the
    workload's selector, as an object the cluster view reads (ClusterView.upsert_workload); None for
    kinds whose pods kube does not spread by their controller (Job, DaemonSet)."""
    kind = OWNING_KIND.get(obj.get("kind") or "")
    if kind is None:
        return None
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    if kind == "ReplicationController":
        selector = selector or template_labels
    elif selector is None:
        selector = {"matchLabels": template_labels}
    return {
        "kind": kind,
        "metadata": {"name": meta.get("name") or "pod", "namespace": meta.get("namespace") or "default"},
        "spec": {"selector": selector},
    }


def replica_pods(obj: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """`count` pods of the object's template named `<name>-0`...`<name>-<count-1>` as a StatefulSet
    names them, each with its own uid, so that each is a distinct neighbour of the next, and owned by
    the workload's controller (replica_owner)."""
    template = pod_template(obj)
    if template is None:
        return []
    meta = template.get("metadata") or {}
    base = (obj.get("metadata") or {}).get("name") or meta.get("name") or "pod"
    namespace = meta.get("namespace") or "default"
    owner = replica_owner(obj)
    refs = [{"kind": owner["kind"], "name": owner["metadata"]["name"], "controller": True}] if owner else None
    pods = []
    for i in range(count):
        name = f"{base}-{i}"
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"berth-simulate/{namespace}/{name}"))
        pod_meta = {**meta, "name": name, "namespace": namespace, "uid": uid}
        if refs:
            pod_meta["ownerReferences"] = refs
        pods.append({**template, "metadata": pod_meta})
    return pods
