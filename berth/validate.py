"""Offline checks of what users write: berth annotations in pod and workload manifests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from berth.cluster.convert import pod_from_k8s, pod_template
from berth.cluster.snapshot import read_documents
from berth.errors import BerthError
from berth.vocab.pod import check_annotations


def _label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{name}"


def validate_object(obj: dict[str, Any]) -> list[str] | None:
    """The problems of one object, or None when berth has nothing to check in it."""
    template = pod_template(obj)
    if template is None:
        return None
    try:
        pod = pod_from_k8s(template)
    except BerthError as exc:
        return [exc.message]
    problems, _spec = check_annotations(pod.annotations)
    return problems


def validate_files(paths: Iterable[str]) -> tuple[list[str], int]:
    """Every problem as "file: object: problem", and how many objects were checked."""
    problems: list[str] = []
    checked = 0
    for path in paths:
        try:
            objects = read_documents(path)
        except BerthError as exc:
            problems.append(exc.message)
            continue
        for obj in objects:
            found = validate_object(obj)
            if found is None:
                continue
            checked += 1
            problems.extend(f"{path}: {_label(obj)}: {p}" for p in found)
    return problems, checked
