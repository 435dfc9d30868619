"""Custom algorithms: engine steps of your own, named in allocationDescription like the built-ins.

A custom algorithm is a class deriving from one of the engine's step bases (berth.engine.NodeFilter,
SetFilter, Tier or Scorer) with a non-empty class attribute `name` (the step name traces and reasons
show, e.g. "example/hard-filter-maintenance"). berth finds it

- in the entry-point group `berth.algorithms` of an installed package: the entry point's name is the
  name a chain uses, its value the class (`my-filter = "my_package.filters:MyFilter"`);
- in the configuration: `algorithms: {my-filter: "my_package.filters:MyFilter"}`, or
  `{my-scorer: {class: "my_package.scorers:MyScorer", weight: 2}}` for a scorer's weight.

It is built with `Class.from_config(config)` when the class has that classmethod (it receives the
AllocatorConfig), else `Class()`. docs/allocator.md shows a complete example package.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from berth.engine.step import NodeFilter, Scorer, SetFilter, Step, Tier
from berth.errors import InvalidConfig

GROUP = "berth.algorithms"
BASES = (NodeFilter, SetFilter, Tier, Scorer)


@lru_cache(maxsize=1)
def discovered() -> dict[str, EntryPoint]:
    """The algorithms installed packages offer, by name."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def load_path(path: str, where: str) -> type[Step]:
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:  # an import can fail in any way; the configuration is what is wrong
        raise InvalidConfig(f"{where}: cannot load {path}: {type(exc).__name__}: {exc}", field=where) from exc
    return check_class(target, where)


def load_entry_point(name: str) -> type[Step]:
    where = f"entry point {name} ({GROUP})"
    try:
        target = discovered()[name].load()
    except Exception as exc:  # as above: report, never crash
        raise InvalidConfig(f"{where}: cannot load: {type(exc).__name__}: {exc}", field=where) from exc
    return check_class(target, where)


def check_class(target: Any, where: str) -> type[Step]:
    if not isinstance(target, type) or not issubclass(target, BASES):
        raise InvalidConfig(
            f"{where}: {target!r} should be a class deriving from NodeFilter, SetFilter, Tier or Scorer",
            field=where,
        )
    if not isinstance(getattr(target, "name", None), str) or not target.name:
        raise InvalidConfig(
            f"{where}: {target.__name__} should set a non-empty class attribute `name`", field=where
        )
    return target


def build(cls: type[Step], config: Any, weight: float | None, where: str) -> Step:
    try:
        step = cls.from_config(config) if hasattr(cls, "from_config") else cls()
    except Exception as exc:  # a custom constructor can fail in any way
        raise InvalidConfig(
            f"{where}: cannot build {cls.__name__}: {type(exc).__name__}: {exc}", field=where
        ) from exc
    if weight is not None:
        if not isinstance(step, Scorer):
            raise InvalidConfig(f"{where}: weight is given but {cls.__name__} is not a Scorer", field=where)
        step.weight = weight
    return step
