"""Values the allocator reads on both sides: traits, platform versions, NIC tags.

Each reader validates what users and operators write (returning problems that name the rule) and
builds the small immutable value the steps compare; the node-side readers are memoised on the raw
string, so a cluster of 5000 nodes with a handful of distinct trait sets parses each set once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from berth.json_annotation import json_type, show

MAX_TRAITS = 64
MAX_TRAIT_VALUES = 64
MAX_STRING = 253

# -- traits ----------------------------------------------------------------------------------------

TraitValue = bool | str | tuple[str, ...]


def trait_problems(value: Any, where: str) -> list[str]:
    """What is wrong with a traits object ({name: boolean | string | [string, ...]}), each problem after
    `where`, the path of the object (`traits`, `packages.small.traits`)."""
    if not isinstance(value, dict):
        return [f"{where} should be a JSON object, not {json_type(value)}"]
    if len(value) > MAX_TRAITS:
        return [f"{where}: at most {MAX_TRAITS} traits are allowed, found {len(value)}"]
    problems = []
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: trait names should be non-empty strings")
            continue
        if isinstance(item, bool):
            continue
        if isinstance(item, str):
            if not item or len(item) > MAX_STRING:
                problems.append(
                    f"{where}: trait {show(name)} should be a non-empty string of at most "
                    f"{MAX_STRING} characters"
                )
            continue
        if isinstance(item, list):
            bad = [v for v in item if not isinstance(v, str) or not v or len(v) > MAX_STRING]
            if not item or bad or len(item) > MAX_TRAIT_VALUES:
                problems.append(
                    f"{where}: trait {show(name)} should be a list of 1 to {MAX_TRAIT_VALUES} non-empty "
                    f"strings, found {show(item)}"
                )
            continue
        problems.append(
            f"{where}: trait {show(name)} should be a boolean, a non-empty string or a list of strings, "
            f"not {json_type(item)}"
        )
    return problems


def freeze_traits(value: dict[str, Any]) -> dict[str, TraitValue]:
    """A validated traits object with lists turned into tuples (values the steps never mutate)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}


def thaw(value: dict[str, TraitValue]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}


def trait_mismatch(requested: dict[str, TraitValue], node: dict[str, TraitValue]) -> str | None:
    """Why a node's traits cannot fulfil the requested ones, or None when they can.

    sdc-designation's rule, exactly: the node must carry the same trait names as the request (a node with a
    trait the request does not name is kept for pods that ask for it; a request with no traits takes
    only nodes without traits), and every value must match: booleans and strings by equality, a string
    against a list by membership either way, two lists by a common value.
    """
    if set(requested) != set(node):
        extra = sorted(set(node) - set(requested))
        missing = sorted(set(requested) - set(node))
        parts = []
        if missing:
            parts.append(f"node lacks {', '.join(missing)}")
        if extra:
            parts.append(f"node has {', '.join(extra)} that the pod does not request")
        return "; ".join(parts)
    for name, want in requested.items():
        have = node[name]
        detail = _compare(want, have)
        if detail:
            return f"{name}: {detail}"
    return None


def _compare(want: TraitValue, have: TraitValue) -> str | None:
    if isinstance(want, bool) or isinstance(have, bool):
        if isinstance(want, bool) and isinstance(have, bool):
            return None if want is have else "boolean did not match"
        return "unsupported combination of trait types"
    if isinstance(want, str):
        if isinstance(have, str):
            return None if want == have else "strings did not match"
        return None if want in have else "node trait list does not contain the requested value"
    if isinstance(have, str):
        return None if have in want else "node trait is not in the requested list"
    return None if set(want) & set(have) else "node and requested trait lists do not intersect"


# -- platform versions -----------------------------------------------------------------------------

_STAMP = re.compile(r"^(\d{8})T(\d{6})Z$")
_VERSION = re.compile(
    r"^v?(\d{1,6})(?:\.(\d{1,6}))?(?:\.(\d{1,6}))?(?:\.(\d{1,6}))?(?:[-+][0-9A-Za-z.+_-]*)?$"
)
_LINE = re.compile(r"^(\d{1,6})\.(\d{1,6})$")


