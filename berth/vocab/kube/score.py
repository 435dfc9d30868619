"""kube-scheduler's default scoring, inside berth's decision: berth binds the node it chooses, so
berth-scheduler's profile turns kube's score plugins off and berth ranks as they would.

kube's score is one weighted sum; berth splits it in two tiers, so that a preference somebody wrote
outranks a default nobody chose (docs/extender.md, "How kube's ranking and berth's own compose"):
- `kube/preferences`: what somebody wrote: the pod's preferred node affinity, its preferred pod
  affinity and anti-affinity and the running pods' terms that select it, its own `ScheduleAnyway`
  topology spread constraints, and the nodes' PreferNoSchedule taints;
- `kube/default-score`: what nobody chose: kube's system default spreading (for a pod without
  constraints of its own) and its resource-balancing scores, LeastAllocated and BalancedAllocation.
  A resource weight the allocator configuration sets, or the pod's package spread, replaces the
  resource scores (the operator chose the resource strategy, as NodeResourcesFit's scoringStrategy).

In each tier a node's value is kube's weighted total of the tier's plugins over the candidates, and
only the nodes with the highest total go on. The plugins and weights of kube's default profile (v1.36,
pkg/scheduler/apis/config/v1/default_plugins.go), each normalised over the candidates as kube does:

| plugin (weight) | tier | raw value per node | normalised |
|---|---|---|---|
| TaintToleration (3) | P | PreferNoSchedule taints the pod does not tolerate | 100 - 100 x raw / max |
| NodeAffinity (2) | P | summed weights of the preferred terms the node matches | 100 x raw / max |
| InterPodAffinity (2) | P | summed weights of the terms selecting pods in its domains | min-max, 0..100 |
| PodTopologySpread (2) | P, D | per constraint: domain pods x log(domains + 2) + maxSkew - 1 | see below |
| NodeResourcesFit (1) | D | LeastAllocated: mean over cpu and memory of 100 x free / allocatable | as is |
| BalancedAllocation (1) | D | 50 + (50 + balance with the pod - balance without) / 2 | as is |

P: `kube/preferences`; D: `kube/default-score`. PodTopologySpread scores the pod's own constraints in P,
the system defaults in D.

PodTopologySpread normalises as 100 x (max + min - raw) / max, and scores 0 on a node that lacks a
topology label of the pod's own constraints.

ImageLocality (weight 1) is not modelled: berth does not read the nodes' image lists (docs/extender.md).
Integer arithmetic is kube's (int64, truncating); the spreading score is rounded half away from zero.

`value` (the rule) gives each node's raw values; `normalise` turns the raws of the candidates into
totals. `values` (the fast path) gathers the same raws as arrays from the view's indexes and columns
and normalises them with the same function. Each plugin's raw value is one function, the same on both
paths: TaintToleration's, NodeAffinity's and the resource plugins' in their own modules
(taint_toleration, node_affinity, node_resources); InterPodAffinity's and PodTopologySpread's here
(`_inter_pod`, `_spread`, over slots: the rule asks them at its node's slot alone), from what interpod
and spread prepare.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from berth.cluster.model import Toleration
from berth.cluster.topology import HOSTNAME
from berth.cluster.view import ClusterView, NodeState
from berth.engine.step import ArrayValues, PodContext, Skipped, Tier, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names
from berth.vocab.kube.interpod import Weighed, topology_score
from berth.vocab.kube.node_affinity import preferred_terms, preferred_weight
from berth.vocab.kube.node_resources import MAX_NODE_SCORE, NUMBERS, balanced_allocation, least_allocated
from berth.vocab.kube.spread import Soft, domain_counts, own_soft, system_soft
from berth.vocab.kube.taint_toleration import intolerable, prefer_no_schedule_tolerations

WEIGHTS = {"taints": 3, "node_affinity": 2, "spread": 2, "inter_pod": 2, "least": 1, "balanced": 1}


class Raw(NamedTuple):
    """One node's raw values, before normalisation over the candidates."""

    taints: int
    node_affinity: int
    inter_pod: int
    least: int
    balanced: int
    # kube's spreading: the node lacks a topology label of the pod's own constraints (scored 0)
    ignored: bool
    # per spreading constraint: (the node has its topology label, the id of the label's value, the
    # matching pods in that domain, or on the node for the hostname)
    spread: tuple[tuple[bool, int, int], ...]


