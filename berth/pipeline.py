"""The chain every pod runs through, built top to bottom in one place.

Order (DESIGN.md, "How the vocabularies compose"):
1. basic Kubernetes feasibility, offline only: kube-scheduler has done it when the extender is asked;
   cheap label and condition checks before the resource arithmetic;
2. hard filters of the vocabularies: the tag constraints (explicit user intent, cheap counter reads);
3. the tag-affinity tier: only the highest prefer_* sum goes on, before anything the operator
   prefers, so the user's preference always beats spreading and packing.
"""

from __future__ import annotations

from berth.engine.chain import Member, Pipe
from berth.engine.decide import Pipeline
from berth.engine.step import Step
from berth.vocab import kube
from berth.vocab.pod import compile_pod
from berth.vocab.tag_steps import RequireWithoutTag, RequireWithTag, TagAffinityTier

# Every step a chain may name, by name.
REGISTRY: dict[str, type[Step]] = {
    cls.name: cls
    for cls in (
        kube.NodeReady,
        kube.NodeUnschedulable,
        kube.TaintToleration,
        kube.NodeAffinity,
        kube.NodeResourcesFit,
        RequireWithTag,
        RequireWithoutTag,
        TagAffinityTier,
    )
}


def default_chain(*, offline: bool) -> Member:
    members: list[Member] = []
    if offline:
        members += [
            kube.NodeReady(),  # a node that is down or cordoned never takes pods
            kube.NodeUnschedulable(),
            kube.TaintToleration(),
            kube.NodeAffinity(),  # the pod's own node selection
            kube.NodeResourcesFit(),  # last of kube's: the only one that sums requests
        ]
    members += [
        RequireWithTag(),  # hard tag constraints: counter reads per node
        RequireWithoutTag(),
        TagAffinityTier(),  # the seed's "schedule have highest affinity"
    ]
    return Pipe(tuple(members))


def default_pipeline(*, offline: bool = True) -> Pipeline:
    return Pipeline(chain=default_chain(offline=offline), compile_pod=compile_pod)
