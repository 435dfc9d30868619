"""What every allocator step shares: the configuration it was built with, the pod's sizes, a node's
capacity as the allocator counts it, and the overprovision ratios on both sides.

Units are sdc-designation's: RAM and disk in MiB, CPU in cpu_cap units (100 = one CPU, millicores / 10).

A node promises its allocatable resources times its overprovision ratio: its unreserved RAM is
`allocatable - (limits of its pods) / ratio`, and a pod needs `its RAM / the pod-side ratio`; it fits
while unreserved >= needed (sdc-designation's hard-filter-min-ram, likewise CPU and disk). A pod without a CPU
cap (no cpu limit or request) is promised no CPU and takes none: Kubernetes gives it the lowest CPU
weight, where the original counted such an instance as taking every CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from berth.cluster.model import Node
from berth.cluster.view import NodeColumn, NodeState
from berth.engine.step import PodContext
from berth.vocab.alloc.config import DEFAULT_CONFIG, AllocatorConfig, Defaults
from berth.vocab.alloc.request import EMPTY_REQUEST, AllocRequest, pod_cpu, pod_disk, pod_ram
from berth.vocab.alloc.values import node_ratios

MIB = 1 << 20
NODE_RATIOS = "berth.dev/overprovision-ratios"
RESOURCES = ("cpu", "ram", "disk")
SIZES_KEY = "alloc/.sizes"
USE_KEY = "alloc/.use"
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Setup:
    """What the chain builder hands every allocator step: the configuration, and whether
    override-overprovisioning is in force (it is in the chain and not disabled)."""

    config: AllocatorConfig = DEFAULT_CONFIG
    override: bool = True
    # The defaults' ratios, and the ratios of each distinct node annotation: read-only once made.
    _defaults: dict[str, float] = field(init=False, repr=False, compare=False)
    _by_annotation: dict[str, dict[str, float]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    # The defaults' ratios as a trace shows them ("cpu 1, ram 1, disk 1"), and as a hashable key.
    ratios_text: str = field(init=False, repr=False, compare=False)
    ratios_key: tuple[tuple[str, float], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = self.config.defaults
        ratios = {
            "cpu": d.overprovision_ratio_cpu,
            "ram": d.overprovision_ratio_ram,
            "disk": d.overprovision_ratio_disk,
        }
        object.__setattr__(self, "_defaults", ratios)
        object.__setattr__(self, "ratios_text", ", ".join(f"{k} {v:g}" for k, v in ratios.items()))
        object.__setattr__(self, "ratios_key", tuple(sorted(ratios.items())))

    @property
    def defaults(self) -> Defaults:
        return self.config.defaults

    def default_ratios(self) -> dict[str, float]:
        return self._defaults

    def node_ratios(self, node: Node) -> dict[str, float]:
        """The ratios a node promises under: the defaults' overprovision_ratio_*, or with
        override-overprovisioning off, its annotation berth.dev/overprovision-ratios over them."""
        raw = node.annotations.get(NODE_RATIOS) if not self.override else None
        if not raw:
            return self._defaults
        ratios = self._by_annotation.get(raw)
        if ratios is None:
            parsed = node_ratios(raw)
            ratios = {**self._defaults, **(parsed.value if not parsed.problem else {})}
            self._by_annotation[raw] = ratios
        return ratios

    def pod_ratios(self, request: AllocRequest) -> dict[str, float]:
        """The ratios the pod asks for: the defaults' under override-overprovisioning, else its
        package's (a package without any asks RAM 1.0); no entry means "does not matter"."""
        if self.override:
            return self.default_ratios()
        return dict(request.package.ratios) if request.package is not None else {}


class AllocStep:
    """Mixed into the engine's step classes: `alloc/<seed name>` and the Setup."""

    seed_name: ClassVar[str] = ""
    name: ClassVar[str]  # the engine's step class it is mixed into sets it

    def __init__(self, setup: Setup | None = None) -> None:
        self.setup = setup or Setup()

    @property
    def defaults(self) -> Defaults:
        return self.setup.defaults


def request(ctx: PodContext) -> AllocRequest:
    return getattr(ctx.spec, "alloc", None) or EMPTY_REQUEST


