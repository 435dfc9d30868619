"""kube-scheduler's own rules, in berth's engine: its filters (offline: the live kube-scheduler runs
them before it asks berth) and its default scoring (offline and live: berth's choice is final).

One module per kube plugin, as kube keeps them (pkg/scheduler/framework/plugins), each with its filter
and, for a plugin that scores, the raw value per node: node_unschedulable (with berth's NodeReady),
node_name, taint_toleration, node_affinity, node_ports, node_resources, spread (PodTopologySpread) and
interpod (InterPodAffinity; terms: what its terms select). score holds the two tiers that normalise,
weight and sum the plugins' raw values as kube does.

The filters are for the offline path only (simulate, audit, capacity, what-if): kube-scheduler checks
them before it asks the extender, so the extender's chain leaves them out; an offline answer without
them would be wrong. Their names start with `kube/` so their reasons are told apart from berth's own
rules.
"""

from berth.vocab.kube.interpod import InterPodAffinity
from berth.vocab.kube.node_affinity import NodeAffinity
from berth.vocab.kube.node_name import NodeName
from berth.vocab.kube.node_ports import NodePorts
from berth.vocab.kube.node_resources import NodeResourcesFit
from berth.vocab.kube.node_unschedulable import NodeReady, NodeUnschedulable
from berth.vocab.kube.score import KubeDefaultScore, KubePreferences
from berth.vocab.kube.spread import PodTopologySpread
from berth.vocab.kube.taint_toleration import TaintToleration

# kube's filters in the order of its default profile (the first that fails names the node's reason).
FILTERS = (
    NodeReady,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    PodTopologySpread,
    InterPodAffinity,
)
STEPS = (*FILTERS, KubePreferences, KubeDefaultScore)

__all__ = [
    "FILTERS",
    "STEPS",
    "InterPodAffinity",
    "KubeDefaultScore",
    "KubePreferences",
    "NodeAffinity",
    "NodeName",
    "NodePorts",
    "NodeReady",
    "NodeResourcesFit",
    "NodeUnschedulable",
    "PodTopologySpread",
    "TaintToleration",
]
