"""Offline checks of what users write: berth annotations in pod and workload manifests, and
PlacementPolicy objects (or bare policy trees `{"type": ...}`), every problem with its field path.

Allocator configurations are checked too. A YAML document is one when its top level is a mapping
without `kind` that has any of allocationDescription, defaults, packages and algorithms; a ConfigMap
carrying one under the data key `allocator.yaml` is checked as well.

Besides errors (what berth refuses), validate warns where a valid manifest will not do what it seems
to ask (berth.analysis.validate_warnings): a misspelt berth.dev/ annotation, a deprecated form, berth
annotations that never reach the pods, pods with berth rules that another scheduler places, and a file
with nothing for berth in it.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from berth.analysis.validate_warnings import (
    DEFAULT_SCHEDULER,
    about_berth,
    config_rule,
    object_warnings,
    template_path,
)
from berth.cluster.convert import pod_from_k8s, pod_template
from berth.cluster.snapshot import read_documents
from berth.errors import BerthError, InvalidConfig
from berth.vocab.alloc.config import CONFIG_MAP_KEY, AllocatorConfig, looks_like_config, parse_config
from berth.vocab.pod import check_annotations
from berth.vocab.policy.compile import is_policy_tree, load_policy, load_tree
from berth.vocab.policy.schema import KIND as POLICY_KIND

CONFIG_KEY = CONFIG_MAP_KEY
STDIN = "-"
__all__ = ["DEFAULT_SCHEDULER", "Finding", "Report", "validate_object", "validate_paths"]


@dataclass(frozen=True)
class Finding:
    """One error or warning: the file, the object (its kind, namespace and name, and its position in
    the file), the field, the rule it breaks (a stable name) and the message."""

    severity: str  # "error" | "warning"
    file: str
    object: str  # "Deployment shop/web", "policy tree", "allocator configuration", or "" for the file
    field: str
    rule: str
    message: str
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    document: int | None = None  # 0-based, after List kinds are flattened

    def line(self) -> str:
        """The text form: "file: object: message" (the message begins with the field)."""
        where = ": ".join(p for p in (self.file, self.object) if p)
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    checked: list[dict[str, Any]]
    errors: list[Finding]
    warnings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "errors": [f.to_dict() for f in self.errors],
            "warnings": [f.to_dict() for f in self.warnings],
        }


def _label(obj: dict[str, Any]) -> str:
    if is_policy_tree(obj):
        return "policy tree"
    if looks_like_config(obj):
        return "allocator configuration"
    meta = _metadata(obj)
    ns = meta.get("namespace")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    return f"{obj.get('kind', '?')} {f'{ns}/' if ns else ''}{name}"


def _config_problems(data: Any, warnings: list[str] | None = None) -> list[str]:
    try:
        config = parse_config(data)
    except InvalidConfig as exc:
        return list(exc.errors)
    if warnings is not None:
        warnings.extend(config.warnings)
    return []


def validate_object(
    obj: dict[str, Any], *, config: AllocatorConfig | None = None, warnings: list[str] | None = None
) -> list[str] | None:
    """The problems of one object, or None when berth has nothing to check in it; what is valid but
    worth knowing goes to `warnings` (a configuration's chain that leaves berth's own rules out, a
    deprecated key). With an allocator configuration, the packages pods name are checked against it."""
    if looks_like_config(obj):
        return _config_problems(obj, warnings)
    if obj.get("kind") == "ConfigMap" and isinstance(obj.get("data"), dict) and CONFIG_KEY in obj["data"]:
        try:
            data = yaml.safe_load(obj["data"][CONFIG_KEY] or "") or {}
        except yaml.YAMLError as exc:
            return [f"data.{CONFIG_KEY}: not valid YAML: {exc}"]
        found: list[str] = []
        problems = [f"data.{CONFIG_KEY}: {p}" for p in _config_problems(data, found)]
        if warnings is not None:
            warnings.extend(f"data.{CONFIG_KEY}: {w}" for w in found)
        return problems
    if obj.get("kind") == POLICY_KIND:
        return list(load_policy(obj).errors)
    if is_policy_tree(obj):
        return list(load_tree(obj, label="policy").errors)
    template = pod_template(obj)
    if template is None:
        return None
    try:
        pod = pod_from_k8s(template)
    except BerthError as exc:
        return [exc.message]
    problems, _spec = check_annotations(pod.annotations, config=config, limits=pod.limits)
    return problems


def _read(path: str) -> list[dict[str, Any]]:
    """The objects of a file, or of standard input for `-` (read through a temporary file, so that
    stdin is parsed exactly as a file is)."""
    if path != STDIN:
        return read_documents(path)
    with tempfile.NamedTemporaryFile(suffix=".yaml", delete=False) as tmp:
        tmp.write(sys.stdin.buffer.read())
    try:
        return read_documents(tmp.name)
    except BerthError as exc:
        raise BerthError(exc.message.replace(tmp.name, "<stdin>")) from exc
    finally:
        os.unlink(tmp.name)


def _error_field(problem: str, obj: dict[str, Any]) -> tuple[str, str]:
    """(field, rule) of an error: "annotation berth.dev/tags: ..." is the template's annotation."""
    head = problem.split(": ", 1)[0] if ": " in problem else ""
    if head.startswith("annotation "):
        key = head.removeprefix("annotation ")
        return f'{template_path(obj)}metadata.annotations["{key}"]', "invalid-annotation"
    if obj.get("kind") == POLICY_KIND or is_policy_tree(obj):
        rule = "rule-not-boolean" if "must return a boolean" in problem else "invalid-policy"
        return head, rule
    if looks_like_config(obj) or obj.get("kind") == "ConfigMap":
        return head, "invalid-config"
    return head, "invalid-pod"


