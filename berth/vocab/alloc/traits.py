"""hard-filter-traits: the node's traits (annotation berth.dev/traits) must fulfil the pod's.

The pod's traits are its package's, overridden name by name by its own (`berth.dev/traits`), overridden
by its image's (`berth.dev/image` traits). The rule is the seed's and exact: the node carries the same
trait names as the request, each value matching (booleans and strings by equality, a string and a list
by membership either way, two lists by a common value). So a node with traits takes only pods that ask
for them, and a pod asking for no traits takes only nodes without any. The answer depends only on the
node's traits annotation, so it is worked out once per distinct annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth import annotations as ann
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext
from berth.engine.types import Kind, Reason
from berth.vocab.alloc.base import AllocStep, request
from berth.vocab.alloc.values import TraitValue, node_traits, thaw, trait_mismatch
from berth.vocab.json_annotation import show


@dataclass(slots=True)
class _Wanted:
    traits: dict[str, TraitValue]
    # node traits annotation -> the verdict (None: fulfils), memoised for this pod
    verdicts: dict[str, Reason | None] = field(default_factory=dict)


class HardFilterTraits(AllocStep, NodeFilter):
    name = "alloc/hard-filter-traits"
    summary = "hard: the node's traits are exactly the names the pod asks for, with matching values"

    def prepare(self, ctx: PodContext) -> Any:
        return _Wanted(request(ctx).combined_traits())

    def check(self, state: NodeState, prepared: _Wanted, ctx: PodContext) -> Reason | None:
        raw = state.node.annotations.get(ann.NODE_TRAITS, "")
        if raw in prepared.verdicts:
            return prepared.verdicts[raw]
        verdict = prepared.verdicts[raw] = self._verdict(raw, prepared.traits)
        return verdict

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
