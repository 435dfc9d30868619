"""The allocator configuration: the chain (`allocationDescription`), the defaults and the packages.

A YAML (or JSON) file, a ConfigMap in the chart:

    allocationDescription: [pipe, hard-filter-min-ram, [or, hard-filter-large-servers, identity], ...]
    defaults: {weight_unreserved_ram: 2, overprovision_ratio_cpu: 4.0, ...}
    packages: {small: {max_physical_memory: 1024, cpu_cap: 100, quota: 10240}}
    algorithms: {my-filter: "my_package.module:MyFilter"}

Every key is optional. What users write is read by pydantic models that forbid unknown keys; every
problem is collected and raised at once as InvalidConfig naming its path (`defaults.filter_vm_limit`,
`allocationDescription[3][1]`, `packages.small.traits`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from berth.errors import InputError, InvalidConfig
from berth.inputs import label, parse_documents, read_text
from berth.json_annotation import show
from berth.vocab import step_names
from berth.vocab.alloc.custom import load_path
from berth.vocab.alloc.description import Description, check_names, names_in, parse_description, show_value
from berth.vocab.alloc.plugin_names import builtin_names
from berth.vocab.alloc.values import (
    PLATFORM_SHAPE,
    PlatformMap,
    TraitValue,
    freeze_traits,
    parse_platform,
    platform_map,
    trait_problems,
)

TOP_LEVEL = ("allocationDescription", "defaults", "packages", "algorithms")
CONFIG_MAP_KEY = "allocator.yaml"
SPREADS = ("min-ram", "max-ram", "min-owner", "random")
# What a deprecated spread means in weights: "a large number" for its scorer (twice the sum of the
# default weights, so it decides), and the other spreading scorers off, as sdc-designation's spreads replace
# them.
SPREAD_WEIGHT = 10.0
SPREAD_SCORERS = (
    "weight_unreserved_ram",
    "weight_unreserved_disk",
    "weight_num_owner_zones",
    "weight_uniform_random",
)
SPREAD_TARGET = {
    "min-ram": ("weight_unreserved_ram", -SPREAD_WEIGHT),
    "max-ram": ("weight_unreserved_ram", SPREAD_WEIGHT),
    "min-owner": ("weight_num_owner_zones", SPREAD_WEIGHT),
    "random": ("weight_uniform_random", SPREAD_WEIGHT),
}
# The allocator's resource weights: one the file sets is the operator's resource strategy, and replaces
# kube-scheduler's resource-balancing scores in kube/default-score (as NodeResourcesFit's scoringStrategy).
RESOURCE_WEIGHTS = ("weight_unreserved_ram", "weight_unreserved_disk")
_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Spread = Literal["min-ram", "max-ram", "min-owner", "random"]


def _weight(default: float) -> Any:
    return Field(default=default, allow_inf_nan=False, ge=-1e6, le=1e6)


def _ratio(default: float | None) -> Any:
    return Field(default=default, gt=0, lt=1e6, allow_inf_nan=False)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Defaults(_Model):
    """sdc-designation's defaults table, every key with its default (docs/allocator.md explains each)."""

    disable_override_overprovisioning: bool = False
    filter_capness: bool = True
    filter_docker_min_platform: str | None = None
    filter_docker_nfs_volumes_automount_min_platform: str | None = None
    filter_non_docker_nfs_volumes_automount_min_platform: str | None = None
    filter_volapi_nfs_v2_min_platform: str | None = None
    filter_flexible_disk_min_platform: str | None = None
    filter_headnode: bool = True
    filter_min_resources: bool = True
    filter_large_servers: bool = True
    filter_vm_limit: int = Field(default=224, ge=1, le=1_000_000)
    overprovision_ratio_cpu: float = _ratio(4.0)
    overprovision_ratio_ram: float = _ratio(1.0)
    overprovision_ratio_disk: float = _ratio(1.0)
    server_spread: Spread = "min-ram"
    weight_current_platform: float = _weight(1.0)
    weight_next_reboot: float = _weight(0.5)
    weight_num_owner_zones: float = _weight(0.0)
    weight_uniform_random: float = _weight(0.5)
    weight_unreserved_disk: float = _weight(1.0)
    weight_unreserved_ram: float = _weight(2.0)
    # berth's addition (CNAPI's key): hard-filter-min-free-disk's threshold in MiB; unset skips it.
    minimum_free_disk: int | None = Field(default=None, ge=0)
    # berth's addition: the default chain ranks by kube-scheduler's default scores (kube/default-score)
    # before the allocator's scorers; false leaves the ranking to the allocator's scorers alone.
    kube_default_scoring: bool = True

    @property
    def spread(self) -> str | None:
        """server_spread when the file sets it: deprecated, it then replaces the weights."""
        return self.server_spread if "server_spread" in self.model_fields_set else None


