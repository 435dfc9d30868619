"""kube-scheduler's own rules, in berth's engine: its filters (offline: the live kube-scheduler runs
them before it asks berth) and its default scoring (offline and live: berth's choice is final)."""

from berth.vocab.kube.filters import (
    NodeName,
    NodePorts,
    NodeReady,
    NodeUnschedulable,
)
from berth.vocab.kube.interpod import InterPodAffinity
from berth.vocab.kube.node_affinity import NodeAffinity
from berth.vocab.kube.node_resources import NodeResourcesFit
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
