"""Every algorithm of sdc-designation berth runs, as its step class (implemented, or a data step that computes
from the cluster view). The names, the refused ones with the reason they have no meaning on Kubernetes,
and what a name means are in berth.vocab.alloc.plugin_names; docs/allocator.md has the same table for people.
"""

from __future__ import annotations

from berth.vocab.alloc import (
    capacity,
    data,
    locality,
    network,
    platform,
    plugin_names,
    scorers,
    state_filters,
    traits,
)
from berth.vocab.alloc.base import AllocStep
from berth.vocab.alloc.plugin_names import PREFIX

STEPS: tuple[type[AllocStep], ...] = (
    locality.CalculateAffinity,
    locality.CalculateLocalityHints,
    data.CalculateRecentVms,
    data.CalculateServerUnreserved,
    data.CalculateTicketedVms,
    capacity.HardFilterCapness,
    platform.HardFilterFeatureMinPlatform,
    state_filters.HardFilterForceFailure,
    state_filters.HardFilterHeadnode,
    state_filters.HardFilterInvalidServers,
    capacity.HardFilterLargeServers,
    locality.HardFilterLocalityHints,
    capacity.HardFilterMinCpu,
    capacity.HardFilterMinDisk,
    capacity.HardFilterMinFreeDisk,
    capacity.HardFilterMinRam,
    capacity.HardFilterOverprovisionRatios,
    platform.HardFilterPlatformVersions,
    state_filters.HardFilterReserved,
    state_filters.HardFilterReservoir,
    state_filters.HardFilterRunning,
    state_filters.HardFilterSetup,
    traits.HardFilterTraits,
    state_filters.HardFilterVirtualServers,
    network.HardFilterVlans,
    capacity.HardFilterVmCount,
    data.Identity,
    data.LoadServerVms,
    data.OverrideOverprovisioning,
    scorers.PickRandom,
    locality.SoftFilterLocalityHints,
    scorers.ScoreCurrentPlatform,
    scorers.ScoreNextReboot,
    scorers.ScoreNumOwnerZones,
    scorers.ScoreUniformRandom,
    scorers.ScoreUnreservedDisk,
    scorers.ScoreUnreservedRam,
)

# sdc-designation's name (without the alloc/ prefix) -> step class.
ALGORITHMS: dict[str, type[AllocStep]] = {cls.name.removeprefix(PREFIX): cls for cls in STEPS}
if tuple(ALGORITHMS) != plugin_names.ALGORITHMS:  # the leaf list of names and the classes must agree
    raise ImportError(
        f"berth.vocab.alloc.plugin_plugin_names.ALGORITHMS differs from the steps: {sorted(ALGORITHMS)}"
    )
