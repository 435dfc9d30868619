"""Tag affinity (the Shaken Fist seed): instance tags and the affinity specification.

A pod carries tags in `berth.dev/tags` (a JSON list of non-empty strings) and its affinity in
`berth.dev/affinity`, in one of two shapes:

- the constraint form: any subset of require_with_tag, require_without_tag, prefer_with_tag,
  prefer_without_tag, each a list of tags;
- the deprecated weighted form {tag: integer}, read by sign only: positive -> prefer_with_tag,
  negative -> prefer_without_tag, zero -> nothing.

The constraint form may name a `topologyKey` (a node label, kube's word): the four constraints then
count the neighbours on every node of the node's domain ("a pod tagged db in the node's zone") instead
of the node's own. A node without the label fails require_* and counts 0 for prefer_*.

Mixing the two is refused, because either way of resolving it would discard half of what was asked.
Only pods of the pod's own namespace count, and the pod is never its own neighbour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from berth import annotations as ann
from berth.cluster.tags import parse_tags
from berth.cluster.topology import FIELD as TOPOLOGY_KEY
from berth.cluster.topology import key_problem, per_domain
from berth.engine.types import Event
from berth.json_annotation import AnnotationProblem, load_json, show

REQUIRE_WITH = "require_with_tag"
REQUIRE_WITHOUT = "require_without_tag"
PREFER_WITH = "prefer_with_tag"
PREFER_WITHOUT = "prefer_without_tag"
CONSTRAINTS = (REQUIRE_WITH, REQUIRE_WITHOUT, PREFER_WITH, PREFER_WITHOUT)


@dataclass(frozen=True, slots=True)
class TagAffinity:
    require_with: tuple[str, ...] = ()
    require_without: tuple[str, ...] = ()
    prefer_with: tuple[str, ...] = ()
    prefer_without: tuple[str, ...] = ()
    # The weighted form as written, when that is what the pod used (deprecated).
    weighted: dict[str, Any] | None = None
    # The node label whose value is the domain the constraints count over; None: the node itself.
    topology: str | None = None

    @property
    def prefers(self) -> bool:
        return bool(self.prefer_with or self.prefer_without)

    def constraint_form(self) -> dict[str, list[str]]:
        """The constraint form this affinity means, with only the non-empty names."""
        lists = (self.require_with, self.require_without, self.prefer_with, self.prefer_without)
        pairs = zip(CONSTRAINTS, lists, strict=True)
        return {name: list(tags) for name, tags in pairs if tags}


@dataclass(frozen=True, slots=True)
class TagSpec:
    tags: frozenset[str] = frozenset()
    affinity: TagAffinity = field(default_factory=TagAffinity)
    warnings: tuple[Event, ...] = ()


def _unique(tags: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tags))


def _weight(tag: str, value: Any) -> int:
    if isinstance(value, bool):
        raise AnnotationProblem(
            f"weight of {show(tag)}: affinity dictionary values should be integers, not booleans"
        )
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise AnnotationProblem(
        f"weight of {show(tag)}: affinity dictionary values should be integers, found {show(value)}"
    )


def parse_affinity(raw: str) -> list[str] | TagAffinity:
    """The affinity of `berth.dev/affinity`, or the list of every problem in it."""
    try:
        value = load_json(raw, expect=dict, shape="a JSON object")
    except AnnotationProblem as exc:
        return [str(exc)]
    reserved = [k for k in value if k in CONSTRAINTS]
    if TOPOLOGY_KEY in value and not reserved:
        others = sorted(k for k in value if k != TOPOLOGY_KEY)
        if others:
            return [
                f"{TOPOLOGY_KEY} goes with the constraint form ({', '.join(CONSTRAINTS)}); the deprecated "
                f"weighted form {show(others)} counts per node"
            ]
        reserved = [TOPOLOGY_KEY]
    if reserved:
        others = sorted(k for k in value if k not in CONSTRAINTS and k != TOPOLOGY_KEY)
        if others:
            return [
                f"affinity keys {show(others)} are not valid alongside the constraint keys {show(reserved)}; "
                "the weighted and constraint forms cannot be mixed"
            ]
        return _parse_constraints(value)
    return _parse_weighted(value)


def _parse_constraints(value: dict[str, Any]) -> list[str] | TagAffinity:
    problems: list[str] = []
    lists: dict[str, tuple[str, ...]] = {}
    for name in CONSTRAINTS:
        if name not in value:
            continue
        tags = value[name]
        if not isinstance(tags, list):
            problems.append(f'value for affinity constraint "{name}" should be a JSON list of tags')
        elif any(not isinstance(t, str) or not t for t in tags):
            bad = next(t for t in tags if not isinstance(t, str) or not t)
            problems.append(
                f'affinity constraint "{name}" should contain only non-empty tag names, found {show(bad)}'
            )
        elif len(tags) > ann.MAX_TAGS:
            problems.append(f'affinity constraint "{name}" lists more than {ann.MAX_TAGS} tags')
        else:
            lists[name] = _unique(tags)
    topology = value.get(TOPOLOGY_KEY)
    if TOPOLOGY_KEY in value and (problem := key_problem(topology)):
        problems.append(f"{TOPOLOGY_KEY}: {problem}")
    if problems:
        return problems
    both = [t for t in lists.get(REQUIRE_WITH, ()) if t in lists.get(REQUIRE_WITHOUT, ())]
    if both:
        return [
            f"tags {show(both)} are in both require_with_tag and require_without_tag; "
            "no node can satisfy both"
        ]
    return TagAffinity(
        require_with=lists.get(REQUIRE_WITH, ()),
        require_without=lists.get(REQUIRE_WITHOUT, ()),
        prefer_with=lists.get(PREFER_WITH, ()),
        prefer_without=lists.get(PREFER_WITHOUT, ()),
        topology=per_domain(topology),
    )


def _parse_weighted(value: dict[str, Any]) -> list[str] | TagAffinity:
    problems: list[str] = []
    positive: list[str] = []
    negative: list[str] = []
    for tag, weight in value.items():
        if not tag:
            problems.append("affinity tags should be non-empty strings")
            continue
        try:
            number = _weight(tag, weight)
        except AnnotationProblem as exc:
            problems.append(str(exc))
            continue
        if number > 0:
            positive.append(tag)
        elif number < 0:
            negative.append(tag)
    if problems:
        return problems
    return TagAffinity(prefer_with=tuple(positive), prefer_without=tuple(negative), weighted=dict(value))


def compile_tags(annotations: dict[str, str]) -> tuple[TagSpec, list[str]]:
    """The pod's tag spec and the list of problems (each naming the annotation)."""
    problems: list[str] = []
    tags: frozenset[str] = frozenset()
    affinity = TagAffinity()
    warnings: list[Event] = []
    if ann.TAGS in annotations:
        try:
            tags = parse_tags(annotations[ann.TAGS])
        except AnnotationProblem as exc:
            problems.append(f"annotation {ann.TAGS}: {exc}")
    if ann.AFFINITY in annotations:
        parsed = parse_affinity(annotations[ann.AFFINITY])
        if isinstance(parsed, list):
            problems.extend(f"annotation {ann.AFFINITY}: {p}" for p in parsed)
        else:
            affinity = parsed
            if parsed.weighted is not None:
                warnings.append(deprecation_event(parsed))
    return TagSpec(tags=tags, affinity=affinity, warnings=tuple(warnings)), problems


def deprecation_event(affinity: TagAffinity) -> Event:
    return Event(
        "Warning",
        "DeprecatedAffinity",
        f"weighted affinity {show(affinity.weighted)} is deprecated and read by sign only as "
        f"{show(affinity.constraint_form())}; write that constraint form in {ann.AFFINITY} instead",
    )
