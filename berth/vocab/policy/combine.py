"""The AND of placement rules, in one place: what every policy of a pod, and every child of a
COMPOSITE AND, answers together for a node.

A node's answer is the first failure that no eviction can help (the rules after it are not asked
about that node), else the first one an eviction could help, else none: kube-scheduler reads the first
as "unresolvable" and does not preempt for it. `first_failure` answers for one node, `and_failures`
for a set of nodes, and both give the same answer for every node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

F = TypeVar("F")


def first_failure(found: Iterable[F | None], hopeless: Callable[[F], bool]) -> F | None:
    """The AND's failure of one node, from each rule's failure (None: it holds) in order; `found` is
    read only as far as the first hopeless one."""
    first: F | None = None
    for failure in found:
        if failure is None:
            continue
        if hopeless(failure):
            return failure
        if first is None:
            first = failure
    return first


def and_failures(
    parts: Iterable[Callable[[Mapping[str, Any]], Mapping[str, F]]],
    cands: Mapping[str, Any],
    hopeless: Callable[[F], bool],
) -> dict[str, F]:
    """first_failure() for every candidate, from each rule's failures over the candidates (in order);
    a node that already failed for good is not asked about again."""
    out: dict[str, F] = {}
    final: set[str] = set()
    for failures_of in parts:
        among = cands if not final else {n: s for n, s in cands.items() if n not in final}
        for name, failure in failures_of(among).items():
            current = out.get(name)
            if current is None or (hopeless(failure) and not hopeless(current)):
                out[name] = failure
            if hopeless(failure):
                final.add(name)
    return out
