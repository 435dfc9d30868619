"""The locality steps: the hints computed from the cluster view, the strict ones as a hard filter,
the soft ones (and the default spreading by owner) as a soft filter.

Far before near, as sdc-designation says: high availability matters more than performance. A strict hint
removes nodes; a soft one sets nodes aside only while others remain, in two stages like sdc-designation's
soft filter: first away from `far` pods (undone if it would leave nothing), then, among what is left,
near `near` pods (kept as they were when no node hosts one). With no hint at all, the soft filter
spreads the owner's pods: nodes already hosting a pod of the pod's namespace are set aside while
others remain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from berth.cluster.topology import short
from berth.cluster.view import NodeState
from berth.engine.step import Kept, MemoKey, NodeFilter, Noted, PodContext, Removals, SetFilter, Skipped, skip
from berth.engine.types import Kind, Phase, Reason
from berth.vocab.alloc.base import AllocStep
from berth.vocab.alloc.hints import Hint, Hints, resolve

# Up to this many owner changes since the spread was worked out for the same candidates (the pods
# placed meanwhile), it is mended rather than worked out again.
MENDED_AT_MOST = 64


class CalculateLocalityHints(AllocStep, NodeFilter[None]):
    """sdc-designation's calculate-locality-hints: affinity rules and locality become hints. berth resolves
    them on its cluster view once per pod; this step shows them in the trace and keeps every node."""

    name = "alloc/calculate-locality-hints"
    summary = "data: resolves locality and affinity rules into near/far hints; keeps every node"

    def prepare(self, ctx: PodContext) -> Skipped:
        hints = resolve(ctx)
        return skip(f"computes only, every node kept: {hints.summary()}")

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:  # pragma: no cover
        return None


class CalculateAffinity(CalculateLocalityHints):
    """The same step under the original plugin's file name."""

    name = "alloc/calculate-affinity"


class HardFilterLocalityHints(AllocStep, NodeFilter[tuple[Hint, ...]]):
    name = "alloc/hard-filter-locality-hints"
    summary = "hard: the node hosts no pod of a strict far hint and a pod of every strict near hint"

    def prepare(self, ctx: PodContext) -> tuple[Hint, ...] | Skipped:
        strict = resolve(ctx).of(strict=True)
        if not strict:
            return skip("no strict locality requested")
        # Far first: high availability before performance.
        return tuple(h for h in strict if not h.near) + tuple(h for h in strict if h.near)

    def check(self, state: NodeState, prepared: tuple[Hint, ...], ctx: PodContext) -> Reason | None:
        name = state.node.name
        for hint in prepared:
            if hint.topology is not None and name in hint.unlabelled:
                return Reason(self.name, Kind.UNMET, f"strict locality: {_unlabelled(hint)}")
            if hint.near and name not in hint.nodes:
                return Reason(
                    self.name, Kind.UNMET, f"strict locality: the node {_not_where(hint)} for {hint.shown}"
                )
            if not hint.near and name in hint.nodes:
                # Evicting that pod would free the node: a capacity-like "no".
                return Reason(
                    self.name, Kind.EXHAUSTED, f"strict locality: the node {hint.where} for {hint.shown}"
                )
        return None

    def constraint(self, prepared: tuple[Hint, ...]) -> str | None:
        return "the strict locality " + ", ".join(h.shown for h in prepared)


def _not_where(hint: Hint) -> str:
    if hint.topology is None:
        return "hosts no pod"
    return f"is not in the {short(hint.topology)} ({', '.join(hint.domains) or 'none'}) of a pod"


def _unlabelled(hint: Hint) -> str:
    return f"the node has no label {hint.topology}, the topologyKey {hint.shown} counts by"


