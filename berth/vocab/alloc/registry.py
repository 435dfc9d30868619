"""Every algorithm name of the seed, and what berth does with it: a step class (implemented, or a data
step that computes from the cluster view), or a refusal with the reason it has no meaning on
Kubernetes. docs/allocator.md has the same table for people.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from berth.vocab.alloc import capacity, data, locality, network, platform, scorers, state_filters, traits
from berth.vocab.alloc.base import PREFIX, AllocStep
from berth.vocab.alloc.config import AllocatorConfig
from berth.vocab.alloc.custom import discovered

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

# The seed's name (without the alloc/ prefix) -> step class.
ALGORITHMS: dict[str, type[AllocStep]] = {cls.name.removeprefix(PREFIX): cls for cls in STEPS}  # type: ignore[attr-defined]

# Names with no meaning on Kubernetes, and why. Asking for one is an InvalidConfig naming it.
REFUSED: dict[str, str] = {
    "hard-filter-volumes-from": (
        "Docker's volumes-from has no counterpart: the containers of one pod share volumes natively, and "
        "kube-scheduler's VolumeBinding already places a pod where its PersistentVolumeClaims can attach"
    ),
    "hard-filter-os": (
        "a pod's operating system is matched by kube-scheduler through the node label kubernetes.io/os "
        "(nodeSelector), which berth's offline chain checks in kube/node-affinity"
    ),
    "hard-filter-hvm": "there are no hardware-virtualised VM brands (kvm, bhyve) among Kubernetes pods",
    "hard-filter-zpool-encryption": (
        "Kubernetes nodes report no zpool; select nodes with encrypted storage by a label (nodeSelector) "
        "or a trait"
    ),
    "hard-filter-owners-servers": (
        "it runs JavaScript expressions per owner; a PlacementPolicy's RULE_BASED CEL rules express "
        "per-namespace node rules"
    ),
    "hard-filter-recent-servers": (
        "berth's extender binds pods itself and its view holds every pod it bound, so concurrent "
        "placements see each other and need no cooling-off"
    ),
    "pick-weighted-random": (
        "berth chooses the highest score and breaks ties with the decision's seed; weight_uniform_random "
        "spreads concurrent placements instead"
    ),
}


@dataclass(frozen=True, slots=True)
class Found:
    kind: str = ""  # alloc | berth | config | entry-point
    refused: str = ""
    unknown: bool = False
    suggestion: str = ""


def lookup(name: str, config: AllocatorConfig) -> Found:
    """What a chain name means: one of the seed's algorithms (with or without alloc/), one of berth's
    other named steps (tags/..., kube/..., policy/...), or a custom algorithm."""
    from berth.pipeline import REGISTRY  # the chain builder owns the other vocabularies' steps

    bare = name.removeprefix(PREFIX)
    if bare in REFUSED:
        return Found(refused=REFUSED[bare])
    if bare in ALGORITHMS:
        return Found(kind="alloc")
    if name in REGISTRY:
        return Found(kind="berth")
    if name in config.algorithms:
        return Found(kind="config")
    if name in discovered():
        return Found(kind="entry-point")
    known = [*ALGORITHMS, *REGISTRY, *config.algorithms, *discovered()]
    close = difflib.get_close_matches(name, known, n=1)
    return Found(unknown=True, suggestion=close[0] if close else "")


def builtin_names() -> set[str]:
    from berth.pipeline import REGISTRY

    return {*ALGORITHMS, *(f"{PREFIX}{n}" for n in ALGORITHMS), *REFUSED, *REGISTRY}
