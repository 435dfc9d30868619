"""kopf handlers. Each decodes, asks the vocabularies, and encodes: the rules live in berth.vocab.

- PlacementPolicy objects are compiled on resume, create and spec changes; the status gets a Ready
  condition (True, or False with every error and its field path), observedGeneration, the number of
  running pods the policy governs and how many of them it refuses where they are (berth.analysis.audit, on
  a view of the policy's namespace built from the operator's cache of nodes and pods, berth.operator.cache,
  which berth's reflector feeds, not kopf), refreshed as pods and nodes come and go
  (berth.operator.refresh: one loop, not a timer per policy, so kopf puts no finalizer on
  PlacementPolicies and nothing blocks their deletion once the operator is gone).
- Admission: pods and workloads with invalid berth annotations are refused with the 400 text, a
  deprecated weighted affinity, a misspelt berth.dev/ annotation and berth annotations on a workload's
  own metadata (not its pod template) are admitted with a warning kubectl prints; PlacementPolicies
  that do not compile (a RULE_BASED rule that does not return a boolean among them) are refused before
  they are stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf

from berth import annotations as ann
from berth.analysis.audit import PolicyCounts, policy_counts
from berth.analysis.validate_warnings import outside_template_warnings
from berth.cluster.convert import pod_requests, pod_template
from berth.cluster.model import Node, Pod
from berth.cluster.view import ClusterView
from berth.errors import SnapshotError
from berth.operator import policy_requeue, refresh
from berth.operator.cache import OperatorCache
from berth.vocab.alloc.config import DEFAULT_CONFIG, AllocatorConfig
from berth.vocab.pod import check_annotations, compile_pod
from berth.vocab.policy import CompiledPolicy, load_policy

GROUP, VERSION, PLURAL = "berth.dev", "v1alpha1", "placementpolicies"
WORKLOADS = (
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "daemonsets"),
    ("apps", "v1", "replicasets"),
    ("batch", "v1", "jobs"),
    ("batch", "v1", "cronjobs"),
)


# -- what a policy's status says --------------------------------------------------------------------
def ready_condition(
    compiled: CompiledPolicy, generation: int | None, previous: Mapping[str, Any] | None
) -> dict:
    status = "True" if compiled.ready else "False"
    if compiled.ready:
        reason, message = "Compiled", f"{compiled.type} policy compiled"
    else:
        reason, message = "Invalid", "; ".join(compiled.errors)
    unchanged = previous is not None and previous.get("status") == status
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation or 0,
        "lastTransitionTime": previous.get("lastTransitionTime") if unchanged else _now(),
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def policy_view(
    body: Mapping[str, Any], pods: Iterable[Pod], nodes: Mapping[str, Node]
) -> tuple[ClusterView, CompiledPolicy]:
    """A view of the policy's namespace: its pods, the nodes they are on, and the policy compiled. A
    policy counts and is asked about only the pods of its own namespace, so nothing else is needed."""
    view = ClusterView()
    pods = list(pods)
    for name in sorted({p.node_name for p in pods if p.node_name}):
        node = nodes.get(name)
        if node is not None:
            view.upsert_node(node)
    for pod in pods:
        view.add_pod(pod)
    return view, view.upsert_policy(body)


def counts(body: Mapping[str, Any], pods: Iterable[Pod], nodes: Mapping[str, Node]) -> PolicyCounts:
    """The running pods the policy governs and those it refuses where they are, as `berth audit`
    counts them."""
    view, compiled = policy_view(body, pods, nodes)
    return policy_counts(view, compiled, compile_pod)


def stale_counts(
    namespaces: Iterable[str],
    policies: Mapping[str, Iterable[Mapping[str, Any]]],
    pods: Callable[[str], Iterable[Pod]],
    nodes: Mapping[str, Node],
) -> list[tuple[str, str, dict[str, int]]]:
    """(namespace, name, counts) of every policy of `namespaces` whose status counts are out of date;
    `pods`: a namespace's pods."""
    out = []
    for namespace in namespaces:
        for body in policies.get(namespace, ()):
            found = counts(body, pods(namespace), nodes)
            status = body.get("status") or {}
            fresh = {"governedPods": found.governed, "violatingPods": found.violating}
            changed = {k: v for k, v in fresh.items() if status.get(k) != v}
            if changed:
                out.append((namespace, body["metadata"]["name"], changed))
    return out


