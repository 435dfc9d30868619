"""Policies read from files, for `berth simulate --policy` and `berth validate`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from berth.cluster.snapshot import read_documents
from berth.errors import InvalidPolicy
from berth.vocab.policy.compile import CompiledPolicy, is_policy_tree, load_policy, load_tree
from berth.vocab.policy.schema import KIND


def policies_in(path: str) -> list[CompiledPolicy]:
    """Every PlacementPolicy object in the file, or the bare policy tree `{"type": ...}` it holds
    (named after the file), compiled; invalid ones carry their errors."""
    objects: list[Any] = read_documents(path)
    found = []
    for obj in objects:
        if obj.get("kind") == KIND:
            found.append(load_policy(obj))
        elif is_policy_tree(obj):
            found.append(load_tree(obj, label=Path(path).name))
    if not found:
        raise InvalidPolicy(
            f'{path}: no PlacementPolicy object or policy tree ({{"type": ...}}) found', field="policy"
        )
    return found


def load_policy_files(paths: Iterable[str]) -> list[CompiledPolicy]:
    """The policies of every file, or InvalidPolicy listing every problem of every invalid one."""
    policies: list[CompiledPolicy] = []
    problems: list[str] = []
    field = ""
    for path in paths:
        for policy in policies_in(path):
            policies.append(policy)
            what = "policy tree" if policy.label else f"PlacementPolicy {policy.ref}"
            problems.extend(f"{path}: {what}: {e}" for e in policy.errors)
            field = field or (policy.errors[0].split(":", 1)[0] if policy.errors else "")
    if problems:
        raise InvalidPolicy.from_problems(problems, field=field)
    return policies
