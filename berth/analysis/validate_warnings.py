"""What `berth validate` warns about: manifests berth accepts that will not do what they seem to ask.

Each warning is (field, rule, message); the message begins with the field. The rules:

- unknown-annotation: a berth.dev/ annotation berth does not read (with the known one it most likely
  meant);
- deprecated-affinity: the weighted form of berth.dev/affinity (read by sign only);
- annotation-outside-template: berth annotations on a workload's own metadata, which never reach its
  pods;
- scheduler-name: a pod (template) with berth annotations whose spec.schedulerName does not name berth's
  scheduler, so another scheduler places it and the annotations do nothing;
- deprecated-server-spread and config-warning: what the allocator configuration says of itself.
"""

from __future__ import annotations

import difflib
from typing import Any

from berth import annotations as ann
from berth.cluster.convert import WORKLOAD_KINDS, pod_template
from berth.vocab.alloc.config import CONFIG_MAP_KEY, looks_like_config
from berth.vocab.pod import KNOWN_ANNOTATIONS, closest_annotation
from berth.vocab.policy.compile import is_policy_tree
from berth.vocab.policy.schema import KIND as POLICY_KIND
from berth.vocab.tag_affinity import compile_tags

DEFAULT_SCHEDULER = "berth-scheduler"
Warning_ = tuple[str, str, str]  # (field, rule, message)


def template_path(obj: dict[str, Any]) -> str:
    """Where an object's pod template is, as a field path prefix ("" for a Pod)."""
    kind = obj.get("kind")
    if kind == "CronJob":
        return "spec.jobTemplate.spec.template."
    return "spec.template." if kind in WORKLOAD_KINDS else ""


def _berth_keys(meta: Any) -> list[str]:
    notes = (meta or {}).get("annotations") if isinstance(meta, dict) else None
    return [k for k in notes or {} if isinstance(k, str) and k.startswith(ann.PREFIX)]


def _outside(obj: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(field path of the metadata, berth keys in it) for every metadata of a workload that is not its
    pod template's: the workload's own, and a CronJob's job template's."""
    if obj.get("kind") not in (*WORKLOAD_KINDS, "CronJob"):
        return []
    found = [("metadata", _berth_keys(obj.get("metadata")))]
    if obj.get("kind") == "CronJob":
        job = (obj.get("spec") or {}).get("jobTemplate") or {}
        found.append(("spec.jobTemplate.metadata", _berth_keys(job.get("metadata"))))
    return [(path, keys) for path, keys in found if keys]


def _template_annotations(obj: dict[str, Any]) -> dict[str, Any]:
    template = pod_template(obj)
    notes = ((template or {}).get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in notes.items() if isinstance(k, str) and k.startswith(ann.PREFIX)}


def about_berth(obj: dict[str, Any], scheduler: str) -> bool:
    """Whether the object is for berth: a policy, an allocator configuration, or a pod (template) or
    workload with berth annotations or berth's scheduler."""
    kind = obj.get("kind")
    if kind == POLICY_KIND or is_policy_tree(obj) or looks_like_config(obj):
        return True
    if kind == "ConfigMap" and CONFIG_MAP_KEY in (obj.get("data") or {}):
        return True
    if _outside(obj) or _template_annotations(obj):
        return True
    template = pod_template(obj)
    return template is not None and (template.get("spec") or {}).get("schedulerName") == scheduler


def _scheduler_warning(obj: dict[str, Any], scheduler: str) -> Warning_ | None:
    prefix = template_path(obj)
    field = f"{prefix}spec.schedulerName"
    named = ((pod_template(obj) or {}).get("spec") or {}).get("schedulerName")
    if named == scheduler:
        return None
    fix = f"set {field}: {scheduler}"
    if not named:
        why = "is not set, so the default scheduler places the pods and their berth rules do not apply"
        return field, "scheduler-name", f"{field}: {why}; {fix}"
    if difflib.SequenceMatcher(None, str(named), scheduler).ratio() >= 0.8:
        return (
            field,
            "scheduler-name",
            f"{field}: {named!r} is not a scheduler berth runs as; did you mean {scheduler!r}?",
        )
    why = (
        f"is {named!r}, not berth's scheduler {scheduler!r}, so the berth rules apply only if {named!r} "
        "runs berth's extender"
    )
    return field, "scheduler-name", f"{field}: {why}; {fix} (or validate with --scheduler-name {named})"


def object_warnings(obj: dict[str, Any], scheduler: str = DEFAULT_SCHEDULER) -> list[Warning_]:
    """Every warning of one Pod or workload (none for other kinds)."""
    if pod_template(obj) is None:
        return []
    out: list[Warning_] = []
    prefix = template_path(obj)
    notes = _template_annotations(obj)
    for key in notes:
        if key not in KNOWN_ANNOTATIONS:
            field = f'{prefix}metadata.annotations["{key}"]'
            near = closest_annotation(key)
            hint = f"; did you mean {near}?" if near else " (a misspelling?), so it does nothing"
            out.append((field, "unknown-annotation", f"{field}: not an annotation berth reads{hint}"))
    tags, _problems = compile_tags({k: v for k, v in notes.items() if isinstance(v, str)})
    for event in tags.warnings:
        field = f'{prefix}metadata.annotations["{ann.AFFINITY}"]'
        out.append((field, "deprecated-affinity", f"{field}: {event.message}"))
    out += outside_template_warnings(obj)
    # (berth.dev/placement and the rebalance marks are not rules: they ask nothing of a scheduler)
    if any(k not in ann.OPERATIONAL for k in notes) or _outside(obj):
        found = _scheduler_warning(obj, scheduler)
        if found is not None:
            out.append(found)
    return out


def outside_template_warnings(obj: dict[str, Any]) -> list[Warning_]:
    """The berth annotations of a workload that are not on its pod template (the admission webhook
    gives these too: kubectl prints them)."""
    out: list[Warning_] = []
    for path, keys in _outside(obj):
        for key in keys:
            field = f'{path}.annotations["{key}"]'
            message = (
                f"{field}: on the {obj.get('kind')} itself, where berth never reads it: only the pod "
                f"template's annotations reach the pods; move it to {template_path(obj)}metadata.annotations"
            )
            out.append((field, "annotation-outside-template", message))
    return out


def config_rule(note: str) -> Warning_:
    """(field, rule, message) of a warning the allocator configuration gives about itself."""
    # "defaults.server_spread is deprecated: ...", "data.allocator.yaml: allocationDescription leaves out"
    field = note.split(": ", 1)[0].split(" ", 1)[0] if ": " in note else ""
    rule = "deprecated-server-spread" if "server_spread is deprecated" in note else "config-warning"
    return field, rule, note