@dataclass
class Prepared:
    taints: bool  # the tier scores the nodes' PreferNoSchedule taints
    tolerations: tuple[Toleration, ...]  # those with effect PreferNoSchedule or none
    preferred: tuple[tuple[int, dict], ...]  # (weight, nodeSelectorTerm) of preferred node affinity
    soft: Soft | None
    domains: list[Counter]
    # InterPodAffinity's score by label key (_Nodes.weights): by the id of a value, or per node
    topology: dict[str, np.ndarray | PerNode]
    resources: bool  # the tier scores LeastAllocated and BalancedAllocation
    cpu: int  # the pod's requests as kube's LeastAllocated counts them (non-zero)
    memory: int
    requested_cpu: int  # as BalancedAllocation counts them
    requested_memory: int


class _KubeScore(Tier[Prepared]):
    """One tier of kube's default score: the plugins its Prepared turns on, summed as kube sums them."""

    shared_reason = True
    what = ""  # what the tier scores, in its set-aside reason

    def _prepared(
        self,
        ctx: PodContext,
        *,
        taints: bool = False,
        preferred: tuple[tuple[int, dict], ...] = (),
        soft: Soft | None = None,
        topology: dict[str, np.ndarray | PerNode] | None = None,
        resources: bool = False,
    ) -> Prepared:
        pod = ctx.pod
        return Prepared(
            taints=taints,
            tolerations=prefer_no_schedule_tolerations(pod),
            preferred=preferred,
            soft=soft,
            domains=domain_counts(soft, ctx, _Nodes.of(ctx.view).by_domain) if soft is not None else [],
            topology=topology or {},
            resources=resources,
            cpu=pod.nonzero_cpu,
            memory=pod.nonzero_memory,
            requested_cpu=pod.requests.get("cpu", 0),
            requested_memory=pod.requests.get("memory", 0),
        )

    # -- the rule: one node ------------------------------------------------------------------
    # A Raw, not the int a Tier's value is: normalise turns the candidates' Raws into their scores.
    def value(self, state: NodeState, prepared: Prepared, ctx: PodContext) -> Raw:  # type: ignore[override]
        node = state.node
        # InterPodAffinity's and PodTopologySpread's raws from the functions `values` gathers them
        # with, at this node's slot alone
        nodes, at = _Nodes.of(ctx.view), np.array([ctx.view.slots().index[node.name]])
        ignored, spread = _spread(nodes, prepared, ctx, at)
        least, balanced = _node_resource_raws(state, prepared) if prepared.resources else (0, 0)
        return Raw(
            taints=intolerable(node, prepared.tolerations) if prepared.taints else 0,
            node_affinity=preferred_weight(node, prepared.preferred),
            inter_pod=int(_inter_pod(nodes, prepared, at)[0]),
            least=least,
            balanced=balanced,
            ignored=bool(ignored[0]),
            spread=tuple((bool(h[0]), int(i[0]), int(c[0])) for h, i, c in spread),
        )

    def normalise(self, values: Mapping[str, Raw], prepared: Prepared, ctx: PodContext) -> dict[str, int]:
        raws = list(values.values())
        count = len(raws)
        spread = []
        if prepared.soft is not None:
            ignored = np.array([r.ignored for r in raws], dtype=bool)
            for i in range(len(prepared.soft.constraints)):
                has = np.array([r.spread[i][0] for r in raws], dtype=bool)
                counts = np.array([r.spread[i][2] for r in raws], dtype=np.int64)
                domains = len({r.spread[i][1] for r, skip in zip(raws, ignored, strict=True) if not skip})
                spread.append((has, counts, domains))
        else:
            ignored = np.zeros(count, dtype=bool)
        totals = _totals(
            taints=np.array([r.taints for r in raws], dtype=np.int64),
            node_affinity=np.array([r.node_affinity for r in raws], dtype=np.int64),
            inter_pod=np.array([r.inter_pod for r in raws], dtype=np.int64),
            resources=np.array([_weighted(r.least, r.balanced) for r in raws], dtype=np.int64),
            ignored=ignored,
            spread=spread,
            prepared=prepared,
        )
        return dict(zip(values, totals.tolist(), strict=True))

    # -- the fast path: every candidate at once ------------------------------------------------
    def values(
        self, cands: Mapping[str, NodeState], prepared: Prepared, ctx: PodContext
    ) -> Mapping[str, int]:
        view = ctx.view
        at = ctx.slots(cands)
        nodes = _Nodes.of(view)
        count = len(at)
        if prepared.taints:
            taints = view.node_memo(
                ("kube/default-score/taints", prepared.tolerations),
                lambda: np.array(
                    [intolerable(s.node, prepared.tolerations) for s in view.states()], np.int64
                ),
            )[at]
        else:
            taints = np.zeros(count, np.int64)
        if prepared.preferred:
            memo_key = ("kube/default-score/preferred", repr(prepared.preferred))
            preference = view.node_memo(
                memo_key,
                lambda: np.array(
                    [preferred_weight(s.node, prepared.preferred) for s in view.states()], np.int64
                ),
            )[at]
        else:
            preference = np.zeros(count, np.int64)
        inter_pod = _inter_pod(nodes, prepared, at)
        resources = (
            _resource_scores(view, nodes, prepared, at) if prepared.resources else np.zeros(count, np.int64)
        )
        ignored, raws = _spread(nodes, prepared, ctx, at)
        # the distinct domains among the candidates (a hostname's are not read: its weight counts
        # the nodes scored)
        constraints = prepared.soft.constraints if prepared.soft is not None else ()
        spread = [
            (has, counts, 0 if c.topology_key == HOSTNAME else _distinct(ids[~ignored]))
            for (has, ids, counts), c in zip(raws, constraints, strict=True)
        ]
        totals = _totals(
            taints=taints,
            node_affinity=preference,
            inter_pod=inter_pod,
            resources=resources,
            ignored=ignored,
            spread=spread,
            prepared=prepared,
        )
        return ArrayValues(cands, totals, at, view.slots())

    def set_aside(self, value: int, best: int, prepared: Prepared) -> Reason:
        return Reason(
            self.name,
            Kind.SET_ASIDE,
            f"lower {self.what} than the best nodes",
            {"score": value, "highest": best},
        )


