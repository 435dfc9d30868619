"""kube-scheduler's PodTopologySpread: `DoNotSchedule` constraints as a filter (offline), `ScheduleAnyway`
constraints, or the system defaults, as a score (berth.vocab.kube.score).

Filter (kube's PreFilter and Filter): over every node that has every constraint's topology label and
passes the constraint's node inclusion policies (nodeAffinityPolicy Honor by default: the pod's node
selection; nodeTaintsPolicy Ignore by default), the pods of the pod's namespace each selector matches
are counted per domain. A node passes when, for each constraint, it has the label and its domain's
count, plus 1 if the pod itself matches, minus the smallest domain's count (0 while there are fewer
domains than minDomains) is at most maxSkew.

Score: the pod's ScheduleAnyway constraints, or, when it has no constraint at all, the system defaults
(hostname maxSkew 3, zone maxSkew 5) over kube's default selector (the pod's Services and controller,
ClusterView.default_selector). See berth.vocab.kube.score for the arithmetic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from berth.cluster.model import Node, Pod, SpreadConstraint
from berth.cluster.selectors import Selector
from berth.cluster.topology import HOSTNAME, ZONE
from berth.cluster.view import ClusterView, NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names
from berth.vocab.kube.node_affinity import selects_node
from berth.vocab.kube.taint_toleration import untolerated

# kube's systemDefaultConstraints (PodTopologySpread with defaultingType System).
SYSTEM_DEFAULTS = ((HOSTNAME, 3), (ZONE, 5))


def included(constraint: SpreadConstraint, pod: Pod, node: Node) -> bool:
    """The node counts for the constraint under its node inclusion policies."""
    if constraint.node_affinity_policy == "Honor" and not selects_node(pod, node):
        return False
    return not (constraint.node_taints_policy == "Honor" and untolerated(node, pod) is not None)


def includes_every_node(constraint: SpreadConstraint, pod: Pod) -> bool:
    """`included` is true of every node for this pod: no inclusion policy the pod is subject to
    can leave a node out (nodeTaintsPolicy is not Honor, and nodeAffinityPolicy Honor has no
    nodeSelector or required node affinity to honour)."""
    if constraint.node_taints_policy == "Honor":
        return False
    return constraint.node_affinity_policy != "Honor" or not (pod.node_selector or pod.required_node_affinity)


def matching_nodes(selector: Selector, ctx: PodContext) -> Mapping[str, int]:
    """Node -> placed pods of the pod's namespace the selector matches (the view's index, read-only)."""
    return ctx.view.selected_nodes(ctx.pod.namespace, selector)


@dataclass
class Hard:
    """Per DoNotSchedule constraint: the count per domain and the smallest count to compare with."""

    constraints: tuple[SpreadConstraint, ...]
    counts: tuple[Counter, ...]
    lowest: tuple[int, ...]
    self_match: tuple[int, ...]


def hard_state(constraints: tuple[SpreadConstraint, ...], ctx: PodContext) -> Hard:
    view: ClusterView = ctx.view
    keys = [c.topology_key for c in constraints]
    counts: tuple[Counter[str], ...] = tuple(Counter() for _ in constraints)
    matching = [matching_nodes(c.selector, ctx) for c in constraints]
    for state in view.states():
        node = state.node
        if any(k not in node.labels for k in keys):
            continue
        for i, constraint in enumerate(constraints):
            if included(constraint, ctx.pod, node):
                counts[i][node.labels[constraint.topology_key]] += matching[i].get(node.name, 0)
    lowest = tuple(
        0 if not domains or len(domains) < c.min_domains else min(domains.values())
        for c, domains in zip(constraints, counts, strict=True)
    )
    self_match = tuple(1 if c.selector.matches(ctx.pod.labels) else 0 for c in constraints)
    return Hard(constraints, counts, lowest, self_match)


class PodTopologySpread(NodeFilter[Hard]):
    name = step_names.KUBE_TOPOLOGY_SPREAD
    summary = "hard: placing the pod keeps every DoNotSchedule topology spread constraint within its maxSkew"

    def prepare(self, ctx: PodContext) -> Hard | Skipped:
        hard = tuple(c for c in ctx.pod.spread if c.when_unsatisfiable == "DoNotSchedule")
        if not hard:
            return skip("no DoNotSchedule topology spread constraint")
        return hard_state(hard, ctx)

    def check(self, state: NodeState, prepared: Hard, ctx: PodContext) -> Reason | None:
        labels = state.node.labels
        for i, constraint in enumerate(prepared.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return Reason(
                    self.name,
                    Kind.UNMET,
                    f"node has no label {constraint.topology_key} a topology spread constraint spreads over",
                )
            skew = prepared.counts[i].get(value, 0) + prepared.self_match[i] - prepared.lowest[i]
            if skew > constraint.max_skew:
                return Reason(
                    self.name,
                    Kind.EXHAUSTED,
                    f"placing the pod here would skew {constraint.topology_key} beyond maxSkew "
                    f"{constraint.max_skew}",
                    {"skew": skew, "domain": value},
                )
        return None

    def constraint(self, prepared: Hard) -> str | None:
        if isinstance(prepared, Hard):
            keys = ", ".join(f"{c.topology_key} maxSkew {c.max_skew}" for c in prepared.constraints)
            return f"the topology spread constraints ({keys})"
        return None


@dataclass(frozen=True)
class Soft:
    """The constraints kube's spreading scores by, and whether a node must have every topology label
    (the pod's own constraints) or not (the system defaults)."""

    constraints: tuple[SpreadConstraint, ...]
    require_all: bool


def own_soft(pod: Pod) -> Soft | None:
    """The pod's own ScheduleAnyway constraints (what somebody wrote); None without any."""
    own = tuple(c for c in pod.spread if c.when_unsatisfiable == "ScheduleAnyway")
    return Soft(own, True) if own else None


def system_soft(ctx: PodContext) -> Soft | None:
    """kube's system default constraints over the default selector, for a pod without a constraint of
    its own (what nobody chose); None when the pod has constraints or no default selector."""
    pod = ctx.pod
    if pod.spread:
        return None
    selector = ctx.view.default_selector(pod)
    if selector is None:
        return None
    defaults = tuple(
        SpreadConstraint(
            max_skew=skew, topology_key=key, when_unsatisfiable="ScheduleAnyway", selector=selector
        )
        for key, skew in SYSTEM_DEFAULTS
    )
    return Soft(defaults, False)


# The sum of counts by slot over each value of a label key ("" for the nodes without it), counting
# only the nodes that have every label key given, the values whose sum is not 0 (berth.vocab.kube.
# score's node columns).
ByDomain = Callable[[str, np.ndarray, tuple[str, ...]], Mapping[str, int]]


def domain_counts(soft: Soft, ctx: PodContext, by_domain: ByDomain | None = None) -> list[Counter]:
    """Per constraint (hostname ones stay empty: a node's own count is read per node), the matching
    pods per domain over every node that counts for it (kube's PreScore over all nodes). With
    `by_domain`, a constraint that counts every node sums the view's counts by slot instead of
    reading each node that holds matching pods (a workload's replicas: hundreds of nodes a pod)."""
    view = ctx.view
    out: list[Counter] = []
    for constraint in soft.constraints:
        counts: Counter = Counter()
        out.append(counts)
        if constraint.topology_key == HOSTNAME or constraint.selector.empty:
            continue
        if by_domain is not None and includes_every_node(constraint, ctx.pod):
            by_slot = view.selected_slots(ctx.pod.namespace, constraint.selector)
            if by_slot is not None:
                required = tuple(c.topology_key for c in soft.constraints) if soft.require_all else ()
                counts.update(by_domain(constraint.topology_key, by_slot, required))
            continue
        for name, count in matching_nodes(constraint.selector, ctx).items():
            node = view.node(name)
            if node is None:
                continue
            if soft.require_all and any(c.topology_key not in node.labels for c in soft.constraints):
                continue
            if not included(constraint, ctx.pod, node):
                continue
            counts[node.labels.get(constraint.topology_key, "")] += count
    return out
