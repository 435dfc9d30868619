"""The locality steps: the hints computed from the cluster view, the strict ones as a hard filter,
the soft ones (and the default spreading by owner) as a soft filter.

Far before near, as the seed says: high availability matters more than performance. A strict hint
removes nodes; a soft one sets nodes aside only while others remain, in two stages like the seed's
soft filter: first away from `far` pods (undone if it would leave nothing), then, among what is left,
near `near` pods (kept as they were when no node hosts one). With no hint at all, the soft filter
spreads the owner's pods: nodes already hosting a pod of the pod's namespace are set aside while
others remain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from berth.cluster.view import NodeState
from berth.engine.ledger import Listed
from berth.engine.step import NodeFilter, PodContext, SetFilter, skip
from berth.engine.types import Kind, Phase, Reason
from berth.vocab.alloc.base import AllocStep, self_pod
from berth.vocab.alloc.hints import Hint, Hints, resolve


class CalculateLocalityHints(AllocStep, NodeFilter):
    """The seed's calculate-locality-hints: affinity rules and locality become hints. berth resolves
    them on its cluster view once per pod; this step shows them in the trace and keeps every node."""

    name = "alloc/calculate-locality-hints"
    summary = "data: resolves locality and affinity rules into near/far hints; keeps every node"

    def prepare(self, ctx: PodContext) -> Any:
        hints = resolve(ctx)
        return skip(f"computes only, every node kept: {hints.summary()}")

    def check(self, state: NodeState, prepared: Any, ctx: PodContext) -> Reason | None:  # pragma: no cover
        return None


class CalculateAffinity(CalculateLocalityHints):
    """The same step under the original plugin's file name."""

    name = "alloc/calculate-affinity"


class HardFilterLocalityHints(AllocStep, NodeFilter):
    name = "alloc/hard-filter-locality-hints"
    summary = "hard: the node hosts no pod of a strict far hint and a pod of every strict near hint"

    def prepare(self, ctx: PodContext) -> Any:
        strict = resolve(ctx).of(strict=True)
        if not strict:
            return skip("no strict locality requested")
        # Far first: high availability before performance.
        return tuple(h for h in strict if not h.near) + tuple(h for h in strict if h.near)

    def check(self, state: NodeState, prepared: tuple[Hint, ...], ctx: PodContext) -> Reason | None:
        name = state.node.name
        for hint in prepared:
            if hint.near and name not in hint.nodes:
                return Reason(
                    self.name, Kind.UNMET, f"strict locality: the node hosts no pod for {hint.shown}"
                )
            if not hint.near and name in hint.nodes:
                # Evicting that pod would free the node: a capacity-like "no".
                return Reason(
                    self.name, Kind.EXHAUSTED, f"strict locality: the node hosts a pod for {hint.shown}"
                )
        return None

    def constraint(self, prepared: tuple[Hint, ...]) -> str | None:
        return "the strict locality " + ", ".join(h.shown for h in prepared)


class SoftFilterLocalityHints(AllocStep, SetFilter):
    name = "alloc/soft-filter-locality-hints"
    summary = "soft: away from far pods, then near near pods; with no hint, spread the namespace's pods"
    phase = Phase.SOFT

    def prepare(self, ctx: PodContext) -> Any:
        hints: Hints = resolve(ctx)
        soft = hints.of(strict=False)
        if not soft and hints.hints:
            return skip("only strict locality requested; no spreading needed")
        return soft

    def select(
        self, states: Sequence[NodeState], prepared: tuple[Hint, ...], ctx: PodContext
    ) -> dict[str, Reason]:
        if not prepared:
            return self._spread(states, ctx)
        removed: dict[str, Reason] = {}
        far = [h for h in prepared if not h.near]
        for state in states:
            hint = next((h for h in far if state.node.name in h.nodes), None)
            if hint is not None:
                removed[state.node.name] = Reason(
                    self.name, Kind.SET_ASIDE, f"locality: the node hosts a pod for {hint.shown}"
                )
        if len(removed) == len(states):
            removed = {}  # non-strict: ignored when it would leave no node
        near = [h for h in prepared if h.near]
        if near:
            left = [s for s in states if s.node.name not in removed]
            hosting = {s.node.name for s in left if any(s.node.name in h.nodes for h in near)}
            if hosting:
                wanted = ", ".join(h.shown for h in near)
                for state in left:
                    if state.node.name not in hosting:
                        removed[state.node.name] = Reason(
                            self.name, Kind.SET_ASIDE, f"locality: the node hosts no pod for {wanted}"
                        )
        return removed

    def select_among(
        self, cands: Mapping[str, NodeState], prepared: tuple[Hint, ...], ctx: PodContext
    ) -> Mapping[str, Reason]:
        if prepared:
            return super().select_among(cands, prepared, ctx)
        # Spreading concerns only the nodes that already host pods of the namespace; their reasons,
        # one per pod count, are made when read.
        namespace = ctx.pod.namespace
        owners = ctx.view.owner_nodes(namespace)
        if len(owners) >= len(cands) and ctx.self_node not in cands and owners.keys() >= cands.keys():
            return {}  # every candidate hosts pods of the namespace: none is set aside (checked in C)
        counts = {n: c for n, c in owners.items() if n in cands}
        if ctx.self_node in counts and self_pod(cands[ctx.self_node], ctx) is not None:
            counts[ctx.self_node] -= 1
            if not counts[ctx.self_node]:
                del counts[ctx.self_node]
        if not counts or len(counts) == len(cands):
            return {}
        by_count: dict[int, Reason] = {}

        def reason(name: str) -> Reason:
            count = counts[name]
            if count not in by_count:
                by_count[count] = self._spread_reason(namespace, count)
            return by_count[count]

        return Listed(list(counts), reason, shared=True, reorder=True)

    def _spread(self, states: Sequence[NodeState], ctx: PodContext) -> dict[str, Reason]:
        namespace = ctx.pod.namespace
        removed = {}
        for state in states:
            count = state.owners.get(namespace, 0)
            me = self_pod(state, ctx)
            if me is not None:
                count -= 1
            if count > 0:
                removed[state.node.name] = self._spread_reason(namespace, count)
        return {} if len(removed) == len(states) else removed

    def _spread_reason(self, namespace: str, count: int) -> Reason:
        return Reason(
            self.name,
            Kind.SET_ASIDE,
            f"spread by owner: the node already hosts pods of namespace {namespace}",
            {"pods": count},
        )
