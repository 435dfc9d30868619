"""kube-scheduler's resource plugins (pkg/scheduler/framework/plugins/noderesources): NodeResourcesFit's
filter and the raw values of its LeastAllocated score and of BalancedAllocation, over cpu and memory.

Each raw value is one function over arrays: the fast path hands it every candidate at once, the rule
(one node) an array of one, so both work the value out the same way. berth.vocab.kube.score weights
them (kube uses them as they are, without normalising)."""

from __future__ import annotations

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


def least_allocated(
    cpu: np.ndarray, memory: np.ndarray, want_cpu: np.ndarray, want_memory: np.ndarray
) -> np.ndarray:
    """kube's leastResourceScorer over cpu and memory, weight 1 each (a resource a node has none of
    is left out)."""
    total = np.zeros(len(cpu), np.int64)
    weights = np.zeros(len(cpu), np.int64)
    for allocatable, requested in ((cpu, want_cpu), (memory, want_memory)):
        has = allocatable > 0
        safe = np.where(has, allocatable, 1)
        score = np.where(requested > allocatable, 0, ((allocatable - requested) * MAX_NODE_SCORE) // safe)
        total += np.where(has, score, 0)
        weights += has
    return np.where(weights > 0, total // np.maximum(weights, 1), 0)


def balanced_allocation(
    cpu: np.ndarray,
    memory: np.ndarray,
    used_cpu: np.ndarray,
    used_memory: np.ndarray,
    requested_cpu: int,
    requested_memory: int,
) -> np.ndarray:
    """kube's balancedResourceScorer over cpu and memory (skipped for a best-effort pod: 0)."""
    if not requested_cpu and not requested_memory:
        return np.zeros(len(cpu), np.int64)
    with_pod = _balance(cpu, memory, used_cpu + requested_cpu, used_memory + requested_memory)
    without = _balance(cpu, memory, used_cpu, used_memory)
    half = MAX_NODE_SCORE // 2
    delta = half + with_pod - without
    return half + np.where(delta >= 0, delta // 2, -((-delta) // 2))


def _balance(
    cpu: np.ndarray, memory: np.ndarray, want_cpu: np.ndarray, want_memory: np.ndarray
) -> np.ndarray:
    f_cpu = np.minimum(want_cpu / np.where(cpu > 0, cpu, 1), 1.0)
    f_memory = np.minimum(want_memory / np.where(memory > 0, memory, 1), 1.0)
    both = (cpu > 0) & (memory > 0)
    std = np.where(both, np.abs((f_cpu - f_memory) / 2), 0.0)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
