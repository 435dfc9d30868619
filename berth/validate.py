"""Offline checks of what users write: berth annotations in pod and workload manifests, and
PlacementPolicy objects (or bare policy trees `{"type": ...}`), every problem with its field path.

Allocator configurations are checked too. A YAML document is one when its top level is a mapping
without `kind` that has any of allocationDescription, defaults, packages and algorithms; a ConfigMap
carrying one under the data key `allocator.yaml` is checked as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from berth.cluster.convert import pod_from_k8s, pod_template
from berth.cluster.snapshot import read_documents
from berth.errors import BerthError, InvalidConfig
from berth.vocab.alloc.config import CONFIG_MAP_KEY, AllocatorConfig, looks_like_config, parse_config
from berth.vocab.pod import check_annotations
from berth.vocab.policy.compile import is_policy_tree, load_policy, load_tree
from berth.vocab.policy.model import KIND as POLICY_KIND

CONFIG_KEY = CONFIG_MAP_KEY


def _label(obj: dict[str, Any]) -> str:
    if is_policy_tree(obj):
        return "policy tree"
    if looks_like_config(obj):
        return "allocator configuration"
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{name}"


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


def validate_files(
    paths: Iterable[str], *, config: AllocatorConfig | None = None, warnings: list[str] | None = None
) -> tuple[list[str], int]:
    """Every problem as "file: object: problem", and how many objects were checked; every warning, the
    same way, into `warnings`."""
    problems: list[str] = []
    checked = 0
    for path in paths:
        try:
            objects = read_documents(path)
        except BerthError as exc:
            problems.append(exc.message)
            continue
        for obj in objects:
            noted: list[str] = []
            found = validate_object(obj, config=config, warnings=noted)
            if found is None:
                continue
            checked += 1
            problems.extend(f"{path}: {_label(obj)}: {p}" for p in found)
            if warnings is not None:
                warnings.extend(f"{path}: {_label(obj)}: {w}" for w in noted)
    return problems, checked
