"""`berth rebalance`: which running pods to move off the nodes that break their hard rules, and where.

The plan starts from what `berth audit` finds (berth.analysis.audit): the bound pods whose node breaks one of
their hard rules now. They are taken youngest first (the pod that arrived last is the likeliest cause,
and the older ones have been serving longest), and for each, on the view as the moves planned so far
leave it:

1. a pod whose node no longer breaks a rule once the earlier moves are made stays (moving one of two
   pods under ONE_PER_HOST is enough);
2. a pod that must not be evicted stays, with the reason: no controller to replace it (unless
   `include_bare`), a DaemonSet's, a static or mirror pod, a `system-*` priority class, annotated
   `berth.dev/rebalance: "never"`, or already going;
3. a pod over the limits per node, per namespace or per round stays until a later round;
4. the engine decides where its replacement would go, with the pod itself taken off the view and the
   moves planned so far counted, with the same chain as simulate (kube-scheduler's filters, berth's
   rules): a pod with no feasible target stays, with the refusal. Otherwise the move is planned and
   made in the view, so that later pods see the replacement where it will be.

The pods a round moved were placed by berth-scheduler on their planned node, which satisfied their
rules then: they come last in the next round's order, so that a pod that arrived since moves first.
Nothing here changes the cluster: berth.evict carries a plan out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth import annotations as ann
from berth.analysis.audit import PodFindings, audit_pod, hard_only, subjects, youngest_first
from berth.cluster import placement_record
from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.engine import Decision, Pipeline, decide

SEED = 0
NEVER = "never"
SYSTEM_PRIORITY_PREFIX = "system-"


@dataclass(frozen=True, slots=True)
class Limits:
    per_node: int = 1  # evictions from one node in a round
    per_namespace: int = 5
    per_round: int = 10


@dataclass(frozen=True, slots=True)
class Move:
    pod: str
    uid: str
    owner: tuple[str, str] | None  # (kind, name) of the controller
    node: str  # where it is
    target: str  # where its replacement goes
    rules: tuple[str, ...]  # the hard rules its node breaks
    reasons: tuple[str, ...]  # what the extender says of that node, one per rule
    # A PodDisruptionBudget that allows no disruption now (once the round's earlier moves are counted):
    # the API server refuses this eviction (429) until it does; "" when none stands in the way.
    budget: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "from": self.node, "to": self.target}
        if self.owner is not None:
            out["owner"] = f"{self.owner[0]}/{self.owner[1]}"
        out |= {"rules": list(self.rules), "reasons": list(self.reasons)}
        return out | ({"budget": self.budget} if self.budget else {})


@dataclass(frozen=True, slots=True)
class LeftInPlace:
    """A pod whose node breaks a rule, left where it is, and why."""

    pod: str
    node: str
    rules: tuple[str, ...]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "rules": list(self.rules), "why": self.why}


@dataclass
class Plan:
    checked: int = 0
    moves: list[Move] = field(default_factory=list)
    kept: list[LeftInPlace] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No pod's node breaks a hard rule."""
        return not (self.moves or self.kept)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "clean": self.clean,
            "moves": [m.to_dict() for m in self.moves],
            "kept": [k.to_dict() for k in self.kept],
        }


BARE = "no controller would replace it (--include-bare evicts it anyway)"


def not_evictable(pod: Pod, *, include_bare: bool = False) -> str | None:
    """Why the pod must not be evicted, or None."""
    if pod.deleting:
        return "already going (deletionTimestamp set)"
    if pod.annotations.get(ann.REBALANCE) == NEVER:
        return f'annotated {ann.REBALANCE}: "{NEVER}"'
    if pod.priority_class.startswith(SYSTEM_PRIORITY_PREFIX):
        return f"priority class {pod.priority_class}: system pods are not moved"
    if pod.controller is None:
        return None if include_bare else BARE
    kind = pod.controller[0]
    if kind == "DaemonSet":
        return "a DaemonSet's pod: its node is its place"
    if kind == "Node":
        return "a static (mirror) pod"
    return None


