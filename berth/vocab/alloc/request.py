"""The pod's side of the allocator: its annotations compiled once into an AllocRequest.

| seed (VM payload, image, package) | pod |
|---|---|
| traits | annotation `berth.dev/traits` |
| locality | annotation `berth.dev/locality` |
| affinity | annotation `berth.dev/affinity-rules` |
| package | annotation `berth.dev/package`: a package name of the allocator configuration |
| image manifest | annotation `berth.dev/image`: traits, requirements (min/max_ram, min/max_platform) |
| nic_tags | annotation `berth.dev/nic-tags`: a list of NIC tags, an inner list being alternatives |
| internal_metadata.force_designation_failure | label `berth.dev/force-designation-failure: "true"` |
| ram, cpu_cap, quota | the containers' limits (requests where a limit is absent), else the package's sizes |
| owner_uuid | the namespace |

Every problem names the annotation and the rule; they are all collected (a 400 lists them all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from berth import annotations as ann
from berth.json_annotation import AnnotationProblem, json_type, load_json, show
from berth.vocab.alloc.config import AllocatorConfig, Package
from berth.vocab.alloc.hints import AffinityRule, Locality, parse_locality, parse_rules
from berth.vocab.alloc.values import (
    PlatformMap,
    TraitValue,
    freeze_traits,
    nic_tag_problems,
    platform_map,
    trait_problems,
)

NIC_TAGS = "berth.dev/nic-tags"
FORCE_FAILURE_LABEL = "berth.dev/force-designation-failure"
# The pod annotations the allocator reads (berth.annotations lists the rest).
ANNOTATIONS = (ann.TRAITS, ann.LOCALITY, ann.AFFINITY_RULES, ann.PACKAGE, ann.IMAGE, NIC_TAGS)
IMAGE_KEYS = ("traits", "requirements", "image_size")
REQUIREMENT_KEYS = ("min_ram", "max_ram", "min_platform", "max_platform")
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Image:
    traits: dict[str, TraitValue] = field(default_factory=dict)
    min_ram: int | None = None
    max_ram: int | None = None
    min_platform: PlatformMap = field(default_factory=lambda: PlatformMap(()))
    max_platform: PlatformMap = field(default_factory=lambda: PlatformMap(()))
    image_size: int | None = None


@dataclass(frozen=True, slots=True)
class AllocRequest:
    """What the allocator's steps read about the pod, beyond its limits and namespace."""

    traits: dict[str, TraitValue] = field(default_factory=dict)
    traits_given: bool = False
    image: Image | None = None
    package: Package | None = None
    locality: Locality | None = None
    rules: tuple[AffinityRule, ...] = ()
    nic_tags: tuple[tuple[str, ...], ...] = ()

    def combined_traits(self) -> dict[str, TraitValue]:
        """Package traits, overridden by the pod's, overridden by the image's (sdc-designation's priority)."""
        out: dict[str, TraitValue] = {}
        if self.package is not None:
            out.update(self.package.traits)
        out.update(self.traits)
        if self.image is not None:
            out.update(self.image.traits)
        return out


EMPTY_REQUEST = AllocRequest()


def compile_alloc(
    annotations: dict[str, str],
    *,
    config: AllocatorConfig | None,
    limits: dict[str, int] | None = None,
) -> tuple[AllocRequest, list[str]]:
    """The pod's AllocRequest and its problems. Without a config (`berth validate` with no
    --config) package names are not checked; with `limits`, the pod's RAM is checked against the
    image's min_ram and max_ram."""
    problems: list[str] = []
    values: dict[str, Any] = {}

    def read(key: str, expect: type, shape: str) -> Any:
        if key not in annotations:
            return None
        try:
            return load_json(annotations[key], expect=expect, shape=shape)
        except AnnotationProblem as exc:
            problems.append(f"annotation {key}: {exc}")
            return None

    traits = read(ann.TRAITS, dict, "a JSON object of traits")
    if traits is not None:
        found = trait_problems(traits, "traits")
        problems += [f"annotation {ann.TRAITS}: {p.removeprefix('traits: ')}" for p in found]
        if not found:
            values["traits"] = freeze_traits(traits)
            values["traits_given"] = True

    locality = read(ann.LOCALITY, dict, 'a JSON object {"near": ..., "far": ..., "strict": ...}')
    if locality is not None:
        parsed, found = parse_locality(locality)
        problems += [f"annotation {ann.LOCALITY}: {p}" for p in found]
        values["locality"] = parsed

    rules = read(ann.AFFINITY_RULES, list, "a JSON list of affinity rules")
    if rules is not None:
        parsed_rules, found = parse_rules(rules)
        problems += [f"annotation {ann.AFFINITY_RULES}: {p}" for p in found]
        values["rules"] = parsed_rules

    nic_tags = read(NIC_TAGS, list, "a JSON list of NIC tags")
    if nic_tags is not None:
        found = nic_tag_problems(nic_tags, "nic-tags", alternatives=True)
        problems += [f"annotation {NIC_TAGS}: {p.removeprefix('nic-tags: ')}" for p in found]
        if not found:
            values["nic_tags"] = tuple(tuple(t) if isinstance(t, list) else (t,) for t in nic_tags)

    image = read(ann.IMAGE, dict, "a JSON object in the image manifest's shape")
    if image is not None:
        parsed_image, found = _image(image)
        problems += [f"annotation {ann.IMAGE}: {p}" for p in found]
        values["image"] = parsed_image

    if ann.PACKAGE in annotations:
        name = annotations[ann.PACKAGE].strip()
        if len(name) >= 2 and name[0] == name[-1] == '"':
            # The JSON form of a string, as the other berth annotations are JSON: "small" is small.
            name = name[1:-1].strip()
        if not name:
            problems.append(f"annotation {ann.PACKAGE}: no value specified")
        elif config is not None:
            package = config.packages.get(name)
            if package is None:
                known = ", ".join(sorted(config.packages)) or "none"
                problems.append(
                    f"annotation {ann.PACKAGE}: unknown package {show(name)} (the allocator configuration "
                    f"defines: {known})"
                )
            values["package"] = package

    request = AllocRequest(**values)
    if limits is not None and request.image is not None:
        problems += _image_ram(request, limits)
    return request, problems