def _previous_ready(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)


# -- handlers -----------------------------------------------------------------------------------------
# The nodes and pods the counts read (berth.operator.cache), set by berth.operator.run at startup.
_cache: OperatorCache | None = None


def use_cache(cache: OperatorCache | None) -> None:
    global _cache
    _cache = cache


@kopf.index(GROUP, VERSION, PLURAL)
def policies_by_namespace(body: kopf.Body, namespace: str, **_: Any):
    refresh.mark(namespace)
    return {namespace: refresh.policy_record(body)}


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(
    body: kopf.Body,
    meta: kopf.Meta,
    status: kopf.Status,
    namespace: str,
    name: str,
    patch: kopf.Patch,
    reason: str | None = None,
    old: Any = None,
    **_: Any,
) -> None:
    compiled = load_policy(body)
    if compiled.ready:
        # The pods it refused, and those it may refuse no more, are tried again
        # (berth.operator.policy_requeue).
        before = load_policy({**body, "spec": old}).selector if isinstance(old, Mapping) else None
        what = {"create": "created", "update": f"changed (generation {meta.get('generation')})"}.get(
            reason or "", "found Ready when the operator started"
        )
        policy_requeue.note(namespace, name, (compiled.selector, before), what)
    condition = ready_condition(compiled, meta.get("generation"), _previous_ready(status))
    # At the root of status, where kubectl wait and the printer columns read it: a returned value
    # would land under status.reconcile (docs/decisions.md).
    patch.status["conditions"] = [condition]
    patch.status["observedGeneration"] = meta.get("generation") or 0
    cache = _cache
    if cache is not None and cache.ready():
        found = counts(body, cache.pods_of(namespace), cache.nodes)
        patch.status["governedPods"] = found.governed
        patch.status["violatingPods"] = found.violating
    else:  # the operator is still listing the cluster: counted by the refresh once it has
        refresh.mark(namespace)
    if compiled.ready:
        kopf.info(body, reason="Compiled", message=condition["message"])
    else:
        kopf.warn(body, reason="Invalid", message=condition["message"][:1024])


@kopf.on.event(GROUP, VERSION, PLURAL)
def policy_deleted(event: kopf.RawEvent, body: kopf.Body, namespace: str, name: str, **_: Any) -> None:
    """A deleted policy no longer refuses the pods it selected: they are tried again. (A watch handler,
    not kopf.on.delete, which would put a finalizer on every PlacementPolicy.)"""
    if event.get("type") == "DELETED":
        policy_requeue.note(namespace, name, (load_policy(body).selector,), "deleted")


@kopf.on.validate(GROUP, VERSION, PLURAL, id="placement-policy", operations=["CREATE", "UPDATE"])
def validate_policy(body: kopf.Body, warnings: list[str], operation: str = "CREATE", **_: Any) -> None:
    compiled = load_policy(body)
    if not compiled.ready:
        raise kopf.AdmissionError("; ".join(compiled.errors), code=400)
    cache, namespace = _cache, (body.get("metadata") or {}).get("namespace") or ""
    selector = compiled.selector
    if operation != "CREATE" or selector is None or cache is None or not cache.ready():
        return
    if not any(selector.matches(p.labels) for p in cache.pods_of(namespace)):
        warnings.append(
            f"spec.selector matches no pod of namespace {namespace} now: the policy governs no pod until "
            "one with those labels is created (a pod may also name it in berth.dev/placement-policy)"
        )