def _identity(obj: dict[str, Any]) -> dict[str, Any]:
    if is_policy_tree(obj) or looks_like_config(obj):
        return {"kind": None, "namespace": None, "name": None}
    meta = _metadata(obj)
    return {"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta.get("name")}


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's metadata, or nothing when it is not a mapping (named by the checks, not here)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _check(
    obj: dict[str, Any],
    report: Report,
    file: str,
    index: int,
    *,
    config: AllocatorConfig | None,
    scheduler: str,
) -> None:
    """One object's errors and warnings into `report`, each naming the file and the object (the
    index-th document of the file)."""
    spot = functools.partial(_finding, file, obj, index)
    if not obj.get("kind") and not is_policy_tree(obj) and not looks_like_config(obj):
        message = (
            "kind: not a Kubernetes object (no kind), a policy tree ({type: ...}) or an allocator "
            "configuration; berth cannot check it"
        )
        report.errors.append(spot("error", "kind", "not-kubernetes", message))
        return
    noted: list[str] = []
    found = validate_object(obj, config=config, warnings=noted)
    if found is not None:
        report.checked.append({"file": file, "object": _label(obj), "document": index, **_identity(obj)})
        for problem in found:
            field, rule = _error_field(problem, obj)
            report.errors.append(spot("error", field, rule, problem))
        report.warnings.extend(spot("warning", *config_rule(note)) for note in noted)
    report.warnings.extend(spot("warning", *w) for w in object_warnings(obj, scheduler))


def validate_paths(
    paths: Iterable[str], *, config: AllocatorConfig | None = None, scheduler: str = DEFAULT_SCHEDULER
) -> Report:
    """Every error and warning of the files, and the objects checked. A file with nothing for berth
    in it is a warning (a file berth cannot read, or a document that is not an object, an error)."""
    report = Report([], [], [])
    for path in paths:
        shown = "<stdin>" if path == STDIN else path
        try:
            objects = _read(path)
        except BerthError as exc:
            message = exc.message.removeprefix(f"{path}: ").removeprefix("<stdin>: ")
            report.errors.append(Finding("error", shown, "", "", "unreadable", message))
            continue
        errors = len(report.errors)
        for index, obj in enumerate(objects):
            _check(obj, report, shown, index, config=config, scheduler=scheduler)
        # Said once per file, and not of a file whose documents are already errors.
        if len(report.errors) == errors and not any(about_berth(obj, scheduler) for obj in objects):
            report.warnings.append(
                Finding(
                    "warning",
                    shown,
                    "",
                    "",
                    "nothing-for-berth",
                    f"nothing for berth in {len(objects)} object(s): no PlacementPolicy, allocator "
                    "configuration, or pod (template) with berth.dev/ annotations or spec.schedulerName "
                    f"{scheduler}",
                )
            )
    return report


def _finding(
    file: str, obj: dict[str, Any], index: int, severity: str, field: str, rule: str, message: str
) -> Finding:
    kindless = not obj.get("kind") and not is_policy_tree(obj) and not looks_like_config(obj)
    label = f"document {index + 1}" if kindless else _label(obj)
    return Finding(severity, file, label, field, rule, message, document=index, **_identity(obj))
