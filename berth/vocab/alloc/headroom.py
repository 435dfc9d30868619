"""`berth capacity`: how many more pods of one shape each node, and the cluster, can still take under
the capacity filters of the configured chain and the overprovision ratios.

A node that is not Ready or has no allocatable memory or cpu takes none. Otherwise each capacity filter
in the chain bounds the count: hard-filter-min-ram, -min-cpu and -min-disk (a resource the pod does not
ask for does not bound it), hard-filter-vm-count (filter_vm_limit), hard-filter-min-free-disk (free
ephemeral storage stays at least minimum_free_disk), and hard-filter-overprovision-ratios and
hard-filter-capness, which make it 0 or leave it. The smallest bound is the answer and names the
limiting resource; with no bound the count is unbounded (null). Placing one more pod takes its size
over the node's ratio from the node's unreserved resource, as the filters count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from berth.cluster.model import Pod
from berth.cluster.view import ClusterView, NodeState
from berth.engine.chain import flatten
from berth.engine.draws import Seeded
from berth.engine.step import PodContext
from berth.vocab.alloc.base import (
    EPSILON,
    MIB,
    RESOURCES,
    AllocStep,
    Setup,
    mib,
    needed,
    node_use,
    sizes,
    unreserved,
)
from berth.vocab.alloc.capacity import canonical
from berth.vocab.alloc.config import AllocatorConfig
from berth.vocab.alloc.state_filters import node_problem

BOUNDS = {
    "alloc/hard-filter-min-ram": "ram",
    "alloc/hard-filter-min-cpu": "cpu",
    "alloc/hard-filter-min-disk": "disk",
    "alloc/hard-filter-vm-count": "pods",
    "alloc/hard-filter-min-free-disk": "free-disk",
}


@dataclass(frozen=True, slots=True)
class NodeHeadroom:
    name: str
    fits: int | None  # None: no filter of the chain bounds it
    limited_by: str
    unreserved: dict[str, Any] = field(default_factory=dict)
    needed: dict[str, Any] = field(default_factory=dict)
    pods: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fits": self.fits,
            "limitedBy": self.limited_by,
            "unreserved": self.unreserved,
            "needed": self.needed,
            "pods": self.pods,
        }


@dataclass(frozen=True, slots=True)
class Headroom:
    pod: str
    nodes: tuple[NodeHeadroom, ...]
    bounds: tuple[str, ...]

    @property
    def total(self) -> int | None:
        if any(n.fits is None for n in self.nodes):
            return None
        return sum(n.fits or 0 for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "total": self.total,
            "filters": list(self.bounds),
            "nodes": [n.to_dict() for n in self.nodes],
        }


def headroom(pod: Pod, view: ClusterView, config: AllocatorConfig) -> Headroom:
    """The headroom of every node of the view for pods shaped like `pod`. InvalidAnnotation when the
    pod's annotations are invalid (it could not be placed at all)."""
    from berth.pipeline import build_pipeline  # the chain decides which filters bound the count

    pipeline = build_pipeline(config, offline=True)
    steps = [s for s in flatten(pipeline.chain) if isinstance(s, AllocStep)]
    setup = steps[0].setup if steps else Setup(config=config, override=False)
    names = {s.name for s in flatten(pipeline.chain)}
    spec = pipeline.compile_pod(pod)
    ctx = PodContext(pod=pod, spec=spec, view=view, randoms=Seeded(0))
    bounds = tuple(name for name in BOUNDS if name in names)
    rows = tuple(_node(state, ctx, setup, names) for state in view.states())
    return Headroom(pod=pod.key, nodes=rows, bounds=bounds)


def _node(state: NodeState, ctx: PodContext, setup: Setup, names: set[str]) -> NodeHeadroom:
    node = state.node
    name = node.name
    if not node.ready:
        return NodeHeadroom(name, 0, "not Ready")
    problem = node_problem(node)
    if problem is not None:
        return NodeHeadroom(name, 0, f"invalid: {problem}")
    size = sizes(ctx)
    use = node_use(state, ctx)
    node_ratios = setup.node_ratios(node)
    pod_ratios = setup.pod_ratios(ctx.spec.alloc)
    free = {r: unreserved(use, node_ratios, r) for r in RESOURCES}
    need = {r: needed(size.of(r), r, pod_ratios, node_ratios) for r in RESOURCES}
    row: dict[str, Any] = {
        "unreserved": {r: mib(v) for r, v in free.items()},
        "needed": {r: mib(need[r]) for r in RESOURCES if size.of(r) > 0},
        "pods": use.pods,
    }
    defaults = setup.defaults

    if "alloc/hard-filter-overprovision-ratios" in names and not setup.override:
        package = ctx.spec.alloc.package
        for resource in RESOURCES:
            want = canonical(package.ratios.get(resource)) if package is not None else None
            if want is not None and want != canonical(node_ratios[resource]):
                return NodeHeadroom(name, 0, "overprovision-ratios", **row)
    if "alloc/hard-filter-capness" in names and defaults.filter_capness:
        capped = size.cpu > 0
        if (capped and use.uncapped) or (not capped and use.pods - use.uncapped):
            return NodeHeadroom(name, 0, "capness", **row)

    counts: dict[str, int] = {}
    for step, bound in BOUNDS.items():
        if step not in names:
            continue
        if bound in RESOURCES and defaults.filter_min_resources and size.of(bound) > 0:
            step_size = size.of(bound) / node_ratios[bound]
            if free[bound] + EPSILON < need[bound]:
                counts[bound] = 0
            else:
                counts[bound] = math.floor((free[bound] - need[bound]) / step_size + EPSILON) + 1
        elif bound == "pods":
            counts[bound] = max(0, defaults.filter_vm_limit - use.pods)
        elif bound == "free-disk" and defaults.minimum_free_disk is not None:
            count = _free_disk(state, ctx, defaults.minimum_free_disk)
            if count is not None:
                counts[bound] = count
    if not counts:
        return NodeHeadroom(name, None, "", **row)
    limiting = min(counts, key=lambda k: counts[k])
    return NodeHeadroom(name, counts[limiting], limiting, **row)


def _free_disk(state: NodeState, ctx: PodContext, minimum: int) -> int | None:
    requested = state.requested.get("ephemeral-storage", 0)
    free = (state.node.allocatable.get("ephemeral-storage", 0) - requested) / MIB
    if free + EPSILON < minimum:
        return 0
    each = ctx.pod.requests.get("ephemeral-storage", 0) / MIB
    if each <= 0:
        return None
    return math.floor((free - minimum) / each + EPSILON) + 1
