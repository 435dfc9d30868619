"""sdc-designation's bookkeeping algorithms. The original passes server objects from plugin to plugin and
these fill in data; berth computes the same things from its cluster view inside the steps that use
them. In a chain they are accepted and traced, keep every node, and say what stands in for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, SetFilter, Skipped, skip
from berth.engine.types import Phase, Reason
from berth.vocab.alloc.base import AllocStep


class Identity(AllocStep, SetFilter[None]):
    """Returns the nodes it received: the fallback arm of an `or`."""

    name = "alloc/identity"
    summary = "keeps every node it receives (the fallback of an or)"
    phase = Phase.HARD

    def select(self, states: Sequence[NodeState], prepared: None, ctx: PodContext) -> dict[str, Reason]:
        return {}


class _DataStep(AllocStep, NodeFilter[None]):
    why = ""

    def prepare(self, ctx: PodContext) -> Skipped:
        return skip(f"computes only, every node kept: {self.why}")

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:  # pragma: no cover
        return None


class LoadServerVms(_DataStep):
    name = "alloc/load-server-vms"
    summary = "data: the pods of every node come from the cluster view; keeps every node"
    why = "the cluster view holds every node's pods"


class CalculateServerUnreserved(_DataStep):
    name = "alloc/calculate-server-unreserved"
    summary = (
        "data: unreserved RAM, CPU and disk are computed per node by the capacity steps; keeps every node"
    )
    why = (
        "the capacity steps compute unreserved RAM, CPU and disk per node from allocatable and the "
        "pods' limits"
    )


class CalculateRecentVms(_DataStep):
    name = "alloc/calculate-recent-vms"
    summary = "data: pods just bound count in the view before the watch shows them; keeps every node"
    why = "pods the extender bound count in the cluster view before the watch shows them"


class CalculateTicketedVms(_DataStep):
    name = "alloc/calculate-ticketed-vms"
    summary = "data: pods being placed count in the view once bound; keeps every node"
    why = "pods being placed count in the cluster view as soon as the extender binds them"


class OverrideOverprovisioning(AllocStep, NodeFilter[None]):
    """Its presence in the chain (unless disable_override_overprovisioning) makes every node and
    every pod use the defaults' overprovision_ratio_*; the capacity steps read that."""

    name = "alloc/override-overprovisioning"
    summary = "data: fixes every node's and pod's overprovision ratios to overprovision_ratio_*"

    def prepare(self, ctx: PodContext) -> Skipped:
        if self.defaults.disable_override_overprovisioning:
            return skip(
                "disable_override_overprovisioning is true: nodes use their berth.dev/overprovision-ratios "
                "annotation (else the defaults) and pods their package's ratios"
            )
        ratios = self.setup.ratios_text
        return skip(f"computes only, every node kept: every node and pod use the ratios {ratios}")

    def check(self, state: NodeState, prepared: None, ctx: PodContext) -> Reason | None:  # pragma: no cover
        return None