class KubePreferences(_KubeScore):
    """What somebody wrote, as kube-scheduler scores it: the pod's preferred node and pod affinity, the
    running pods' terms that select it, its ScheduleAnyway spread, the nodes' PreferNoSchedule taints."""

    name = step_names.KUBE_PREFERENCES
    summary = (
        "tier: only the nodes kube-scheduler scores highest for what the pod prefers (preferred node and "
        "pod affinity, ScheduleAnyway spread, PreferNoSchedule taints) go on"
    )
    what = "score for the pod's preferences under kube-scheduler's default profile"

    def prepare(self, ctx: PodContext) -> Prepared | Skipped:
        pod = ctx.pod
        preferred = preferred_terms(pod)
        soft = own_soft(pod)
        topology = _Nodes.of(ctx.view).weights(topology_score(ctx))
        taints = _any_prefer_no_schedule(ctx.view)
        if not (preferred or soft or topology or taints):
            return skip(
                "no preferred node or pod affinity, ScheduleAnyway spread or running pod's term selects the "
                "pod, and no node has a PreferNoSchedule taint"
            )
        return self._prepared(ctx, taints=taints, preferred=preferred, soft=soft, topology=topology)


class KubeDefaultScore(_KubeScore):
    """What nobody chose: kube-scheduler's system default spreading and its resource-balancing scores,
    the latter unless the operator chose a resource strategy (a configured resource weight, the pod's
    package spread)."""

    name = step_names.KUBE_SCORE
    summary = (
        "tier: only the nodes with the highest of kube-scheduler's default scores (system default spreading, "
        "LeastAllocated, BalancedAllocation) go on"
    )
    what = "score under kube-scheduler's default spreading and resource balancing"

    def __init__(self, resources_replaced_by: tuple[str, ...] = ()) -> None:
        # The configuration's resource weights that replace kube's resource scores (their keys).
        self.resources_replaced_by = resources_replaced_by

    def prepare(self, ctx: PodContext) -> Prepared | Skipped:
        package = getattr(getattr(ctx.spec, "alloc", None), "package", None)
        if package is not None and package.spread:
            instead = f"package {package.name}'s spread {package.spread}"
        elif self.resources_replaced_by:
            instead = "the configured " + " and ".join(f"defaults.{k}" for k in self.resources_replaced_by)
        else:
            instead = ""
        soft = system_soft(ctx)
        if instead and soft is None:
            return skip(f"{instead} replaces kube-scheduler's resource scores; no default spreading applies")
        return self._prepared(ctx, soft=soft, resources=not instead)