@dataclass(frozen=True, slots=True)
class Sizes:
    """The pod's RAM (MiB), CPU cap (cpu_cap units) and disk quota (MiB), and where each comes from."""

    ram: float
    cpu: float
    disk: float
    ram_from: str
    cpu_from: str
    disk_from: str

    def of(self, resource: str) -> float:
        return {"ram": self.ram, "cpu": self.cpu, "disk": self.disk}[resource]

    def source(self, resource: str) -> str:
        return {"ram": self.ram_from, "cpu": self.cpu_from, "disk": self.disk_from}[resource]


def sizes(ctx: PodContext) -> Sizes:
    cached = ctx.prepared.get(SIZES_KEY)
    if cached is None:
        req = request(ctx)
        (ram, ram_from), (cpu, cpu_from) = pod_ram(req, ctx.pod.limits), pod_cpu(req, ctx.pod.limits)
        disk, disk_from = pod_disk(req, ctx.pod.limits)
        cached = ctx.prepared[SIZES_KEY] = Sizes(ram, cpu, disk, ram_from, cpu_from, disk_from)
    return cached


@dataclass(frozen=True, slots=True)
class NodeUse:
    """A node's allocatable resources in sdc-designation's units and what the limits of its pods take."""

    total: dict[str, float]
    used: dict[str, float]
    pods: int
    uncapped: int

    @property
    def valid(self) -> bool:
        return self.total["ram"] > 0 and self.total["cpu"] > 0


def node_use(state: NodeState, ctx: PodContext | None) -> NodeUse:
    """The node's use, worked out once per node and decision (the counters do not change meanwhile)."""
    if ctx is None:
        return _node_use(state)
    cache = ctx.prepared.get(USE_KEY)
    if cache is None:
        cache = ctx.prepared[USE_KEY] = {}
    use = cache.get(state.node.name)
    if use is None:
        use = cache[state.node.name] = _node_use(state)
    return use


def _node_use(state: NodeState) -> NodeUse:
    node = state.node
    total = {
        "ram": node.allocatable.get("memory", 0) / MIB,
        "cpu": node.allocatable.get("cpu", 0) / 10,
        "disk": node.allocatable.get("ephemeral-storage", 0) / MIB,
    }
    limited = state.limited
    used = {
        "ram": limited.get("memory", 0) / MIB,
        "cpu": limited.get("cpu", 0) / 10,
        "disk": limited.get("ephemeral-storage", 0) / MIB,
    }
    return NodeUse(total, used, len(state.pods), state.uncapped)


def unreserved_column(ctx: PodContext, setup: Setup, resource: str) -> NodeColumn | None:
    """Every node's unreserved `resource`, kept by the view and worked out again only for nodes whose
    pods changed; None when nodes have ratios of their own (override-overprovisioning off), as the
    values then depend on each node's annotation."""
    if not setup.override:
        return None
    ratios = setup.default_ratios()
    key = ("alloc/unreserved", resource, setup.ratios_key)
    return ctx.view.column(key, lambda state: unreserved(_node_use(state), ratios, resource))


def pod_count_column(ctx: PodContext) -> NodeColumn:
    """Every node's pod count (the pod itself not taken off its node)."""
    return ctx.view.column("alloc/pods", lambda state: len(state.pods))


def unreserved(use: NodeUse, ratios: dict[str, float], resource: str) -> float:
    """What the node still promises of a resource under its ratio (sdc-designation's unreserved_*). A pod
    without a CPU cap is promised no CPU (Kubernetes gives it the lowest CPU weight), so it takes none."""
    return use.total[resource] - use.used[resource] / ratios[resource]


def needed(size: float, resource: str, pod_ratios: dict[str, float], node_ratios: dict[str, float]) -> float:
    """What the pod takes from a node's unreserved resource: its size over the pod-side ratio (the
    node's when the pod gives none: overprovisioning it does not care about). Disk rounds up."""
    ratio = pod_ratios.get(resource) or node_ratios[resource]
    value = size / ratio
    return math.ceil(value - EPSILON) if resource == "disk" else value


def fits(free: Any, need: float) -> Any:
    """Whether `free` covers `need`; `free` may be an array of nodes' values (elementwise)."""
    return free + EPSILON >= need


def mib(value: float) -> Any:
    """A number for a message: whole numbers as int, else two decimals."""
    rounded = round(value, 2)
    return int(rounded) if float(rounded).is_integer() else rounded
