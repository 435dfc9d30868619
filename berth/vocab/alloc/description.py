"""sdc-designation's chain description: `["pipe" | "or", member, ...]`, members being algorithm names or
nested lists. A pipe needs a member, an or two; every problem names its path
(`allocationDescription[2][1]`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from berth.json_annotation import show
from berth.vocab.alloc.plugin_names import NameLookup, lookup

Description = tuple[Any, ...]  # ("pipe" | "or", member, ...) with members names or nested tuples
MAX_DEPTH = 16
MAX_MEMBERS = 256


def show_value(value: Any) -> str:
    try:
        return show(value)
    except (TypeError, ValueError):
        return repr(value)


def parse_description(raw: Any, where: str, depth: int = 0) -> tuple[Description, list[str]]:
    """sdc-designation's chain: a list whose first element is the command (`pipe` or `or`), then members,
    each an algorithm name or a nested list. A pipe needs a member, an or two."""
    if not isinstance(raw, list) or not raw:
        return (), [
            f'{where}: should be a list whose first element is "pipe" or "or", found {show_value(raw)}'
        ]
    if depth >= MAX_DEPTH:
        return (), [f"{where}: lists are nested more than {MAX_DEPTH} deep"]
    command, members = raw[0], raw[1:]
    if command not in ("pipe", "or"):
        return (), [f'{where}[0]: the first element should be "pipe" or "or", found {show_value(command)}']
    problems = []
    if command == "pipe" and not members:
        problems.append(f"{where}: a pipe needs at least one member")
    if command == "or" and len(members) < 2:
        problems.append(f"{where}: an or needs at least two members, found {len(members)}")
    if len(members) > MAX_MEMBERS:
        problems.append(f"{where}: at most {MAX_MEMBERS} members are allowed")
    out: list[Any] = [command]
    for i, member in enumerate(members, 1):
        if isinstance(member, str) and member:
            out.append(member)
        elif isinstance(member, list):
            nested, found = parse_description(member, f"{where}[{i}]", depth + 1)
            problems += found
            out.append(nested)
        else:
            problems.append(
                f"{where}[{i}]: expected an algorithm name or a nested list, found {show_value(member)}"
            )
    return tuple(out), problems


def check_names(raw: Any, where: str, custom: Collection[str] = (), depth: int = 0) -> list[str]:
    """Every name must be an algorithm berth runs; one with no meaning on Kubernetes is refused with
    the reason, an unknown one is named (with the closest known name). `raw` is the chain as written
    (or a Description): each name is named by its position there, also after a member or a list that
    parse_description refuses, which is left to it."""
    if not isinstance(raw, list | tuple) or not raw or raw[0] not in ("pipe", "or") or depth >= MAX_DEPTH:
        return []
    problems = []
    for i, member in enumerate(raw[1:], 1):
        if isinstance(member, list | tuple):
            problems += check_names(member, f"{where}[{i}]", custom, depth + 1)
            continue
        if not isinstance(member, str) or not member:
            continue
        problem = algorithm_problem(member, lookup(member, custom))
        if problem is not None:
            problems.append(f"{where}[{i}]: {problem}")
    return problems


def algorithm_problem(name: str, found: NameLookup) -> str | None:
    """Why a chain cannot name `name` (`found` is its lookup), in the words of a problem after its
    path: one with no meaning on Kubernetes with the reason, an unknown one with the closest known
    name; None when berth runs it. The configuration's checks and the chain builder both say it so."""
    if found.refused:
        return f"algorithm {show(name)} has no meaning on Kubernetes: {found.refused}"
    if found.unknown:
        hint = f" (did you mean {found.suggestion}?)" if found.suggestion else ""
        return f"unknown algorithm {show(name)}{hint}"
    return None


def names_in(description: Description) -> list[str]:
    out = []
    for member in description[1:]:
        out += names_in(member) if isinstance(member, tuple) else [member]
    return out