@dataclass(frozen=True, slots=True)
class Platform:
    """A node platform or a platform requirement: a build stamp (20240131T120000Z, compared as a
    time) or a version (v1.35.4, compared numerically part by part; a -suffix is ignored)."""

    text: str
    stamp: bool
    key: tuple[int, ...]

    @property
    def line(self) -> tuple[int, int] | None:
        """The release line (major.minor) of a version; a stamp has none."""
        return None if self.stamp else (self.key[0], self.key[1])

    def comparable(self, other: Platform) -> bool:
        return self.stamp == other.stamp

    def score(self) -> float:
        """A number that grows with the platform: seconds since 1970 for a stamp, the packed version
        for a version (so any stamp counts as newer than any version)."""
        if self.stamp:
            when = datetime.strptime(self.text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            return when.timestamp()
        major, minor, patch, build = self.key
        return ((major * 1000 + minor) * 1000 + patch) * 1000 + build

    def __str__(self) -> str:
        return self.text


@lru_cache(maxsize=4096)
def parse_platform(text: str) -> Platform | None:
    """A platform stamp or version, or None when the text is neither."""
    text = text.strip()
    stamp = _STAMP.match(text)
    if stamp:
        try:
            datetime.strptime(text, "%Y%m%dT%H%M%SZ")
        except ValueError:
            return None
        return Platform(text, True, (int(stamp.group(1)), int(stamp.group(2))))
    version = _VERSION.match(text)
    if version:
        parts = tuple(int(p) if p else 0 for p in version.groups())
        return Platform(text, False, parts)
    return None


PLATFORM_SHAPE = "a platform stamp like 20240131T120000Z or a version like 1.35.4"


def parse_line(text: str) -> tuple[int, int] | None:
    match = _LINE.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def show_line(line: tuple[int, int]) -> str:
    return f"{line[0]}.{line[1]}"


@dataclass(frozen=True, slots=True)
class PlatformMap:
    """A min_platform or max_platform requirement: release line -> platform."""

    entries: tuple[tuple[tuple[int, int], Platform], ...]

    def as_dict(self) -> dict[str, str]:
        return {show_line(line): p.text for line, p in self.entries}

    def __bool__(self) -> bool:
        return bool(self.entries)


def platform_map(value: Any, where: str) -> tuple[PlatformMap, list[str]]:
    """{"1.34": "1.34.2", "1.35": "1.35.1"}: release lines (major.minor) to platforms."""
    if not isinstance(value, dict):
        return PlatformMap(()), [
            f"{where}: should be a JSON object of release line to platform, not {json_type(value)}"
        ]
    problems = []
    entries = {}
    for key, item in value.items():
        line = parse_line(key) if isinstance(key, str) else None
        if line is None:
            problems.append(f"{where}: key {show(key)} should be a release line like 1.35")
            continue
        platform = parse_platform(item) if isinstance(item, str) else None
        if platform is None:
            problems.append(f"{where}.{key}: {show(item)} should be {PLATFORM_SHAPE}")
            continue
        entries[line] = platform
    return PlatformMap(tuple(sorted(entries.items()))), problems


def meets_min(req: PlatformMap, line: tuple[int, int], platform: Platform) -> bool | None:
    """sdc-designation's min_platform rule on one node (None when the platforms cannot be compared).

    With the lines sorted, a node on a line above the highest passes; on a listed line its platform
    must be at least the one listed; on an unlisted line between the lowest and the highest it passes;
    below the lowest it fails.
    """
    lines = [line_ for line_, _ in req.entries]
    wanted = dict(req.entries)
    high = lines[-1]
    low = lines[0] if len(lines) > 1 else None
    if line > high:
        return True
    if line in wanted:
        if not wanted[line].comparable(platform):
            return None
        return platform.key >= wanted[line].key
    return low is not None and low < line < high


def meets_max(req: PlatformMap, line: tuple[int, int], platform: Platform) -> bool | None:
    """sdc-designation's max_platform rule: the mirror image of meets_min."""
    lines = [line_ for line_, _ in req.entries]
    wanted = dict(req.entries)
    low = lines[0]
    high = lines[-1] if len(lines) > 1 else None
    if line < low:
        return True
    if line in wanted:
        if not wanted[line].comparable(platform):
            return None
        return platform.key <= wanted[line].key
    return high is not None and low < line < high


def at_least(platform: Platform, minimum: Platform) -> bool | None:
    if not platform.comparable(minimum):
        return None
    return platform.key >= minimum.key


# -- NIC tags --------------------------------------------------------------------------------------


def nic_tag_problems(value: Any, where: str, *, alternatives: bool) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: should be a JSON list of NIC tags, not {json_type(value)}"]
    if len(value) > MAX_TRAITS:
        return [f"{where}: at most {MAX_TRAITS} NIC tags are allowed"]
    for item in value:
        if isinstance(item, str) and item:
            continue
        if alternatives and isinstance(item, list) and item and all(isinstance(t, str) and t for t in item):
            continue
        kind = "non-empty strings or lists of alternatives" if alternatives else "non-empty strings"
        return [f"{where}: NIC tags should be {kind}, found {show(item)}"]
    return []


# -- node annotations, parsed once per distinct value ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parsed:
    value: Any = None
    problem: str = ""


@lru_cache(maxsize=8192)
def node_traits(raw: str) -> Parsed:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return Parsed(problem=f"not valid JSON ({exc})")
    problems = trait_problems(value, "traits")
    if problems:
        return Parsed(problem=problems[0].removeprefix("traits: "))
    return Parsed(freeze_traits(value))


@lru_cache(maxsize=8192)
def node_nic_tags(raw: str) -> Parsed:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return Parsed(problem=f"not valid JSON ({exc})")
    problems = nic_tag_problems(value, "nic-tags", alternatives=False)
    if problems:
        return Parsed(problem=problems[0].removeprefix("nic-tags: "))
    return Parsed(frozenset(value))


@lru_cache(maxsize=8192)
def node_reboot(raw: str) -> Parsed:
    try:
        when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return Parsed(problem=f"{show(raw)} is not an RFC 3339 time")
    if when.tzinfo is None:
        return Parsed(problem=f"{show(raw)} has no time zone")
    return Parsed(when)


@lru_cache(maxsize=8192)
def node_ratios(raw: str) -> Parsed:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return Parsed(problem=f"not valid JSON ({exc})")
    if not isinstance(value, dict):
        return Parsed(problem=f'should be a JSON object like {{"cpu": 4, "ram": 1}}, not {json_type(value)}')
    out = {}
    for key, ratio in value.items():
        if key not in ("cpu", "ram", "disk"):
            return Parsed(problem=f"unknown ratio {show(key)} (cpu, ram and disk are read)")
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio < 1e6:
            return Parsed(problem=f"ratio {key} should be a positive number, found {show(ratio)}")
        out[key] = float(ratio)
    return Parsed(out)
