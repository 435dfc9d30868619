"""A pod's berth annotations, compiled once per decision into the PodSpec the steps read."""

from __future__ import annotations

from dataclasses import dataclass, field

from berth import annotations as ann
from berth.cluster.model import Pod
from berth.engine.types import Event
from berth.errors import InvalidAnnotation
from berth.vocab.tags import TagSpec, compile_tags


@dataclass(frozen=True, slots=True)
class PodSpec:
    tags: TagSpec = field(default_factory=TagSpec)
    warnings: tuple[Event, ...] = ()


def compile_pod(pod: Pod) -> PodSpec:
    """Every berth annotation of the pod, validated; InvalidAnnotation lists every problem."""
    problems, spec = check_annotations(pod.annotations)
    if problems:
        message = problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems)
        field_ = problems[0].split(":", 1)[0].removeprefix("annotation ")
        raise InvalidAnnotation(message, field=field_, errors=problems)
    return spec


def check_annotations(annotations: dict[str, str]) -> tuple[list[str], PodSpec]:
    problems: list[str] = []
    tags, tag_problems = compile_tags(annotations)
    problems.extend(tag_problems)
    warnings = list(tags.warnings)
    for key in annotations:
        if key.startswith(ann.PREFIX) and key not in ann.POD_ANNOTATIONS:
            warnings.append(
                Event(
                    "Warning",
                    "UnknownAnnotation",
                    f"annotation {key} is not one berth reads (a misspelling?)",
                )
            )
    return problems, PodSpec(tags=tags, warnings=tuple(warnings))