def _budget_refuses(view: ClusterView, pod: Pod, spent: Counter) -> str:
    """The PodDisruptionBudget that would refuse the pod's eviction now, counting the round's earlier
    moves (each spends one of its budgets' disruptions), or ""; the pod's own disruption is spent."""
    refusing = ""
    for name, (selector, allowed) in sorted(view.budgets(pod.namespace).items()):
        if selector.empty or not selector.matches(pod.labels):
            continue
        key = (pod.namespace, name)
        if allowed - spent[key] <= 0 and not refusing:
            refusing = (
                f"PodDisruptionBudget {pod.namespace}/{name} allows no disruption now "
                f"({allowed} allowed, {spent[key]} used by the moves above): --apply's eviction is refused "
                "(429) and left for a later round"
            )
        spent[key] += 1
    return refusing


def plan(
    view: ClusterView,
    rules: Pipeline,
    placement: Pipeline,
    *,
    namespaces: Iterable[str] = (),
    limits: Limits = Limits(),
    include_bare: bool = False,
) -> Plan:
    """The moves that take the pods of `namespaces` (all when none are given) off the nodes that
    break their hard rules: `rules` is the chain whose hard steps are asked (as berth audit asks),
    `placement` the chain that places the replacements (as berth simulate places). The view ends
    with the moves made in it."""
    here = hard_only(rules, one_node=True)
    out = Plan()
    breaking: dict[str, tuple[Pod, PodFindings]] = {}
    for pod in subjects(view, namespaces):
        out.checked += 1
        found = audit_pod(view, here, pod)
        if found.violations:
            breaking[pod.key] = (pod, found)
    from_node: Counter = Counter()
    in_namespace: Counter = Counter()
    spent: Counter = Counter()  # (namespace, budget) -> disruptions the round's moves use
    # Youngest first, as audit counts the excess; the pods a rebalance moved come last (a stable sort).
    pods = [pod for pod, _ in breaking.values()]
    for i, pod in enumerate(sorted(youngest_first(pods), key=placement_record.planned)):
        # Asked again only once a move has changed the view.
        found = audit_pod(view, here, pod) if out.moves else breaking[pod.key][1]
        rule_names = tuple(dict.fromkeys(v.rule for v in found.violations))
        if not found.violations:
            out.kept.append(
                LeftInPlace(
                    pod.key, pod.node_name, (), "its node breaks no rule once the moves above are made"
                )
            )
            continue
        why = not_evictable(pod, include_bare=include_bare)
        if why is None:
            why = _over_limit(pod, limits, len(out.moves), from_node, in_namespace)
        if why == BARE:
            # Whether --include-bare would move it: the plan says where, or that no node would take it.
            view.remove_pod(pod.key)
            decision = decide(msgspec.structs.replace(pod, node_name=""), view, placement, seed=SEED + i)
            view.put_back(pod)
            if decision.chosen is None:
                why += f"; and no node would take it: {_refusal(decision)}"
            else:
                why += f"; with it, it would go to {decision.chosen}"
        if why is not None:
            out.kept.append(LeftInPlace(pod.key, pod.node_name, rule_names, why))
            continue
        view.remove_pod(pod.key)
        decision = decide(msgspec.structs.replace(pod, node_name=""), view, placement, seed=SEED + i)
        if decision.chosen is None:
            view.put_back(pod)
            out.kept.append(
                LeftInPlace(
                    pod.key,
                    pod.node_name,
                    rule_names,
                    f"no node would take its replacement: {_refusal(decision)}",
                )
            )
            continue
        replacement = msgspec.structs.replace(
            pod, name=f"{pod.name}~replacement", uid=f"{pod.uid}~replacement", node_name=decision.chosen
        )
        view.add_pod(replacement)
        reasons = tuple(v.reason for v in found.violations)
        budget = _budget_refuses(view, pod, spent)
        out.moves.append(
            Move(
                pod.key, pod.uid, pod.controller, pod.node_name, decision.chosen, rule_names, reasons, budget
            )
        )
        from_node[pod.node_name] += 1
        in_namespace[pod.namespace] += 1
    return out


def _refusal(decision: Decision) -> str:
    return decision.error.message if decision.error is not None else "no node"


def _over_limit(
    pod: Pod, limits: Limits, moves: int, from_node: Counter, in_namespace: Counter
) -> str | None:
    if moves >= limits.per_round:
        return f"the round's limit of {limits.per_round} eviction(s) is reached: next round"
    if from_node[pod.node_name] >= limits.per_node:
        return f"the limit of {limits.per_node} eviction(s) from node {pod.node_name} is reached: next round"
    if in_namespace[pod.namespace] >= limits.per_namespace:
        return (
            f"the limit of {limits.per_namespace} eviction(s) in namespace {pod.namespace} is reached: "
            "next round"
        )
    return None