def _any_prefer_no_schedule(view: ClusterView) -> bool:
    return view.node_memo(
        "kube/preferences/prefer-no-schedule",
        lambda: any(t.effect == "PreferNoSchedule" for s in view.states() for t in s.node.taints),
    )


def _inter_pod(nodes: _Nodes, prepared: Prepared, at: np.ndarray) -> np.ndarray:
    """InterPodAffinity's raw value of the nodes at slots `at`: the summed weights of the terms that
    select pods in each node's domains (prepared.topology: label key -> weight by the id of a value)."""
    out = np.zeros(len(at), np.int64)
    for key, weights in prepared.topology.items():
        if isinstance(weights, PerNode):
            out += weights.at(at)
        else:
            ids, _ = nodes.label(key)
            out += weights[ids[at]]
    return out


@dataclass(frozen=True, slots=True)
class PerNode:
    """The summed weight of a key whose every labelled node is a domain of its own (a hostname): a
    node's is its own pods' alone, so it is gathered at the candidates' slots only, not summed by
    domain over every node for every pod (cold, that was most of the preferences' prepare)."""

    parts: tuple[tuple[int, np.ndarray], ...]  # (weight, pods by slot) of each term
    labelled: np.ndarray | None  # by slot: the node has the label (None: every node has it)

    def at(self, at: np.ndarray) -> np.ndarray:
        """The summed weight x pods of the nodes at slots `at` (0 for a node without the label)."""
        (weight, pods), *others = self.parts
        out = weight * pods.take(at)
        for weight, pods in others:
            out += weight * pods.take(at)
        if self.labelled is not None:
            out *= self.labelled.take(at)
        return out


# The resource plugins' scores of every node for a pod's requests, by the requests; the last few kept.
RESOURCE_SCORES = "kube/default-score/resources"
REQUESTS_KEPT = 16
# More nodes changed than this since the scores were kept: worked out again over every node.
RESCORED_AT_MOST = 256