class PackageModel(_Model):
    """A package as written: sdc-designation's package attributes."""

    alloc_server_spread: Spread | None = None
    cpu_cap: int | None = Field(default=None, gt=0, le=1_000_000)
    max_physical_memory: int | None = Field(default=None, gt=0)
    min_platform: dict[str, Any] | None = None
    overprovision_cpu: float | None = _ratio(None)
    overprovision_memory: float | None = _ratio(None)
    overprovision_storage: float | None = _ratio(None)
    overprovision_io: float | None = _ratio(None)  # sdc-designation: currently ignored
    overprovision_network: float | None = _ratio(None)  # sdc-designation: currently ignored
    quota: int | None = Field(default=None, ge=0)
    traits: dict[str, Any] | None = None


class AlgorithmModel(_Model):
    class_: str = Field(alias="class")
    weight: float | None = Field(default=None, allow_inf_nan=False)


class ConfigModel(_Model):
    allocationDescription: list[Any] | None = None
    defaults: Defaults = Field(default_factory=Defaults)
    packages: dict[str, PackageModel] = Field(default_factory=dict)
    algorithms: dict[str, str | AlgorithmModel] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Package:
    """A package, compiled: sizes in MiB and cpu_cap units, ratios under sdc-designation's internal names."""

    name: str
    ram: int | None = None
    cpu_cap: int | None = None
    quota: int | None = None
    traits: dict[str, TraitValue] = field(default_factory=dict)
    min_platform: PlatformMap = field(default_factory=lambda: PlatformMap(()))
    ratios: dict[str, float] = field(default_factory=dict)  # cpu, ram, disk
    spread: str | None = None


@dataclass(frozen=True, slots=True)
class AlgorithmRef:
    """A custom algorithm named in the configuration: where its class lives, and a scorer's weight."""

    path: str
    weight: float | None = None


@dataclass(frozen=True, slots=True)
class AllocatorConfig:
    description: Description | None = None
    defaults: Defaults = field(default_factory=Defaults)
    packages: dict[str, Package] = field(default_factory=dict)
    algorithms: dict[str, AlgorithmRef] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    source: str = ""

    def resource_weights(self) -> tuple[str, ...]:
        """The resource weights the file sets: they replace kube-scheduler's resource scores."""
        return tuple(k for k in RESOURCE_WEIGHTS if k in self.defaults.model_fields_set)

    def weight(self, key: str) -> float:
        """The weight a scorer runs with: the defaults' weight_*, or what a deprecated server_spread
        set in the file makes of it."""
        spread = self.defaults.spread
        if spread is not None and key in SPREAD_SCORERS:
            target, value = SPREAD_TARGET[spread]
            return value if key == target else 0.0
        return float(getattr(self.defaults, key))


DEFAULT_CONFIG = AllocatorConfig()


# -- reading ---------------------------------------------------------------------------------------


def load_config(path: str | Path) -> AllocatorConfig:
    """The configuration in a YAML or JSON file; InvalidConfig lists every problem."""
    source = label(path)
    try:
        docs = parse_documents(read_text(path), source)
    except InputError as exc:
        raise InvalidConfig(exc.message, field="") from exc
    if len(docs) > 1:
        raise InvalidConfig(f"{source}: one configuration per file, found {len(docs)} documents", field="")
    data = docs[0] if docs else None
    if isinstance(data, dict) and data.get("kind") == "ConfigMap":
        # The chart's form: the file under the ConfigMap's data key allocator.yaml.
        embedded = (data.get("data") or {}).get(CONFIG_MAP_KEY) if isinstance(data.get("data"), dict) else ""
        try:
            data = yaml.safe_load(embedded or "")
        except yaml.YAMLError as exc:
            problem = f"{source}: data.{CONFIG_MAP_KEY}: not valid YAML: {str(exc).splitlines()[0]}"
            raise InvalidConfig(problem, field="") from exc
    return parse_config({} if data is None else data, source=source)