def _image(value: dict[str, Any]) -> tuple[Image | None, list[str]]:
    problems = [
        f"unknown key {show(k)} ({', '.join(IMAGE_KEYS)} are read)" for k in value if k not in IMAGE_KEYS
    ]
    out: dict[str, Any] = {}
    if "traits" in value:
        found = trait_problems(value["traits"], "traits")
        problems += found
        if not found:
            out["traits"] = freeze_traits(value["traits"])
    size = value.get("image_size")
    if size is not None:
        if not _count(size):
            problems.append(f"image_size should be a whole number of MiB, found {show(size)}")
        else:
            out["image_size"] = size
    requirements = value.get("requirements", {})
    if not isinstance(requirements, dict):
        problems.append(f"requirements should be a JSON object, not {json_type(requirements)}")
        requirements = {}
    problems += [
        f"requirements: unknown key {show(k)} ({', '.join(REQUIREMENT_KEYS)} are read)"
        for k in requirements
        if k not in REQUIREMENT_KEYS
    ]
    for key in ("min_ram", "max_ram"):
        if key in requirements:
            if not _count(requirements[key]):
                problems.append(
                    f"requirements.{key} should be a whole number of MiB, found {show(requirements[key])}"
                )
            else:
                out[key] = requirements[key]
    if out.get("min_ram") is not None and out.get("max_ram") is not None and out["min_ram"] > out["max_ram"]:
        problems.append(
            f"requirements.min_ram {out['min_ram']} is more than requirements.max_ram {out['max_ram']}"
        )
    for key in ("min_platform", "max_platform"):
        if key in requirements:
            parsed, found = platform_map(requirements[key], f"requirements.{key}")
            problems += found
            out[key] = parsed
    if problems:
        return None, problems
    return Image(**out), []


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40


def pod_ram(request: AllocRequest, limits: dict[str, int]) -> tuple[float, str]:
    """The pod's RAM in MiB and where it comes from: its memory limits, else its package."""
    memory = limits.get("memory", 0)
    if memory > 0:
        return memory / MIB, "memory limit"
    if request.package is not None and request.package.ram:
        return float(request.package.ram), f"package {request.package.name}"
    return 0.0, ""


def pod_cpu(request: AllocRequest, limits: dict[str, int]) -> tuple[float, str]:
    """The pod's cpu_cap (100 = one CPU): its cpu limits in millicores / 10, else its package's."""
    cpu = limits.get("cpu", 0)
    if cpu > 0:
        return cpu / 10, "cpu limit"
    if request.package is not None and request.package.cpu_cap:
        return float(request.package.cpu_cap), f"package {request.package.name}"
    return 0.0, ""


def pod_disk(request: AllocRequest, limits: dict[str, int]) -> tuple[float, str]:
    """The pod's disk quota in MiB: its ephemeral-storage limits, else its package's quota."""
    disk = limits.get("ephemeral-storage", 0)
    if disk > 0:
        return disk / MIB, "ephemeral-storage limit"
    if request.package is not None and request.package.quota:
        return float(request.package.quota), f"package {request.package.name}"
    return 0.0, ""


def _image_ram(request: AllocRequest, limits: dict[str, int]) -> list[str]:
    image = request.image
    assert image is not None
    ram, source = pod_ram(request, limits)
    if not source:
        return []
    problems = []
    # A RAM within 0.01 MiB of a bound is on it (rounding of MiB from bytes).
    if image.min_ram is not None and ram < image.min_ram - 0.01:
        problems.append(
            f"annotation {ann.IMAGE}: requirements.min_ram is {image.min_ram} MiB but the pod's RAM "
            f"({source}) is {math.ceil(ram)} MiB"
        )
    if image.max_ram is not None and ram > image.max_ram + 0.01:
        problems.append(
            f"annotation {ann.IMAGE}: requirements.max_ram is {image.max_ram} MiB but the pod's RAM "
            f"({source}) is {math.floor(ram)} MiB"
        )
    return problems
