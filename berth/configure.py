"""The chain every pod runs through, built top to bottom in one place.

`build_pipeline(config, kube_filters=...)` builds it from the allocator configuration's
`allocationDescription`, or, without one, from berth's default chain (docs/allocator.md gives the
reason for every position):
1. basic Kubernetes feasibility, with kube_filters only: kube-scheduler has done it before it asks;
2. hard filters: first the node's own state (cheap, and later steps read node data), then what the
   pod asks of the node (NIC tags, platform, traits), capacity under the overprovision ratios, strict
   locality, the tag constraints, and the pod's PlacementPolicy (its CEL rules cost the most per node,
   so they run on the fewest);
3. what somebody wrote, as tiers: the pod's tag preferences, its preferences as kube-scheduler scores
   them (`kube/preferences`), its soft locality hints;
4. what nobody chose, never leaving no node: spreading by owner (for a pod without locality hints), the
   reservoir and the large-node reserve (each as an `or` with identity), kube-scheduler's system
   default spreading and resource scores (`kube/default-score`);
5. the allocator's scorers with the defaults' weights.

A chain names the seed's algorithms (`hard-filter-min-ram`, with or without `alloc/`), berth's other
steps by their names (`tags/require_with_tag`, `kube/resources`, `policy/placement-policy`), and custom
algorithms (berth.vocab.alloc.custom).
"""

from __future__ import annotations

import hashlib
from typing import Any

from berth.engine.chain import Member, Or, Pipe, describe
from berth.engine.pipeline import Pipeline
from berth.engine.step import Step
from berth.engine.types import Phase
from berth.errors import InvalidConfig
from berth.vocab import kube, step_names
from berth.vocab.alloc.base import AllocStep, Setup
from berth.vocab.alloc.config import DEFAULT_CONFIG, AllocatorConfig
from berth.vocab.alloc.custom import build, discovered, load_entry_point, load_path
from berth.vocab.alloc.description import Description, algorithm_problem, names_in, parse_description
from berth.vocab.alloc.plugin_names import lookup
from berth.vocab.alloc.registry import ALGORITHMS
from berth.vocab.planned_target import PlannedTarget
from berth.vocab.pod import PodCompiler
from berth.vocab.policy.steps import PlacementPolicyStep
from berth.vocab.tag_steps import RequireWithoutTag, RequireWithTag, TagAffinityTier

# Every step of the other vocabularies a chain may name, by name (the allocator's are in
# berth.vocab.alloc.registry, built with the configuration); their names are step_names.OTHER_STEPS.
REGISTRY: dict[str, type[Step]] = {
    cls.name: cls
    for cls in (
        *kube.STEPS,
        RequireWithTag,
        RequireWithoutTag,
        PlacementPolicyStep,
        PlannedTarget,
        TagAffinityTier,
    )
}

# kube-scheduler's filters, in its order; with kube_filters only (the live kube-scheduler runs them itself).
KUBE = tuple(cls.name for cls in kube.FILTERS)
KUBE_SCORE = kube.KubeDefaultScore.name
KUBE_PREFERENCES = kube.KubePreferences.name
POLICY_STEP = step_names.PLACEMENT_POLICY
OVERRIDE = "override-overprovisioning"


def default_description(*, kube_filters: bool, kube_scoring: bool = True) -> Description:
    """berth's default chain, in the configuration's words; without kube's default scores when the
    configuration leaves the ranking to the allocator's scorers."""
    chain: list[Any] = ["pipe"]
    if kube_filters:
        chain += KUBE
    chain += [
        # The node's own state: cheap label and condition reads; later steps assume well-formed nodes.
        "hard-filter-invalid-servers",
        "hard-filter-running",
        "hard-filter-force-failure",
        "hard-filter-virtual-servers",
        "hard-filter-reserved",
        "hard-filter-headnode",
        # What the pod, its image and its package ask of the node: one read of the node per step.
        "hard-filter-vlans",
        "hard-filter-platform-versions",
        "hard-filter-feature-min-platform",
        "hard-filter-traits",
        # Capacity: the ratios first (they decide what the rest computes), then the pod count, then
        # the resource sums. (hard-filter-capness is left out: on Kubernetes a pod without a CPU
        # request or limit gets the lowest CPU weight and cannot starve capped pods.)
        OVERRIDE,
        "hard-filter-overprovision-ratios",
        "hard-filter-vm-count",
        "hard-filter-min-ram",
        "hard-filter-min-cpu",
        "hard-filter-min-disk",
        "hard-filter-min-free-disk",
        # Strict locality: set lookups in the hints resolved once per pod.
        "calculate-locality-hints",
        "hard-filter-locality-hints",
        # The tag constraints (counter reads), then the pod's PlacementPolicy last among the hard
        # filters: its CEL rules cost the most per node, so they run on the fewest.
        "tags/require_with_tag",
        "tags/require_without_tag",
        *([POLICY_STEP] if POLICY_STEP in REGISTRY else []),
        # The replacement of a pod `berth rebalance` moved goes where the plan said (when feasible).
        step_names.PLANNED_TARGET,
        # What somebody wrote outranks what nobody chose (docs/extender.md). Written: the pod's tag
        # preferences, its preferences as kube-scheduler scores them (preferred node and pod affinity,
        # the running pods' terms for it, ScheduleAnyway spread, PreferNoSchedule taints), its soft
        # locality hints (this step spreads by owner, a default, only for a pod without hints).
        "tags/tag-affinity",
        KUBE_PREFERENCES,
        "soft-filter-locality-hints",
        # Defaults nobody chose, each leaving nodes whenever there are any: the operator's reserves,
        # then kube-scheduler's system default spreading and resource scores (the latter replaced by
        # a resource weight the configuration sets, or the pod's package spread).
        ["or", "hard-filter-reservoir", "identity"],
        ["or", "hard-filter-large-servers", "identity"],
        *([KUBE_SCORE] if kube_scoring else []),
        # Scorers, weighted by the defaults' weight_*.
        "score-unreserved-ram",
        "score-unreserved-disk",
        "score-num-owner-zones",
        "score-current-platform",
        "score-next-reboot",
        "score-uniform-random",
    ]
    description, problems = parse_description(chain, "default chain")
    assert not problems, problems
    return description