class SoftFilterLocalityHints(AllocStep, SetFilter[tuple[Hint, ...]]):
    name = "alloc/soft-filter-locality-hints"
    summary = "soft: away from far pods, then near near pods; with no hint, spread the namespace's pods"
    phase = Phase.SOFT

    def prepare(self, ctx: PodContext) -> tuple[Hint, ...] | Skipped:
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
            name = state.node.name
            hint = next((h for h in far if name in h.nodes), None)
            if hint is not None:
                removed[name] = Reason(
                    self.name, Kind.SET_ASIDE, f"locality: the node {hint.where} for {hint.shown}"
                )
                continue
            # A node with no domain cannot be shown to be far: a soft rule gives it nothing.
            hint = next((h for h in far if h.topology is not None and name in h.unlabelled), None)
            if hint is not None:
                removed[name] = Reason(self.name, Kind.SET_ASIDE, f"locality: {_unlabelled(hint)}")
        if len(removed) == len(states):
            removed = {}  # non-strict: ignored when it would leave no node
        near = [h for h in prepared if h.near]
        if near:
            left = [s for s in states if s.node.name not in removed]
            hosting = {s.node.name for s in left if any(s.node.name in h.nodes for h in near)}
            if hosting:
                wanted = ", ".join(h.shown for h in near)
                where = _not_where(near[0]) if all(h.topology == near[0].topology for h in near) else ""
                where = where or "hosts no pod"
                for state in left:
                    if state.node.name not in hosting:
                        removed[state.node.name] = Reason(
                            self.name, Kind.SET_ASIDE, f"locality: the node {where} for {wanted}"
                        )
        return removed

    def memo_key(self, prepared: tuple[Hint, ...], ctx: PodContext) -> MemoKey | None:
        # The spread by owner: the same candidates and owner nodes of the namespace, the same spread.
        if prepared:
            return None
        namespace = ctx.pod.namespace
        return namespace, (ctx.view.owner_version(namespace),)

    def select_among(
        self, cands: Mapping[str, NodeState], prepared: tuple[Hint, ...], ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        if prepared:
            return super().select_among(cands, prepared, ctx)
        # Spreading concerns only the nodes that already host pods of the namespace; their reasons,
        # one per pod count, are made when read.
        owners = ctx.view.owner_nodes(ctx.pod.namespace)
        if len(owners) >= len(ctx.view):
            return {}  # every node of the view hosts pods of the namespace (owners are the view's nodes)
        if len(owners) >= len(cands) and owners.keys() >= cands.keys():
            return {}  # every candidate hosts pods of the namespace: none is set aside (checked in C)
        counts = {n: c for n, c in owners.items() if n in cands}
        return self._spread_over(cands, ctx, counts)

    def _spread_over(
        self,
        cands: Mapping[str, NodeState],
        ctx: PodContext,
        counts: dict[str, int],
        kept_before: tuple[Mapping[str, NodeState], list[str]] | None = None,
    ) -> Noted:
        """The nodes of `counts` (the candidates hosting pods of the namespace) set aside, none when
        that is none or all of them. `kept_before` is what was left before and the nodes of `counts`
        not set aside then, when that is all that changed. Noted for mend(): the counts, and the
        candidates left."""
        if not counts or len(counts) == len(cands):
            return Noted(Removals(), (counts, cands))
        by_count: dict[int, Reason] = {}
        namespace = ctx.pod.namespace  # the reasons are made when read, kept in a memo: not the ctx

        def reason(name: str) -> Reason:
            count = counts[name]
            if count not in by_count:
                by_count[count] = self._spread_reason(namespace, count)
            return by_count[count]

        names = list(counts)
        if kept_before is not None:
            before, added = kept_before
            kept = ctx.remaining(before, added)  # not a copy of thousands of nodes for a few new owners
        else:
            kept = ctx.without(cands, Removals.named(names, reason))
        # what is left, made here: the runner takes it as it is
        spread = Removals.named(names, reason, shared=True, reorder=True, left=(cands, kept))
        return Noted(spread, (counts, kept))

    def mend(
        self, before: Kept, cands: Mapping[str, NodeState], prepared: tuple[Hint, ...], ctx: PodContext
    ) -> Noted | Mapping[str, Reason] | None:
        """The spread of the same candidates as a decision before, from it and the owner changes since
        (the pods placed meanwhile): the counts replayed as the view's index made them, so they keep
        its order. What is left is what was left before less the new owners, unless a node stopped
        hosting pods of the namespace: it goes back among the others, so that is worked out again."""
        if before.notes is None:
            return None
        counts, kept = before.notes
        changes = ctx.view.owners_changed_since(ctx.pod.namespace, before.state[0])
        if changes is None or len(changes) > MENDED_AT_MOST:
            return None
        if not changes:
            return before.answer
        counts = dict(counts)
        added: list[str] = []
        freed = False
        for name, count in changes:
            if name not in cands:
                continue
            if count:
                if name not in counts:
                    added.append(name)
                counts[name] = count
            elif counts.pop(name, None) is not None:
                freed = True
        if freed or len(counts) == len(cands):
            return None
        return self._spread_over(cands, ctx, counts, (kept, added))

    def _spread(self, states: Sequence[NodeState], ctx: PodContext) -> dict[str, Reason]:
        namespace = ctx.pod.namespace
        removed = {}
        for state in states:
            count = state.owners.get(namespace, 0)
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
