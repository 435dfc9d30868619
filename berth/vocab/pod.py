"""A pod's berth annotations, compiled once per decision into the PodSpec the steps read."""

from __future__ import annotations

import difflib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from berth import annotations as ann
from berth.cluster.model import Pod
from berth.engine.types import Event
from berth.errors import InvalidAnnotation
from berth.vocab.alloc.request import ANNOTATIONS as ALLOC_ANNOTATIONS
from berth.vocab.alloc.request import AllocRequest, compile_alloc
from berth.vocab.policy.compile import name_problem
from berth.vocab.tag_affinity import TagSpec, compile_tags

if TYPE_CHECKING:
    from berth.vocab.alloc.config import AllocatorConfig


@dataclass(frozen=True, slots=True)
class PodSpec:
    tags: TagSpec = field(default_factory=TagSpec)
    warnings: tuple[Event, ...] = ()
    # The allocator's side: traits, locality, affinity rules, package, image, NIC tags.
    alloc: AllocRequest = field(default_factory=AllocRequest)

    @property
    def per_domain(self) -> bool:
        """A rule of the pod counts per topology domain: what it reads of a node changes with the
        pods of the other nodes of its domain."""
        locality = self.alloc.locality
        return self.tags.affinity.topology is not None or (
            locality is not None and locality.topology is not None
        )


def compile_pod(pod: Pod, *, config: AllocatorConfig | None = None) -> PodSpec:
    """Every berth annotation of the pod, validated; InvalidAnnotation lists every problem. The
    allocator configuration (the pipeline passes it) knows the packages a pod may name."""
    problems, spec = check_annotations(pod.annotations, config=config, limits=pod.limits)
    if problems:
        field_ = problems[0].split(":", 1)[0].removeprefix("annotation ")
        raise InvalidAnnotation.from_problems(problems, field=field_)
    return spec


class PodCompiler:
    """compile_pod with the configuration bound, keeping the specs of the last few distinct
    annotations: the pods of a Deployment or a burst carry the same ones, and reading them again
    (JSON, validation) was a twentieth of a decision at 500 nodes. Invalid ones are not kept."""

    KEPT = 1024

    def __init__(self, config: AllocatorConfig | None = None, *, kube_filters: bool = False) -> None:
        self.config = config
        # Offline, kube-scheduler's checks berth does not model are named on the pod's decision.
        self.kube_filters = kube_filters
        self._specs: OrderedDict[tuple, PodSpec] = OrderedDict()

    def __call__(self, pod: Pod) -> PodSpec:
        key = (
            tuple(pod.annotations.items()),
            tuple(pod.limits.items()),
            pod.unmodelled if self.kube_filters else (),
        )
        spec = self._specs.get(key)
        if spec is None:
            spec = compile_pod(pod, config=self.config)
            if self.kube_filters and pod.unmodelled:
                note = Event(
                    "Warning",
                    "NotModelled",
                    "kube-scheduler also checks what berth does not model here: "
                    + "; ".join(pod.unmodelled)
                    + " (the real scheduler may still refuse a node berth accepts)",
                )
                spec = PodSpec(tags=spec.tags, warnings=(*spec.warnings, note), alloc=spec.alloc)
            self._specs[key] = spec
            if len(self._specs) > self.KEPT:
                self._specs.popitem(last=False)
        else:
            self._specs.move_to_end(key)
        return spec


# Every berth.dev/ annotation berth reads on a pod, and the record it writes there.
KNOWN_ANNOTATIONS = (*ann.POD_ANNOTATIONS, *ALLOC_ANNOTATIONS, *ann.OPERATIONAL)


def closest_annotation(key: str) -> str | None:
    """The known berth.dev/ annotation a misspelt one most likely meant (`berth.dev/afinity`), if any;
    the names are compared without the shared prefix, which would make every pair look alike."""
    names = {k.removeprefix(ann.PREFIX): k for k in KNOWN_ANNOTATIONS}
    found = difflib.get_close_matches(key.removeprefix(ann.PREFIX), list(names), n=1, cutoff=0.75)
    return names[found[0]] if found else None


def unknown_annotation_message(key: str) -> str:
    near = closest_annotation(key)
    hint = f"did you mean {near}?" if near else "a misspelling?"
    return f"annotation {key} is not one berth reads ({hint})"


def check_annotations(
    annotations: dict[str, str],
    *,
    config: AllocatorConfig | None = None,
    limits: dict[str, int] | None = None,
) -> tuple[list[str], PodSpec]:
    """The problems of a pod's berth annotations and what they compile to. Without a config the
    package a pod names is not checked; with the pod's limits its RAM is checked against its image."""
    problems: list[str] = []
    tags, tag_problems = compile_tags(annotations)
    problems.extend(tag_problems)
    alloc, alloc_problems = compile_alloc(annotations, config=config, limits=limits)
    problems.extend(alloc_problems)
    named = annotations.get(ann.PLACEMENT_POLICY)
    if named is not None and (problem := name_problem(named)):
        problems.append(f"annotation {ann.PLACEMENT_POLICY}: {problem}")
    warnings = list(tags.warnings)
    for key in annotations:
        if key.startswith(ann.PREFIX) and key not in KNOWN_ANNOTATIONS:
            warnings.append(Event("Warning", "UnknownAnnotation", unknown_annotation_message(key)))
    return problems, PodSpec(tags=tags, warnings=tuple(warnings), alloc=alloc)
