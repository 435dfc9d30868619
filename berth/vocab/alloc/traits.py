"""hard-filter-traits: the node's traits (annotation berth.dev/traits) must fulfil the pod's.

The pod's traits are its package's, overridden name by name by its own (`berth.dev/traits`), overridden
by its image's (`berth.dev/image` traits). The rule is sdc-designation's and exact: the node carries the same
trait names as the request, each value matching (booleans and strings by equality, a string and a list
by membership either way, two lists by a common value). So a node with traits takes only pods that ask
for them, and a pod asking for no traits takes only nodes without any. The answer depends only on the
node's traits annotation, so it is worked out once per distinct annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from berth import annotations as ann
from berth.cluster.view import ClusterView, NodeState
from berth.engine.step import MemoKey, NodeFilter, PodContext, Removals
from berth.engine.types import Kind, Reason
from berth.json_annotation import show
from berth.vocab.alloc.base import AllocStep, request
from berth.vocab.alloc.values import TraitValue, node_traits, thaw, trait_mismatch


@dataclass(slots=True)
class _Wanted:
    traits: dict[str, TraitValue]
    # node traits annotation -> the verdict (None: fulfils), memoised for this pod
    verdicts: dict[str, Reason | None] = field(default_factory=dict)


class HardFilterTraits(AllocStep, NodeFilter[_Wanted]):
    name = "alloc/hard-filter-traits"
    summary = "hard: the node's traits are exactly the names the pod asks for, with matching values"

    def prepare(self, ctx: PodContext) -> _Wanted:
        return _Wanted(request(ctx).combined_traits())

    def check(self, state: NodeState, prepared: _Wanted, ctx: PodContext) -> Reason | None:
        raw = state.node.annotations.get(ann.NODE_TRAITS, "")
        if raw in prepared.verdicts:
            return prepared.verdicts[raw]
        verdict = prepared.verdicts[raw] = self._verdict(raw, prepared.traits)
        return verdict

    def memo_key(self, prepared: _Wanted, ctx: PodContext) -> MemoKey:
        # The same candidates, node annotations and wanted traits remove the same nodes.
        return frozenset(prepared.traits.items()), (self._groups(ctx),)

    def removals(
        self, cands: Mapping[str, NodeState], prepared: _Wanted, ctx: PodContext
    ) -> Mapping[str, Reason]:
        # One verdict per distinct annotation: the few nodes with traits by their annotation, and
        # every node without any at once.
        groups = self._groups(ctx)
        removed: dict[str, Reason] = {}
        for raw, names in groups.items():
            verdict = self._cached(raw, prepared)
            if verdict is not None:
                removed.update((n, verdict) for n in names if n in cands)
        plain = self._cached("", prepared)
        if plain is not None:
            with_traits = ctx.view.node_memo(
                (ann.NODE_TRAITS, "nodes"), lambda: set().union(*groups.values())
            )
            removed.update((n, plain) for n in cands if n not in with_traits)
        return Removals(removed)

    @staticmethod
    def _groups(ctx: PodContext) -> dict[str, list[str]]:
        """The nodes with traits by their annotation, kept until a node record changes."""
        return ctx.view.node_memo(ann.NODE_TRAITS, lambda: _by_traits(ctx.view))

    def _cached(self, raw: str, prepared: _Wanted) -> Reason | None:
        if raw not in prepared.verdicts:
            prepared.verdicts[raw] = self._verdict(raw, prepared.traits)
        return prepared.verdicts[raw]

    def _verdict(self, raw: str, wanted: dict[str, TraitValue]) -> Reason | None:
        parsed = node_traits(raw) if raw.strip() else None
        if parsed is not None and parsed.problem:
            return Reason(
                self.name, Kind.UNMET, f"node annotation {ann.NODE_TRAITS} is malformed: {parsed.problem}"
            )
        have = parsed.value if parsed is not None else {}
        if not wanted:
            if not have:
                return None
            return Reason(
                self.name,
                Kind.UNMET,
                "the pod asks for no traits and the node has traits (it takes only pods that ask for them)",
                {"node_traits": thaw(have)},
            )
        mismatch = trait_mismatch(wanted, have)
        if mismatch is None:
            return None
        return Reason(
            self.name,
            Kind.UNMET,
            f"node traits do not fulfil the requested traits {show(thaw(wanted))}",
            {"node_traits": thaw(have), "mismatch": mismatch},
        )

    def constraint(self, prepared: _Wanted) -> str | None:
        return f"the traits {show(thaw(prepared.traits))}" if prepared.traits else None


def _by_traits(view: ClusterView) -> dict[str, list[str]]:
    """Traits annotation -> the nodes that carry it, for the nodes with a non-empty one."""
    groups: dict[str, list[str]] = {}
    for state in view.states():
        raw = state.node.annotations.get(ann.NODE_TRAITS, "")
        if raw:
            groups.setdefault(raw, []).append(state.node.name)
    return groups