# The allocator configuration berth serve schedules with (`berth operator --config`; the chart mounts
# the same ConfigMap): the packages a pod may name. Without one, berth's defaults, as berth serve without
# --config: they define no package, so a pod naming one is refused here as it would be at scheduling.
_config: AllocatorConfig = DEFAULT_CONFIG


def use_allocator_config(config: AllocatorConfig | None) -> None:
    global _config
    _config = config or DEFAULT_CONFIG


def check_pod_object(
    obj: Mapping[str, Any], config: AllocatorConfig | None = None
) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a pod or workload's berth annotations, checked as scheduling checks
    them (berth.vocab.pod.check_annotations, with the allocator configuration's packages and the
    pod's limits: an unknown package or an image's RAM bounds are refused here, not first as a 400
    at scheduling)."""
    template = pod_template(dict(obj))
    if template is None:
        return [], []
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    berth_only = {k: v for k, v in annotations.items() if k.startswith(ann.PREFIX)}
    problems = [
        f"annotation {k}: value must be a string" for k, v in berth_only.items() if not isinstance(v, str)
    ]
    if problems:
        return problems, []
    try:
        _requests, limits = pod_requests(template.get("spec") or {}, "pod template")
    except SnapshotError:  # a malformed quantity is the API server's to refuse, not berth's
        limits = None
    found, spec = check_annotations(berth_only, config=config, limits=limits)
    misplaced = [message for _field, _rule, message in outside_template_warnings(dict(obj))]
    return found, [e.message for e in spec.warnings] + misplaced


# The schedulers berth serves (`berth operator --scheduler-names`; the chart passes its profiles).
DEFAULT_SCHEDULERS = ("berth-scheduler", "berth-scheduler-exhaustive")
_schedulers: tuple[str, ...] = DEFAULT_SCHEDULERS


def use_scheduler_names(names: Iterable[str]) -> None:
    global _schedulers
    _schedulers = tuple(names) or DEFAULT_SCHEDULERS


def ignored_rules_warning(obj: Mapping[str, Any], schedulers: Iterable[str]) -> str | None:
    """A warning when a pod (or a workload's pod template) carries berth rules that no berth scheduler
    will read: its spec.schedulerName is none of `schedulers`."""
    template = pod_template(dict(obj))
    if template is None:
        return None
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    rules = sorted(k for k in annotations if k in ann.POD_ANNOTATIONS)
    scheduler = (template.get("spec") or {}).get("schedulerName") or "default-scheduler"
    names = tuple(schedulers)
    if not rules or scheduler in names:
        return None
    return (
        f"spec.schedulerName: {scheduler} is not one of berth's schedulers ({', '.join(names)}), so "
        f"{', '.join(rules)} {'is' if len(rules) == 1 else 'are'} ignored: set spec.schedulerName to one "
        "of them for berth to place the pod"
    )


def _admit(body: kopf.Body, warnings: list[str]) -> None:
    problems, found = check_pod_object(body, _config)
    if problems:
        raise kopf.AdmissionError("; ".join(problems), code=400)
    warnings.extend(found)
    ignored = ignored_rules_warning(body, _schedulers)
    if ignored is not None:
        warnings.append(ignored)


# failurePolicy Ignore for pods and workloads: an operator that is down must not stop every pod in the
# cluster; the extender refuses an invalid specification anyway (fail closed at scheduling).
@kopf.on.validate("v1", "pods", id="pod-annotations", operations=["CREATE", "UPDATE"], ignore_failures=True)
def validate_pod(body: kopf.Body, warnings: list[str], **_: Any) -> None:
    _admit(body, warnings)


for _group, _version, _plural in WORKLOADS:
    kopf.on.validate(
        _group,
        _version,
        _plural,
        id=f"{_plural}-annotations",
        operations=["CREATE", "UPDATE"],
        ignore_failures=True,
    )(validate_pod)