def looks_like_config(obj: Any) -> bool:
    """A YAML document is an allocator configuration when its top level is a mapping without `kind`
    that has at least one of allocationDescription, defaults, packages and algorithms."""
    return isinstance(obj, dict) and "kind" not in obj and any(k in obj for k in TOP_LEVEL)


def parse_config(data: Any, *, source: str = "") -> AllocatorConfig:
    problems: list[str] = []
    if not isinstance(data, Mapping):
        _raise([f"the configuration should be a mapping with the keys {', '.join(TOP_LEVEL)}"], source)
    try:
        model = ConfigModel.model_validate(dict(data))
    except ValidationError as exc:
        _raise(_pydantic_problems(exc, data) + _description_problems(data), source)

    defaults = model.defaults
    problems += _platform_defaults(defaults)
    packages: dict[str, Package] = {}
    for name, pkg in model.packages.items():
        compiled, found = _package(name, pkg)
        packages[name] = compiled
        problems += found
    algorithms = {}
    for name, ref in model.algorithms.items():
        algorithms[name], found = _algorithm(name, ref)
        problems += found
    description = None
    if model.allocationDescription is not None:
        description, found = parse_description(model.allocationDescription, "allocationDescription")
        problems += found

    warnings = []
    if defaults.spread is not None:
        target, value = SPREAD_TARGET[defaults.spread]
        set_weights = sorted(k for k in defaults.model_fields_set if k in SPREAD_SCORERS)
        overridden = f"; it overrides {', '.join(set_weights)} set in the same file" if set_weights else ""
        warnings.append(
            f"defaults.server_spread is deprecated: {defaults.server_spread!r} is applied as {target}: "
            f"{value:g} with the other spreading weights at 0{overridden}; set the weight_* keys instead"
        )
    if description is not None:
        left_out = [n for n in step_names.ALWAYS if n not in names_in(description)]
        if left_out:
            warnings.append(
                f"allocationDescription leaves out {', '.join(left_out)}: berth's own rules hold under any "
                "chain, so they run anyway (the hard filters before the chain, the tiers "
                "rebalance/planned-target, tags/tag-affinity and kube/preferences before its first step "
                "that is not a hard filter)"
            )
    ranked_by_kube = (
        step_names.KUBE_SCORE in names_in(description)
        if description is not None
        else defaults.kube_default_scoring and defaults.spread is None
    )
    if ranked_by_kube:
        chosen = [f"defaults.{k}" for k in RESOURCE_WEIGHTS if k in defaults.model_fields_set]
        chosen += [
            f"packages.{n}.alloc_server_spread (for its pods)" for n, p in packages.items() if p.spread
        ]
        if chosen:
            warnings.append(
                f"{' and '.join(chosen)} replace{'s' if len(chosen) == 1 else ''} kube-scheduler's "
                "resource scores (LeastAllocated, BalancedAllocation) in kube/default-score: the operator's "
                "resource strategy, as NodeResourcesFit's scoringStrategy"
            )
    for name, package in packages.items():
        if package.spread is not None:
            key = SPREAD_TARGET[package.spread][0]
            weight = AllocatorConfig(defaults=defaults).weight(key)
            if weight == 0:
                problems.append(
                    f"packages.{name}.alloc_server_spread: {package.spread} orders nodes with the scorer of "
                    f"{key}, which is 0; give {key} a non-zero weight"
                )
    config = AllocatorConfig(
        description=description,
        defaults=defaults,
        packages=packages,
        algorithms=algorithms,
        warnings=tuple(warnings),
        source=source,
    )
    problems += _check_algorithms(config)
    if description is not None:
        problems += check_names(model.allocationDescription, "allocationDescription", config.algorithms)
    if problems:
        _raise(problems, source)
    return config


def _description_problems(data: Mapping[str, Any]) -> list[str]:
    """The chain's problems when another part of the file is malformed, so that all are reported."""
    raw = data.get("allocationDescription")
    if not isinstance(raw, list):
        return []
    _, problems = parse_description(raw, "allocationDescription")
    algorithms = data.get("algorithms")
    named = {str(k): AlgorithmRef("") for k in algorithms} if isinstance(algorithms, dict) else {}
    return problems + check_names(raw, "allocationDescription", named)


