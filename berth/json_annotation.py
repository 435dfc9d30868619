"""Reading one JSON annotation value with the size limit and the errors every vocabulary shares."""

from __future__ import annotations

import json
from typing import Any

from berth.annotations import MAX_ANNOTATION_BYTES


class AnnotationProblem(ValueError):
    """One thing wrong with one annotation; the vocabulary adds the annotation's name."""


def load_json(raw: str, *, expect: type, shape: str) -> Any:
    """The decoded value of an annotation, or AnnotationProblem naming the rule it breaks."""
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_ANNOTATION_BYTES:
        raise AnnotationProblem(f"value is longer than {MAX_ANNOTATION_BYTES} bytes")
    if not raw.strip():
        raise AnnotationProblem("no value specified")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise AnnotationProblem(f"value should be {shape} (invalid JSON: {exc})") from exc
    if not isinstance(value, expect):
        raise AnnotationProblem(f"value should be {shape}, not {json_type(value)}")
    if not value:
        raise AnnotationProblem("no value specified")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def show(value: Any) -> str:
    return json.dumps(value, sort_keys=False, ensure_ascii=False)
