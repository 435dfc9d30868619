"""The names a chain may use and what each means, without importing any step: sdc-designation's algorithms
(the allocator's steps, with or without `alloc/`), berth's other steps (berth.vocab.step_names), the
names refused on Kubernetes, and custom algorithms. The configuration's checks read this leaf module;
berth.vocab.alloc.registry maps the algorithms to their classes, and berth.configure the other steps."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass

from berth.vocab import step_names
from berth.vocab.alloc.custom import discovered

PREFIX = "alloc/"

# sdc-designation's algorithms berth runs, by sdc-designation's name (the registry has a class for each).
ALGORITHMS = (
    "calculate-affinity",
    "calculate-locality-hints",
    "calculate-recent-vms",
    "calculate-server-unreserved",
    "calculate-ticketed-vms",
    "hard-filter-capness",
    "hard-filter-feature-min-platform",
    "hard-filter-force-failure",
    "hard-filter-headnode",
    "hard-filter-invalid-servers",
    "hard-filter-large-servers",
    "hard-filter-locality-hints",
    "hard-filter-min-cpu",
    "hard-filter-min-disk",
    "hard-filter-min-free-disk",
    "hard-filter-min-ram",
    "hard-filter-overprovision-ratios",
    "hard-filter-platform-versions",
    "hard-filter-reserved",
    "hard-filter-reservoir",
    "hard-filter-running",
    "hard-filter-setup",
    "hard-filter-traits",
    "hard-filter-virtual-servers",
    "hard-filter-vlans",
    "hard-filter-vm-count",
    "identity",
    "load-server-vms",
    "override-overprovisioning",
    "pick-random",
    "soft-filter-locality-hints",
    "score-current-platform",
    "score-next-reboot",
    "score-num-owner-zones",
    "score-uniform-random",
    "score-unreserved-disk",
    "score-unreserved-ram",
)

# Names with no meaning on Kubernetes, and why. Asking for one is an InvalidConfig naming it.
REFUSED: dict[str, str] = {
    "hard-filter-volumes-from": (
        "Docker's volumes-from has no counterpart: the containers of one pod share volumes natively, and "
        "kube-scheduler's VolumeBinding already places a pod where its PersistentVolumeClaims can attach"
    ),
    "hard-filter-os": (
        "a pod's operating system is matched by kube-scheduler through the node label kubernetes.io/os "
        "(nodeSelector), which berth's chain with kube's filters checks in kube/node-affinity"
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
class NameLookup:
    kind: str = ""  # alloc | berth | config | entry-point
    refused: str = ""
    unknown: bool = False
    suggestion: str = ""


def lookup(name: str, custom: Collection[str] = ()) -> NameLookup:
    """What a chain name means: one of sdc-designation's algorithms (with or without alloc/), one of berth's
    other named steps (tags/..., kube/..., policy/...), or a custom algorithm (the configuration's
    `algorithms`, `custom`, or an installed entry point)."""
    bare = name.removeprefix(PREFIX)
    if bare in REFUSED:
        return NameLookup(refused=REFUSED[bare])
    if bare in ALGORITHMS:
        return NameLookup(kind="alloc")
    if name in step_names.OTHER_STEPS:
        return NameLookup(kind="berth")
    if name in custom:
        return NameLookup(kind="config")
    if name in discovered():
        return NameLookup(kind="entry-point")
    known = [*ALGORITHMS, *step_names.OTHER_STEPS, *custom, *discovered()]
    close = difflib.get_close_matches(name, known, n=1)
    return NameLookup(unknown=True, suggestion=close[0] if close else "")


def builtin_names() -> set[str]:
    return {*ALGORITHMS, *(f"{PREFIX}{n}" for n in ALGORITHMS), *REFUSED, *step_names.OTHER_STEPS}