def build_pipeline(config: AllocatorConfig | None = None, kube_filters: bool = True) -> Pipeline:
    """The chain of the configuration (berth's default without allocationDescription), its steps
    built with the configuration's weights, ratios and limits.

    Offline (simulate), a configured chain that names no kube/ step is preceded by them, as the live
    scheduler runs them before the extender; live, kube/ steps are left out.
    """
    config = config or DEFAULT_CONFIG
    if config.description is not None:
        description = with_own_rules(config.description)
    else:
        description = default_description(kube_filters=kube_filters, kube_scoring=ranks_by_kube(config))
    names = names_in(description)
    if not kube_filters:
        description = _without_kube(description) or ("pipe", "identity")
    elif config.description is not None and not any(n in KUBE for n in names):
        description = ("pipe", *KUBE, description)
    override = any(n.removeprefix("alloc/") == OVERRIDE for n in names)
    setup = Setup(config=config, override=override and not config.defaults.disable_override_overprovisioning)
    chain = _member(description, "allocationDescription", setup)
    return Pipeline(
        chain=chain, compile_pod=PodCompiler(config, kube_filters=kube_filters), digest=digest(chain, config)
    )


def with_own_rules(description: Description) -> Description:
    """A configured chain with berth's own rules that it leaves out (step_names.ALWAYS): the tag
    constraints and the PlacementPolicy step before it, the planned-target, tag-affinity and
    kube/preferences tiers before its first member that is not a hard filter (the user's preference
    before anything the operator prefers). A rule the chain names stays where the chain puts it."""
    names = names_in(description)
    hard = [n for n in step_names.ALWAYS_HARD if n not in names]
    members = list(description[1:]) if description[0] == "pipe" else [description]
    tiers = [n for n in step_names.ALWAYS_TIERS if n not in names]
    if tiers:
        # (a chain that is one `or` is taken whole first: the tiers then rank what it leaves)
        at = next((i for i, m in enumerate(members) if not _hard_filter(m)), len(members))
        at = at if description[0] == "pipe" else len(members)
        members[at:at] = tiers
    if not hard and len(members) == len(description) - 1 and description[0] == "pipe":
        return description
    return ("pipe", *hard, *members)


def _hard_filter(member: Any) -> bool:
    """A chain member that is one step that only removes nodes (an `or` or a soft step is not)."""
    if isinstance(member, tuple):
        return False
    cls = ALGORITHMS.get(member.removeprefix("alloc/")) or REGISTRY.get(member)
    return cls is not None and cls.phase is Phase.HARD


def ranks_by_kube(config: AllocatorConfig) -> bool:
    """Whether berth's default chain ranks by kube-scheduler's default scores: unless the configuration
    turns them off, or sets the deprecated server_spread, whose scorers then decide the ranking."""
    return config.defaults.kube_default_scoring and config.defaults.spread is None


def digest(chain: Member, config: AllocatorConfig) -> str:
    """12 hex digits naming the chain and every setting its steps run with: two extenders that decide
    alike have the same digest, and a placement record says which configuration decided."""
    settings = (
        describe(chain),
        config.defaults,
        sorted(config.packages.items()),
        sorted(config.algorithms.items()),
    )
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:12]


def default_chain(*, kube_filters: bool) -> Member:
    return build_pipeline(None, kube_filters=kube_filters).chain


def default_pipeline(*, kube_filters: bool = True) -> Pipeline:
    return build_pipeline(None, kube_filters=kube_filters)


def _without_kube(description: Description) -> Description | None:
    command, members = description[0], []
    for member in description[1:]:
        if isinstance(member, tuple):
            kept = _without_kube(member)
            if kept is not None:
                members.append(kept)
        elif member not in KUBE:
            members.append(member)
    if not members:
        return None
    if command == "or" and len(members) == 1:
        return members[0] if isinstance(members[0], tuple) else ("pipe", members[0])
    return (command, *members)


def _member(description: Description, where: str, setup: Setup) -> Member:
    members = []
    for i, item in enumerate(description[1:], 1):
        path = f"{where}[{i}]"
        members.append(_member(item, path, setup) if isinstance(item, tuple) else _step(item, path, setup))
    return Pipe(tuple(members)) if description[0] == "pipe" else Or(tuple(members))


def _step(name: str, where: str, setup: Setup) -> Step:
    config = setup.config
    found = lookup(name, config.algorithms)
    problem = algorithm_problem(name, found)
    if problem is not None:
        raise InvalidConfig(f"{where}: {problem}", field=where)
    if found.kind == "alloc":
        cls: type[Step] = ALGORITHMS[name.removeprefix("alloc/")]
        return cls(setup) if issubclass(cls, AllocStep) else cls()  # type: ignore[call-arg]
    if found.kind == "berth":
        if name == KUBE_SCORE:  # a resource weight the file sets replaces kube's resource scores
            return kube.KubeDefaultScore(config.resource_weights())
        return REGISTRY[name]()
    if found.kind == "config":
        ref = config.algorithms[name]
        label = f"algorithms.{name}"
        return build(load_path(ref.path, label), config, ref.weight, label)
    assert name in discovered()
    return build(load_entry_point(name), config, None, f"entry point {name}")
