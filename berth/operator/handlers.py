"""kopf handlers. Each decodes, asks the vocabularies, and encodes: the rules live in berth.vocab.

- PlacementPolicy objects are compiled on resume, create and spec changes; the status gets a Ready
  condition (True, or False with every error and its field path), observedGeneration and the number
  of pods the policy governs, refreshed by a timer as pods come and go.
- Admission: pods and workloads with invalid berth annotations are refused with the 400 text, a
  deprecated weighted affinity is admitted with a warning kubectl prints; PlacementPolicies that do
  not compile are refused before they are stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from berth import annotations as ann
from berth.cluster.convert import pod_template
from berth.vocab.pod import check_annotations
from berth.vocab.policy import CompiledPolicy, load_policy

GROUP, VERSION, PLURAL = "berth.dev", "v1alpha1", "placementpolicies"
GOVERNED_REFRESH_SECONDS = 30.0
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


def governed(compiled: CompiledPolicy, pods: Iterable[tuple[str, Mapping[str, str], str | None]]) -> int:
    """Pods of the policy's namespace it governs: those that name it, or (naming none) match its
    selector."""
    count = 0
    for _name, labels, named in pods:
        if named is not None:
            count += named.strip() == compiled.name
        elif compiled.selector is not None and compiled.selector.matches(labels):
            count += 1
    return count


def _previous_ready(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)


# -- handlers -----------------------------------------------------------------------------------------
@kopf.index("pods")
def pods_by_namespace(namespace: str, name: str, labels: Mapping, annotations: Mapping, **_: Any):
    return {namespace: (name, dict(labels), annotations.get(ann.PLACEMENT_POLICY))}


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(
    body: kopf.Body,
    meta: kopf.Meta,
    status: kopf.Status,
    namespace: str,
    patch: kopf.Patch,
    pods_by_namespace: kopf.Index,
    **_: Any,
) -> None:
    compiled = load_policy(body)
    condition = ready_condition(compiled, meta.get("generation"), _previous_ready(status))
    patch.status["conditions"] = [condition]
    patch.status["observedGeneration"] = meta.get("generation") or 0
    patch.status["governedPods"] = governed(compiled, pods_by_namespace.get(namespace, []))
    if compiled.ready:
        kopf.info(body, reason="Compiled", message=condition["message"])
    else:
        kopf.warn(body, reason="Invalid", message=condition["message"][:1024])


@kopf.timer(GROUP, VERSION, PLURAL, interval=GOVERNED_REFRESH_SECONDS, initial_delay=5)
def refresh_governed(
    body: kopf.Body,
    status: kopf.Status,
    namespace: str,
    patch: kopf.Patch,
    pods_by_namespace: kopf.Index,
    **_: Any,
) -> None:
    count = governed(load_policy(body), pods_by_namespace.get(namespace, []))
    if status.get("governedPods") != count:
        patch.status["governedPods"] = count


@kopf.on.validate(GROUP, VERSION, PLURAL, id="placement-policy", operations=["CREATE", "UPDATE"])
def validate_policy(body: kopf.Body, **_: Any) -> None:
    compiled = load_policy(body)
    if not compiled.ready:
        raise kopf.AdmissionError("; ".join(compiled.errors), code=400)


def check_pod_object(obj: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a pod or workload's berth annotations."""
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
    found, spec = check_annotations(berth_only)
    return found, [e.message for e in spec.warnings]


def _admit(body: kopf.Body, warnings: list[str]) -> None:
    problems, found = check_pod_object(body)
    if problems:
        raise kopf.AdmissionError("; ".join(problems), code=400)
    warnings.extend(found)


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
