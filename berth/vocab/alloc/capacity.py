"""The allocator's capacity filters: what nodes promise under overprovision ratios, and the guards
around it (pod count, CPU capness, ratios that must agree, the reserve of large nodes).

Kubernetes' own NodeResourcesFit counts requests against allocatable; these count limits against
allocatable x ratio, so a node is never promised more than its operator allows (base.py has the
arithmetic). A shortage is `exhausted`: evicting pods could free the node.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any

import numpy as np

from berth.cluster.view import NodeColumn, NodeState
from berth.engine.step import Kept, MemoKey, NodeFilter, Noted, PodContext, Removals, SetFilter, Skipped, skip
from berth.engine.types import Kind, Phase, Reason
from berth.vocab.alloc.base import (
    MIB,
    AllocStep,
    fits,
    mib,
    needed,
    node_use,
    pod_count_column,
    request,
    sizes,
    unreserved,
    unreserved_column,
)
from berth.vocab.alloc.config import Package

UNITS = {"ram": "MiB RAM", "cpu": "cpu_cap", "disk": "MiB disk"}
LARGE_SHARE = 0.15


@dataclass(frozen=True, slots=True)
class _Need:
    size: float
    source: str
    pod_ratios: dict[str, float]


def _exceeding(
    column: NodeColumn, cands: Mapping[str, NodeState], fails: Any, check: Any, ctx: PodContext
) -> Mapping[str, Reason]:
    """The candidates `check` removes, asking only the nodes whose column value `fails` (a test of the
    column's array, elementwise)."""
    layout = ctx.view.slots()
    suspects = [
        n
        for n in map(layout.names.__getitem__, np.flatnonzero(fails(column.array(layout))).tolist())
        if n in cands
    ]
    out = {}
    for name in suspects:
        reason = check(cands[name])
        if reason is not None:
            out[name] = reason
    return Removals(out)


class _MinResource(AllocStep, NodeFilter[_Need]):
    resource = ""
    what = ""  # the skip text when the pod has none of the resource
    shared_reason = True

    def prepare(self, ctx: PodContext) -> _Need | Skipped:
        if not self.defaults.filter_min_resources:
            return skip("filter_min_resources is false")
        size = sizes(ctx)
        if size.of(self.resource) <= 0:
            return skip(self.what)
        return _Need(size.of(self.resource), size.source(self.resource), self.setup.pod_ratios(request(ctx)))

    def check(self, state: NodeState, prepared: _Need, ctx: PodContext) -> Reason | None:
        node_ratios = self.setup.node_ratios(state.node)
        use = node_use(state, ctx)
        free = unreserved(use, node_ratios, self.resource)
        need = needed(prepared.size, self.resource, prepared.pod_ratios, node_ratios)
        if fits(free, need):
            return None
        ratio = prepared.pod_ratios.get(self.resource)
        per = f", overprovision ratio {ratio:g}" if ratio else ""
        values: dict[str, Any] = {"unreserved": mib(free), "needed": mib(need)}
        return Reason(
            self.name,
            Kind.EXHAUSTED,
            f"not enough unreserved {self.label} for the pod's {mib(prepared.size)} {UNITS[self.resource]} "
            f"({prepared.source}{per})",
            values,
        )

    def removals(
        self, cands: Mapping[str, NodeState], prepared: _Need, ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        # Under override-overprovisioning every node has the same ratios, so the pod needs the same
        # amount everywhere: when the node with the least unreserved has room, every node has.
        column = unreserved_column(ctx, self.setup, self.resource)
        if column is None:
            return super().removals(cands, prepared, ctx)
        need = needed(prepared.size, self.resource, prepared.pod_ratios, self.setup.default_ratios())
        if fits(column.low, need):
            return {}
        return _exceeding(
            column, cands, lambda free: ~fits(free, need), lambda s: self.check(s, prepared, ctx), ctx
        )

    @property
    def label(self) -> str:
        return {"ram": "RAM", "cpu": "CPU", "disk": "disk"}[self.resource]


class HardFilterMinRam(_MinResource):
    name = "alloc/hard-filter-min-ram"
    summary = "hard: unreserved RAM (allocatable - limits / ratio) covers the pod's RAM / ratio"
    resource = "ram"
    what = "the pod has no memory limit or request and no package RAM"


class HardFilterMinCpu(_MinResource):
    name = "alloc/hard-filter-min-cpu"
    summary = "hard: unreserved CPU (allocatable - CPU caps / ratio) covers the pod's CPU cap / ratio"
    resource = "cpu"
    what = "the pod has no CPU cap (no cpu limit or request, no package cpu_cap)"


class HardFilterMinDisk(_MinResource):
    name = "alloc/hard-filter-min-disk"
    summary = "hard: unreserved ephemeral storage covers the pod's disk quota / ratio"
    resource = "disk"
    what = "the pod has no ephemeral-storage limit or request and no package quota"


class HardFilterMinFreeDisk(AllocStep, NodeFilter[int]):
    name = "alloc/hard-filter-min-free-disk"
    summary = "hard: allocatable ephemeral storage minus the pods' requests is at least minimum_free_disk"

    def prepare(self, ctx: PodContext) -> int | Skipped:
        minimum = self.defaults.minimum_free_disk
        return skip("no minimum_free_disk set") if minimum is None else minimum

    def check(self, state: NodeState, prepared: int, ctx: PodContext) -> Reason | None:
        used = state.requested.get("ephemeral-storage", 0)
        free = max(0, state.node.allocatable.get("ephemeral-storage", 0) - used) // MIB
        if free >= prepared:
            return None
        return Reason(
            self.name,
            Kind.EXHAUSTED,
            f"node has less free disk than minimum_free_disk={prepared} MiB",
            {"free": free},
        )


class HardFilterVmCount(AllocStep, NodeFilter[None]):
    name = "alloc/hard-filter-vm-count"
    summary = "hard: the node hosts fewer pods than filter_vm_limit"
    shared_reason = True

    def removals(
        self, cands: Mapping[str, NodeState], prepared: None, ctx: PodContext
    ) -> Mapping[str, Reason]:
        limit = self.defaults.filter_vm_limit
        column = pod_count_column(ctx)
        if column.high < limit:  # the busiest node has room
            return {}
        return _exceeding(
            column, cands, lambda pods: pods >= limit, lambda s: self.check(s, prepared, ctx), ctx
        )

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:
        limit = self.defaults.filter_vm_limit
        pods = node_use(state, ctx).pods
        if pods < limit:
            return None
        return Reason(
            self.name,
            Kind.EXHAUSTED,
            f"node hosts the maximum of {limit} pods (filter_vm_limit)",
            {"pods": pods},
        )


class HardFilterCapness(AllocStep, NodeFilter[bool]):
    name = "alloc/hard-filter-capness"
    summary = "hard: pods with and without a CPU cap do not share a node (filter_capness)"

    def prepare(self, ctx: PodContext) -> bool | Skipped:
        if not self.defaults.filter_capness:
            return skip("filter_capness is false")
        return sizes(ctx).cpu > 0

    def check(self, state: NodeState, prepared: bool, ctx: PodContext) -> Reason | None:
        use = node_use(state, ctx)
        capped = use.pods - use.uncapped
        if prepared and use.uncapped:
            return Reason(
                self.name,
                Kind.EXHAUSTED,
                "the pod has a CPU cap and the node hosts pods without one",
                {"uncapped_pods": use.uncapped},
            )
        if not prepared and capped:
            return Reason(
                self.name,
                Kind.EXHAUSTED,
                "the pod has no CPU cap (no cpu limit or request) and the node hosts pods with one",
                {"capped_pods": capped},
            )
        return None


def canonical(ratio: float | None) -> str | None:
    """Ratios compare with two decimals (1.001 is 1.00)."""
    return None if not ratio else f"{ratio:.2f}"


class HardFilterOverprovisionRatios(AllocStep, NodeFilter[Package]):
    name = "alloc/hard-filter-overprovision-ratios"
    summary = "hard: the node's overprovision ratios are the ones the pod's package asks for"

    def prepare(self, ctx: PodContext) -> Package | Skipped:
        if self.setup.override:
            ratios = self.setup.ratios_text
            return skip(f"override-overprovisioning is in force: every node and pod use {ratios}")
        package = request(ctx).package
        if package is None:
            return skip("the pod names no package")
        return package

    def check(self, state: NodeState, prepared: Package, ctx: PodContext) -> Reason | None:
        node_ratios = self.setup.node_ratios(state.node)
        for resource in ("cpu", "ram", "disk"):
            want = canonical(prepared.ratios.get(resource))
            if want is None:
                continue  # sdc-designation: a ratio not given does not matter
            have = canonical(node_ratios[resource])
            if want != have:
                return Reason(
                    self.name,
                    Kind.UNMET,
                    f"package {prepared.name} asks overprovision ratio {resource} {want}",
                    {"node_ratio": have},
                )
        return None

    def constraint(self, prepared: Package) -> str | None:
        return f"the overprovision ratios of package {prepared.name}"


ORDER = "alloc/hard-filter-large-servers/order"
MENDED_AT_MOST = 64  # more nodes changed than this since the order was made: made again


class HardFilterLargeServers(AllocStep, SetFilter[None]):
    """Keeps the largest nodes in reserve for large pods: the 15% of nodes with the most unreserved
    RAM (floor, so nothing for 6 nodes or fewer). Wrap it as [or, hard-filter-large-servers, identity]
    so it can never leave no node."""

    name = "alloc/hard-filter-large-servers"
    summary = "hard: the 15% of nodes with the most unreserved RAM are kept in reserve"
    phase = Phase.HARD

    def prepare(self, ctx: PodContext) -> Skipped | None:
        return None if self.defaults.filter_large_servers else skip("filter_large_servers is false")

    def select(self, states: Sequence[NodeState], prepared: None, ctx: PodContext) -> dict[str, Reason]:
        count = (len(states) * 3) // 20  # floor(n x 0.15) without floating point
        if count < 1:
            return {}
        free = {
            s.node.name: unreserved(node_use(s, ctx), self.setup.node_ratios(s.node), "ram") for s in states
        }
        largest = sorted(free, key=lambda name: (-free[name], name))[:count]
        return {name: self._reason(count, len(states), free[name]) for name in largest}

    def memo_key(self, prepared: None, ctx: PodContext) -> MemoKey | None:
        # The same candidates and unreserved RAM, the same reserve.
        column = unreserved_column(ctx, self.setup, "ram")
        return None if column is None else ((), (column, column.version))

    def select_among(
        self, cands: Mapping[str, NodeState], prepared: None, ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        count = (len(cands) * 3) // 20
        column = unreserved_column(ctx, self.setup, "ram")
        if count < 1 or column is None:
            return super().select_among(cands, prepared, ctx)
        # The reserve is the first `count` candidates along the order of every node by unreserved
        # RAM (highest first) and name.
        total = len(cands)
        if len(cands) * 2 < len(ctx.view):
            largest, kept_free, kept = self._largest(cands, column, ctx, count)
            left: tuple[Mapping[str, NodeState], Mapping[str, NodeState]] | None = (cands, kept)
        else:
            values = column.values
            largest = list(islice(filter(cands.__contains__, self._order(column, ctx)), count))
            kept_free = {name: values[name] for name in largest}  # as they were at this decision
            left = None
        reserve = Removals.named(
            largest, lambda name: self._reason(count, total, kept_free[name]), shared=True, left=left
        )
        return Noted(reserve, (kept_free[largest[-1]], kept_free))  # for mend(): the floor, the values

    def mend(self, before: Kept, cands: Mapping[str, NodeState], prepared: None, ctx: PodContext) -> Any:
        # The same candidates, where only nodes outside the reserve changed and stayed below its
        # smallest value (the node the last pod of a burst went to), keep the same reserve.
        column, version = before.state
        if before.notes is None or column is not unreserved_column(ctx, self.setup, "ram"):
            return None
        floor, in_reserve = before.notes
        changed = column.changed_since(version)
        values = column.values
        if changed is not None and all(
            n not in cands or (n not in in_reserve and values[n] < floor) for n in changed
        ):
            return before.answer
        return None

    def _largest(
        self, cands: Mapping[str, NodeState], column: NodeColumn, ctx: PodContext, count: int
    ) -> tuple[list[str], dict[str, float], Mapping[str, NodeState]]:
        """The first `count` candidates by unreserved RAM (highest first) and name with their values
        (as they were at this decision), sorted from their slots, and the candidates left, not
        copied. For a few of the nodes (kube-scheduler's sample: a run of consecutive nodes in its
        own order, where most nodes tie), the walk along every node's order would pass most of the
        view before it has met `count` of them; a copy of the candidates less the reserve, and the
        values read from the column's dict by name, would each cost a cache miss per node."""
        layout = ctx.view.slots()
        at = ctx.slots(cands)
        free = column.array(layout).take(at)
        by = np.lexsort((layout.rank.take(at), -free))
        reserve, left = by[:count], np.sort(by[count:])  # the left ones in candidate order
        largest = list(map(layout.names.__getitem__, at.take(reserve).tolist()))
        kept_free = dict(zip(largest, free.take(reserve).tolist(), strict=True))
        return largest, kept_free, ctx.remaining(cands, largest, at.take(left))

    def _order(self, column: NodeColumn, ctx: PodContext) -> Iterator[str]:
        """Every node of the view by unreserved RAM, highest first, then by name. Kept until a node
        record changes, as a sorted list of (-value, name); the few nodes worked out again since (the
        last placements) are moved to their new places."""
        held: dict[NodeColumn, tuple[int, list[tuple[float, str]], dict[str, tuple[float, str]]]]
        held = ctx.view.node_memo(ORDER, dict)
        kept = held.get(column)
        if kept is not None and kept[0] != column.version:
            changed = column.changed_since(kept[0])
            entries, by_name = kept[1], kept[2]
            values = column.values
            if changed is not None and len(changed) <= MENDED_AT_MOST and all(n in values for n in changed):
                for name in set(changed):  # every node of the view is in the order
                    del entries[bisect_left(entries, by_name[name])]
                    by_name[name] = new = (-values[name], name)
                    insort(entries, new)
                kept = held[column] = (column.version, entries, by_name)
            else:
                kept = None
        if kept is None:
            layout = ctx.view.slots()
            negated = -column.array(layout)
            by = np.lexsort((layout.rank, negated))  # rank is name order
            names = map(layout.names.__getitem__, by.tolist())
            entries = list(zip(negated.take(by).tolist(), names, strict=True))
            kept = held[column] = (column.version, entries, {entry[1]: entry for entry in entries})
        return map(itemgetter(1), kept[1])

    def _reason(self, count: int, total: int, free: float) -> Reason:
        return Reason(
            self.name,
            Kind.UNMET,
            f"kept in reserve: among the {count} of {total} nodes (15%) with the most unreserved RAM",
            {"unreserved_ram": mib(free)},
        )
