"""kube-scheduler's resource plugins (pkg/scheduler/framework/plugins/noderesources): NodeResourcesFit's
filter and the raw values of its LeastAllocated score and of BalancedAllocation, over cpu and memory.

Each raw value is one function, written in a few array operations: the fast path works it out over
arrays of nodes (ARRAYS), the rule and the few nodes changed since a pod of the same requests over one
node's numbers (NUMBERS), so every path works the value out the same way. berth.vocab.kube.score weights
them (kube uses them as they are, without normalising)."""

from __future__ import annotations

from typing import Any

import numpy as np

from berth.cluster.quantity import show_units
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext
from berth.engine.types import Kind, Reason
from berth.vocab import step_names

MAX_NODE_SCORE = 100  # kube's framework.MaxNodeScore: a score plugin scores a node 0..100


class NodeResourcesFit(NodeFilter[None]):
    name = step_names.KUBE_RESOURCES
    summary = "hard: the pod's requests fit the node's allocatable minus the requests of its pods"

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        pods = len(state.pods)
        allowed = state.node.allocatable.get("pods")
        if allowed is not None and pods + 1 > allowed:
            return Reason(self.name, Kind.EXHAUSTED, "too many pods", {"pods": pods, "allocatable": allowed})
        for resource, wanted in sorted(ctx.pod.requests.items()):
            if wanted <= 0 or resource == "pods":
                continue
            free = state.node.allocatable.get(resource, 0) - state.requested.get(resource, 0)
            if wanted > free:
                return Reason(
                    self.name,
                    Kind.EXHAUSTED,
                    f"insufficient {resource}",
                    # as kubectl writes quantities: "500m" of cpu, "2Gi" of memory
                    {"requested": show_units(resource, wanted), "free": show_units(resource, max(free, 0))},
                )
        return None


class _Arrays:
    """The array operations the resource scores are written in, over numpy arrays: every node at once."""

    where = staticmethod(np.where)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    abs = staticmethod(np.abs)

    @staticmethod
    def zeros(like: Any) -> Any:
        return np.zeros(len(like), np.int64)

    @staticmethod
    def whole(values: Any) -> Any:  # truncated toward zero, as Go converts a float to int64
        return values.astype(np.int64)


class _Numbers:
    """The same operations over one node's Python numbers: the scores of a node or two cost a few
    microseconds, where arrays of one would cost about fifty array operations of a few microseconds
    each with the caches cold."""

    minimum = staticmethod(min)
    maximum = staticmethod(max)
    abs = staticmethod(abs)

    @staticmethod
    def where(condition: Any, yes: Any, no: Any) -> Any:
        return yes if condition else no

    @staticmethod
    def zeros(like: Any) -> Any:
        return 0

    @staticmethod
    def whole(value: Any) -> Any:
        return int(value)


# How the functions below are worked out: ARRAYS over arrays of nodes, NUMBERS over one node's ints.
ARRAYS, NUMBERS = _Arrays(), _Numbers()


def least_allocated(cpu: Any, memory: Any, want_cpu: Any, want_memory: Any, xp: Any = ARRAYS) -> Any:
    """kube's leastResourceScorer over cpu and memory, weight 1 each (a resource a node has none of
    is left out)."""
    total = weights = xp.zeros(cpu)
    for allocatable, requested in ((cpu, want_cpu), (memory, want_memory)):
        has = allocatable > 0
        safe = xp.where(has, allocatable, 1)
        score = xp.where(requested > allocatable, 0, ((allocatable - requested) * MAX_NODE_SCORE) // safe)
        total = total + xp.where(has, score, 0)
        weights = weights + has
    return xp.where(weights > 0, total // xp.maximum(weights, 1), 0)


def balanced_allocation(
    cpu: Any,
    memory: Any,
    used_cpu: Any,
    used_memory: Any,
    requested_cpu: int,
    requested_memory: int,
    xp: Any = ARRAYS,
) -> Any:
    """kube's balancedResourceScorer over cpu and memory (skipped for a best-effort pod: 0)."""
    if not requested_cpu and not requested_memory:
        return xp.zeros(cpu)
    with_pod = _balance(cpu, memory, used_cpu + requested_cpu, used_memory + requested_memory, xp)
    without = _balance(cpu, memory, used_cpu, used_memory, xp)
    half = MAX_NODE_SCORE // 2
    delta = half + with_pod - without
    return half + xp.where(delta >= 0, delta // 2, -((-delta) // 2))


def _balance(cpu: Any, memory: Any, want_cpu: Any, want_memory: Any, xp: Any) -> Any:
    f_cpu = xp.minimum(want_cpu / xp.where(cpu > 0, cpu, 1), 1.0)
    f_memory = xp.minimum(want_memory / xp.where(memory > 0, memory, 1), 1.0)
    both = (cpu > 0) & (memory > 0)
    std = xp.where(both, xp.abs((f_cpu - f_memory) / 2), 0.0)
    return xp.whole((1 - std) * MAX_NODE_SCORE)
