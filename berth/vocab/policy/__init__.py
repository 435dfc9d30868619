"""Placement policies (the Drove seed): PlacementPolicy objects compiled into predicate trees.

- `model`: the pydantic models of what users write, with field-path errors;
- `compile`: validation and compilation once per change, Drove's automatic NO_TAG, label selectors;
- `cel`: RULE_BASED rules in CEL, their context and limits;
- `steps`: the engine step that asks the governing policies about every candidate node.
"""

from berth.cluster.view import use_policy_compiler
from berth.vocab.policy.compile import (
    CompiledPolicy,
    Failure,
    Selector,
    compile_policy,
    is_policy_tree,
    load_policy,
    load_tree,
    missing_policy,
    reload_policy,
)


class _Compiler:
    """What the cluster view calls to compile the PlacementPolicy objects it holds."""

    reload = staticmethod(reload_policy)
    missing = staticmethod(missing_policy)


use_policy_compiler(_Compiler())

__all__ = [
    "CompiledPolicy",
    "Failure",
    "Selector",
    "compile_policy",
    "is_policy_tree",
    "load_policy",
    "load_tree",
    "missing_policy",
]
