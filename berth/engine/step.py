"""Steps: the small objects every vocabulary compiles into.

A step has a `name` (defined once, used in config, Decision, events, metrics and tests) and a `phase`.
`prepare(ctx)` runs once per pod and returns the step's state, or SKIP when the step has nothing to do
for this pod (no prefer_* tags, no policy). The per-node method reads only that state and the node's
counters, and it alone produces a Reason.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from berth.cluster.model import Pod
from berth.cluster.view import ClusterView, NodeState, app_key
from berth.engine.types import Event, Phase, Reason, StepTrace


class _Skip:
    """Returned by prepare(): the step does nothing for this pod."""

    def __init__(self, why: str = "") -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"SKIP({self.why!r})"


SKIP = _Skip()


def skip(why: str) -> _Skip:
    return _Skip(why)


@dataclass(slots=True)
class PodContext:
    """Per-pod state shared by the steps of one decision ("write once, read many")."""

    pod: Pod
    spec: Any  # the pod's compiled berth annotations (berth.vocab.pod.PodSpec)
    view: ClusterView
    rng: random.Random
    prepared: dict[str, Any] = field(default_factory=dict)
    # Where the pod itself already sits, if the view holds it: it is never its own neighbour.
    self_node: str = ""
    self_pod: Pod | None = None

    def __post_init__(self) -> None:
        placed = self.view.pod(self.pod.key)
        if placed is not None and placed.node_name and placed.same_pod(self.pod):
            self.self_node = placed.node_name
            self.self_pod = placed

    def self_on(self, state: NodeState) -> Pod | None:
        """The pod itself, when the view already has it on this node."""
        return self.self_pod if self.self_node == state.node.name else None

    def neighbour_tag_count(self, state: NodeState, tag: str) -> int:
        """Pods of the pod's namespace on the node carrying `tag`, the pod itself excluded."""
        count = state.tag_count(self.pod.namespace, tag)
        me = self.self_on(state)
        if me is not None and tag in me.tags:
            count -= 1
        return count

    def app_count(self, state: NodeState) -> int:
        """Pods of the pod's namespace, app name and version on the node, the pod itself excluded."""
        key = app_key(self.pod)
        count = state.apps.get(key, 0)
        me = self.self_on(state)
        if me is not None and app_key(me) == key:
            count -= 1
        return count


class Step:
    name: ClassVar[str] = ""
    phase: ClassVar[Phase] = Phase.HARD
    summary: ClassVar[str] = ""

    def prepare(self, ctx: PodContext) -> Any:
        return None

    def constraint(self, prepared: Any) -> str | None:
        """How a 409 names this step when it removed nodes and nothing fits (None: not a user
        constraint, the generic "0/N nodes are available" text is enough)."""
        return None

    def event(self, trace: StepTrace, prepared: Any, ctx: PodContext) -> Event | None:
        """An event this step adds to the pod when the pod is placed."""
        return None

    def __repr__(self) -> str:
        return self.name


class NodeFilter(Step):
    """A hard filter decided node by node."""

    phase = Phase.HARD

    def check(self, state: NodeState, prepared: Any, ctx: PodContext) -> Reason | None:
        raise NotImplementedError


class SetFilter(Step):
    """A filter that must see the whole set: hard (large servers) or soft (drop only while others
    remain). Returns the nodes it removes, each with its reason."""

    phase = Phase.SOFT

    def select(self, states: Sequence[NodeState], prepared: Any, ctx: PodContext) -> dict[str, Reason]:
        raise NotImplementedError


class Tier(Step):
    """Keeps only the nodes with the highest value; the value is also the node's score part."""

    phase = Phase.TIER

    def value(self, state: NodeState, prepared: Any, ctx: PodContext) -> int:
        raise NotImplementedError

    def set_aside(self, value: int, best: int, prepared: Any) -> Reason:
        raise NotImplementedError


class Scorer(Step):
    """Adds a weighted, normalised score to every node; removes none."""

    phase = Phase.SCORE

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = weight

    def raw(self, state: NodeState, prepared: Any, ctx: PodContext) -> float:
        raise NotImplementedError