def _resource_scores(view: ClusterView, nodes: _Nodes, prepared: Prepared, at: np.ndarray) -> np.ndarray:
    """LeastAllocated and BalancedAllocation, weighted and summed, of the nodes at slots `at` for a
    pod of the prepared requests. Pods of one workload ask the same, and between two of them a
    placement or two changed a node or two: every node's scores are kept by the requests until a
    node record changes (a node memo), and the nodes changed since (ClusterView.touched) are worked
    out again one by one. Over the candidates at every decision the two plugins cost about 50 array
    operations, each a few microseconds with the caches cold."""
    kept: dict[tuple[int, int, int, int], tuple[int, np.ndarray]] = view.node_memo(RESOURCE_SCORES, dict)
    key = (prepared.cpu, prepared.memory, prepared.requested_cpu, prepared.requested_memory)
    touched = view.touched
    entry = kept.pop(key, None)
    scores = None
    if entry is not None:
        changed = touched.since(entry[0])
        if changed is not None and len(changed) <= RESCORED_AT_MOST:
            scores = entry[1]
            index = view.slots().index
            for name in set(changed):
                state, slot = view.state(name), index.get(name)
                if state is not None and slot is not None:
                    scores[slot] = _weighted(*_node_resource_raws(state, prepared))
    if scores is None:
        scores = _every_resource_score(view, nodes, prepared)
    while len(kept) >= REQUESTS_KEPT:
        del kept[next(iter(kept))]
    kept[key] = (touched.version, scores)  # the most recently used last
    return scores.take(at)


def _weighted(least: Any, balanced: Any) -> Any:
    return WEIGHTS["least"] * least + WEIGHTS["balanced"] * balanced


def _node_resource_raws(state: NodeState, prepared: Prepared) -> tuple[int, int]:
    """LeastAllocated's and BalancedAllocation's raws of one node (its request sums read as _READ
    reads them for every node)."""
    allocatable = state.node.allocatable
    cpu, memory = allocatable.get("cpu", 0), allocatable.get("memory", 0)
    nonzero_cpu, nonzero_memory, used_cpu, used_memory = (read(state) for read in _READ.values())
    least = least_allocated(
        cpu, memory, nonzero_cpu + prepared.cpu, nonzero_memory + prepared.memory, NUMBERS
    )
    balanced = balanced_allocation(
        cpu, memory, used_cpu, used_memory, prepared.requested_cpu, prepared.requested_memory, NUMBERS
    )
    return least, balanced


def _every_resource_score(view: ClusterView, nodes: _Nodes, prepared: Prepared) -> np.ndarray:
    """The resource plugins' weighted sum of every node, by slot, over arrays."""
    layout = view.slots()
    nonzero_cpu, nonzero_memory, used_cpu, used_memory = (
        view.column(("kube/default-score", name), read).array(layout).astype(np.int64)
        for name, read in _READ.items()
    )
    cpu, memory = nodes.allocatable("cpu"), nodes.allocatable("memory")
    least = least_allocated(cpu, memory, nonzero_cpu + prepared.cpu, nonzero_memory + prepared.memory)
    balanced = balanced_allocation(
        cpu, memory, used_cpu, used_memory, prepared.requested_cpu, prepared.requested_memory
    )
    return _weighted(least, balanced)


