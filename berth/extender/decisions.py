"""The decisions filter made, kept for bind: what it chose and what it read.

berth decides once, at filter, and answers with the one node it chose. bind then checks that nothing
the decision read has changed since (the node and its pods, the PlacementPolicies, the pod itself) and
decides again, for that node alone, only when something has. So a decision is kept with the view's
generations of what it read, until the pod is bound or gone (berth.cluster.per_pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from berth.cluster.model import Pod
from berth.cluster.per_pod import PodStates, pod_key
from berth.cluster.view import ClusterView
from berth.engine import Decision, Pipeline
from berth.errors import BerthError

# Decisions kept at most: pods decided at filter and not yet bound (each without its per-node ledger,
# a few kilobytes).
DECISION_CACHE = 10_000


class Cluster(Protocol):
    """What the extender asks of its cluster: a live cache (berth.cluster.live) or a snapshot."""

    view: ClusterView

    def ready(self) -> bool: ...
    def reserve(self, pod: Pod, node: str) -> None: ...
    def release(self, pod: Pod) -> None: ...


@dataclass(slots=True)
class Remembered:
    """A decision and what it read: the view's generation of the chosen node after the reservation,
    of the PlacementPolicies, and the view's record of the pod."""

    pod: Pod
    decision: Decision
    node_generation: int = -1
    policy_generation: int = -1
    record: Pod | None = None


class Decisions:
    def __init__(self, cluster: Cluster, rules: Pipeline, states: PodStates) -> None:
        self.cluster = cluster
        self.rules = rules
        self._kept = states.map("decisions", DECISION_CACHE)

    def remember(self, pod: Pod, decision: Decision) -> Remembered:
        """Keep what bind needs of a decision (the chosen node, the summary, the events), not its
        per-node ledger: thousands of remembered ledgers over thousands of nodes would be gigabytes."""
        remembered = Remembered(pod, decision.outcome())
        self._kept.set(pod_key(pod), remembered)
        return remembered

    def recall(self, uid: str, key: str) -> Remembered | None:
        return self._kept.get(uid or key)

    def stamp(self, remembered: Remembered, node: str) -> None:
        """What the decision read, as it stands once the pod is counted on `node`."""
        view = self.cluster.view
        state = view.state(node)
        remembered.node_generation = state.generation if state is not None else -1
        remembered.policy_generation = view.policy_generation
        remembered.record = view.pod(remembered.pod.key)

    def unchanged(self, remembered: Remembered, node: str) -> bool:
        """Nothing the decision read about `node` has changed since it was made. A pod governed by a
        rule that reads the whole cluster (ctx.session of a RULE_BASED policy) or the other nodes of the
        node's topology domain (a topologyKey) is always checked again."""
        view = self.cluster.view
        if remembered.decision.chosen != node or remembered.record is None:
            return False
        state = view.state(node)
        if state is None or state.generation != remembered.node_generation:
            return False
        if view.policy_generation != remembered.policy_generation:
            return False
        if view.pod(remembered.pod.key) is not remembered.record:
            return False
        if any(p.reads_session or p.per_domain for p in view.policies_for(remembered.pod)):
            return False
        try:
            return not self.rules.compile_pod(remembered.pod).per_domain
        except BerthError:  # refused at filter: never bound unchecked
            return False