def _raise(problems: list[str], source: str) -> Any:
    prefix = f"{source}: " if source else ""
    field_ = problems[0].split(":", 1)[0] if problems else ""
    raise InvalidConfig.from_problems([f"{prefix}{p}" for p in problems], field=field_)


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _pydantic_problems(exc: ValidationError, data: Any) -> list[str]:
    problems = []
    for error in exc.errors():
        raw_loc = error["loc"]
        if len(raw_loc) >= 3 and raw_loc[0] == "algorithms":
            # An algorithm is a class path or a mapping: report only the branch its value took.
            value = (
                data.get("algorithms", {}).get(raw_loc[1])
                if isinstance(data.get("algorithms"), dict)
                else None
            )
            if (raw_loc[2] == "str") == isinstance(value, dict):
                continue
        loc = tuple(p for p in raw_loc if p not in ("str", "AlgorithmModel"))
        path = _path(loc)
        kind = error["type"]
        if kind == "extra_forbidden":
            known = _known_keys(loc[:-1])
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
            more = f" (did you mean {hint[0]}?)" if hint else f" (known keys: {', '.join(known)})"
            problems.append(f"{path}: unknown key{more}")
        elif kind == "missing":
            problems.append(f"{path}: is required")
        else:
            got = error.get("input")
            problems.append(f"{path}: {error['msg'].lower()}, found {show_value(got)}")
    return list(dict.fromkeys(problems))


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    if not loc:
        return list(TOP_LEVEL)
    if loc[0] == "defaults":
        return list(Defaults.model_fields)
    if loc[0] == "packages":
        return list(PackageModel.model_fields)
    if loc[0] == "algorithms":
        return ["class", "weight"]
    return []


def _platform_defaults(defaults: Defaults) -> list[str]:
    problems = []
    for key in Defaults.model_fields:
        if key.endswith("_min_platform"):
            value = getattr(defaults, key)
            if value is not None and parse_platform(value) is None:
                problems.append(f"defaults.{key}: {show(value)} should be {PLATFORM_SHAPE}")
    return problems


def _package(name: str, pkg: PackageModel) -> tuple[Package, list[str]]:
    where = f"packages.{name}"
    problems = []
    if not name.strip():
        problems.append("packages: package names should be non-empty")
    traits = {}
    if pkg.traits is not None:
        found = trait_problems(pkg.traits, f"{where}.traits")
        problems += found
        if not found:
            traits = freeze_traits(pkg.traits)
    minimum = PlatformMap(())
    if pkg.min_platform is not None:
        minimum, found = platform_map(pkg.min_platform, f"{where}.min_platform")
        problems += found
    ratios = {
        key: value
        for key, value in (
            ("cpu", pkg.overprovision_cpu),
            ("ram", pkg.overprovision_memory),
            ("disk", pkg.overprovision_storage),
        )
        if value is not None
    }
    if not ratios and pkg.overprovision_io is None and pkg.overprovision_network is None:
        # sdc-designation: a package without any ratio keeps RAM at 1.0.
        ratios = {"ram": 1.0}
    return (
        Package(
            name=name,
            ram=pkg.max_physical_memory,
            cpu_cap=pkg.cpu_cap,
            quota=pkg.quota,
            traits=traits,
            min_platform=minimum,
            ratios=ratios,
            spread=pkg.alloc_server_spread,
        ),
        problems,
    )


def _algorithm(name: str, ref: str | AlgorithmModel) -> tuple[AlgorithmRef, list[str]]:
    path = ref if isinstance(ref, str) else ref.class_
    weight = None if isinstance(ref, str) else ref.weight
    where = f"algorithms.{name}"
    if not _CLASS_PATH.match(path):
        return AlgorithmRef(path, weight), [
            f"{where}: {show(path)} should be a class path like package.module:Class"
        ]
    return AlgorithmRef(path, weight), []


def _check_algorithms(config: AllocatorConfig) -> list[str]:
    """Custom algorithms load when the configuration is read, so `berth validate` finds a bad one."""
    problems = []
    builtin = builtin_names()
    for name, ref in config.algorithms.items():
        where = f"algorithms.{name}"
        if name in builtin:
            problems.append(f"{where}: {name} is the name of a built-in algorithm; choose another")
        elif _CLASS_PATH.match(ref.path):
            try:
                load_path(ref.path, where)
            except InvalidConfig as exc:
                problems.append(exc.message)
    return problems