def _spread(
    nodes: _Nodes, prepared: Prepared, ctx: PodContext, at: np.ndarray
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """PodTopologySpread's raws of the nodes at slots `at`: which lack a topology label of the pod's
    own constraints (scored 0 when it requires them all), and per constraint (the node has its
    label, the id of the label's value, the matching pods in that domain, or on the node for the
    hostname: read only where the node has the label)."""
    ignored = np.zeros(len(at), dtype=bool)
    soft = prepared.soft
    if soft is None:
        return ignored, []
    ids_of = [nodes.label(c.topology_key)[0][at] for c in soft.constraints]
    if soft.require_all:
        for ids in ids_of:
            ignored |= ids < 0
    out = []
    for i, constraint in enumerate(soft.constraints):
        ids = ids_of[i]
        if constraint.selector.empty:
            counts = np.zeros(len(at), np.int64)
        elif constraint.topology_key == HOSTNAME:  # the node's own matching pods, kept by slot
            on = ctx.view.selected_slots(ctx.pod.namespace, constraint.selector)
            counts = on.take(at) if on is not None else np.zeros(len(at), np.int64)
        else:
            counts = nodes.table(constraint.topology_key, prepared.domains[i])[ids]
        out.append((ids >= 0, ids, counts))
    return ignored, out


def _distinct(ids: np.ndarray) -> int:
    """How many distinct values `ids` (label value ids, -1 for none) holds: one bincount, where
    np.unique sorts them."""
    return int(np.count_nonzero(np.bincount(ids + 1))) if len(ids) else 0


def _round(values: np.ndarray) -> np.ndarray:
    """Go's math.Round for the non-negative spreading scores: half away from zero."""
    down = np.floor(values)
    return (down + (values - down >= 0.5)).astype(np.int64)


def _default_normalise(raw: np.ndarray, reverse: bool) -> np.ndarray:
    """kube's helper.DefaultNormalizeScore(MaxNodeScore, reverse)."""
    top = int(raw.max()) if len(raw) else 0
    if top == 0:  # every raw is 0
        return np.full(len(raw), MAX_NODE_SCORE if reverse else 0, np.int64)
    scaled = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def _totals(
    *,
    taints: np.ndarray,
    node_affinity: np.ndarray,
    inter_pod: np.ndarray,
    resources: np.ndarray,
    ignored: np.ndarray,
    spread: Sequence[tuple[np.ndarray, np.ndarray, int]],
    prepared: Prepared,
) -> np.ndarray:
    """kube's weighted total of every candidate, from the raws of all of them (`resources`: the
    resource plugins' weighted sum, which needs no normalising)."""
    count = len(taints)
    total = np.zeros(count, np.int64)
    if prepared.taints:
        total += WEIGHTS["taints"] * _default_normalise(taints, reverse=True)
    if prepared.preferred:
        total += WEIGHTS["node_affinity"] * _default_normalise(node_affinity, reverse=False)
    if prepared.topology and count:
        low, high = int(inter_pod.min()), int(inter_pod.max())
        if high > low:
            scaled = (float(MAX_NODE_SCORE) * ((inter_pod - low) / float(high - low))).astype(np.int64)
            total += WEIGHTS["inter_pod"] * scaled
    if prepared.resources:
        total += resources
    soft = prepared.soft
    if soft is not None and count:
        score = np.zeros(count)
        live = ~ignored
        for constraint, (has, counts, domains) in zip(soft.constraints, spread, strict=True):
            size = int(live.sum()) if constraint.topology_key == HOSTNAME else domains
            weight = math.log(size + 2)
            score = score + np.where(has, counts * weight + float(constraint.max_skew - 1), 0.0)
        rounded = _round(score)
        if live.any():
            low, high = int(rounded[live].min()), int(rounded[live].max())
            normalised = (
                np.full(count, MAX_NODE_SCORE, np.int64)
                if high == 0
                else MAX_NODE_SCORE * (high + low - rounded) // high
            )
            total += WEIGHTS["spread"] * np.where(live, normalised, 0)
    return total


class _Nodes:
    """What the score reads of the node records, by slot, kept by the view until a node changes."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._labels: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._ids: dict[str, dict[str, int]] = {}  # label key -> value -> id
        self._allocatable: dict[str, np.ndarray] = {}
        self._with_label: dict[str, np.ndarray] = {}  # label key -> slots of the nodes with it
        self._with_label_mask: dict[tuple[str, ...], np.ndarray] = {}  # label keys -> by slot: has them all

    @classmethod
    def of(cls, view: ClusterView) -> _Nodes:
        return view.node_memo("kube/default-score/nodes", lambda: cls(view))

    def label(self, key: str) -> tuple[np.ndarray, list[str]]:
        """Every node's value of label `key` as an id into the distinct values (-1: no such label)."""
        found = self._labels.get(key)
        if found is None:
            ids: dict[str, int] = {}
            column = np.fromiter(
                (
                    ids.setdefault(s.node.labels[key], len(ids)) if key in s.node.labels else -1
                    for s in self.view.states()
                ),
                np.intp,
            )
            found = self._labels[key] = (column, list(ids))
            self._ids[key] = ids
        return found

    def table(self, key: str, by_value: Mapping[str, int]) -> np.ndarray:
        """`by_value` by the ids of label `key`'s values, one more entry (0) for id -1, the nodes without
        the label; made from the few values given, not from every node's (a hostname has one each)."""
        names = self.label(key)[1]
        ids = self._ids[key]
        out = np.zeros(len(names) + 1, np.int64)
        for value, count in by_value.items():
            at = ids.get(value)
            if at is not None:
                out[at] = count
        return out

    def by_domain(self, key: str, by_slot: np.ndarray, required: tuple[str, ...] = ()) -> dict[str, int]:
        """The sum of `by_slot` over each value of label `key` ("" for the nodes without it, with
        the nodes whose value is ""), over the nodes that have every label of `required`, for the
        values whose sum is not 0 (spread.ByDomain)."""
        ids, names = self.label(key)
        if required:
            by_slot = by_slot * self._has_labels(required)
        sums = np.bincount(ids + 1, weights=by_slot, minlength=len(names) + 1)  # bin 0: no label
        out: dict[str, int] = {}
        for i in np.flatnonzero(sums).tolist():
            value = names[i - 1] if i else ""
            out[value] = out.get(value, 0) + int(sums[i])
        return out

    def weights(self, weighed: Weighed) -> dict[str, np.ndarray | PerNode]:
        """kube's PreScore summed by domain: label key -> the summed weight x pods of each value of
        the key by its id (label), one more entry (0) for id -1, the nodes without the label, or for
        a key with one node per value (a hostname) the terms' pods by slot (PerNode); only the keys
        some node of the terms has a value of. The pods come by slot (the view keeps them
        so) and are summed with numpy: looked up node by node, a few hundred nodes per term every
        decision cost more than the rest of the score."""
        out: dict[str, np.ndarray | PerNode] = {}
        for key, parts in weighed.items():
            ids, names = self.label(key)
            labelled = self._labelled(key)
            if len(names) == len(labelled):  # every labelled node a domain of its own
                every = len(labelled) == len(ids)
                if any((pods if every else pods.take(labelled)).any() for _, pods in parts):
                    out[key] = PerNode(tuple(parts), None if every else self._has_label(key))
                continue
            (weight, pods), *others = parts
            summed, seen = weight * pods, pods
            for weight, pods in others:
                summed = summed + weight * pods
                seen = seen + pods
            if not seen.take(labelled).any():  # no pod of the terms on a node with the label
                continue
            by_id = np.zeros(len(names) + 1, np.int64)
            np.add.at(by_id, ids.take(labelled), summed.take(labelled))
            out[key] = by_id
        return out

    def _has_label(self, key: str) -> np.ndarray:
        """By slot: the node has label `key`."""
        return self._has_labels((key,))

    def _has_labels(self, keys: tuple[str, ...]) -> np.ndarray:
        """By slot: the node has every label of `keys` (kept until a node changes, as all here)."""
        found = self._with_label_mask.get(keys)
        if found is None:
            found = self.label(keys[0])[0] >= 0
            for key in keys[1:]:
                found = found & (self.label(key)[0] >= 0)
            self._with_label_mask[keys] = found
        return found

    def _labelled(self, key: str) -> np.ndarray:
        """The slots of the nodes with label `key`."""
        found = self._with_label.get(key)
        if found is None:
            found = self._with_label[key] = np.flatnonzero(self._has_label(key))
        return found

    def allocatable(self, resource: str) -> np.ndarray:
        found = self._allocatable.get(resource)
        if found is None:
            found = self._allocatable[resource] = np.fromiter(
                (s.node.allocatable.get(resource, 0) for s in self.view.states()), np.int64
            )
        return found


_READ = {
    "nonzero_cpu": lambda s: s.nonzero_cpu,
    "nonzero_memory": lambda s: s.nonzero_memory,
    "requested_cpu": lambda s: s.requested.get("cpu", 0),
    "requested_memory": lambda s: s.requested.get("memory", 0),
}
