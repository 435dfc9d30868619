"""What filter decided, kept for bind (berth.extender.decisions): bind confirms a decision only while
nothing it read has changed, and finds it by the pod's uid or, without one, its name."""

from __future__ import annotations

from berth.cluster.per_pod import PodStates
from berth.configure import default_pipeline
from berth.engine import decide
from berth.extender.decisions import Decisions
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, to_pod, view
from tests.policy_builders import placement_policy

RULES = default_pipeline(kube_filters=False)


def _decided(*objects, **kwargs):
    cluster = SnapshotCluster(view(node("n1"), node("n2"), *objects))
    decisions = Decisions(cluster, RULES, PodStates())
    p = to_pod(pod("p", uid="u", phase="Pending", **kwargs))
    decision = decide(p, cluster.view, RULES, seed=1)
    remembered = decisions.remember(p, decision)
    cluster.reserve(p, decision.chosen)
    decisions.stamp(remembered, decision.chosen)
    return cluster, decisions, remembered, decision.chosen


def test_a_decision_is_confirmed_for_its_node_while_nothing_it_read_changed():
    _, decisions, remembered, chosen = _decided()
    assert decisions.recall("u", "default/p") is remembered
    assert decisions.unchanged(remembered, chosen)
    assert not decisions.unchanged(remembered, "n2" if chosen == "n1" else "n1")  # another node


def test_a_pod_placed_on_its_node_since_sends_bind_back_to_deciding():
    cluster, decisions, remembered, chosen = _decided()
    cluster.view.add_pod(to_pod(pod("neighbour", uid="n", node=chosen)))
    assert not decisions.unchanged(remembered, chosen)


def test_a_policy_edit_sends_bind_back_to_deciding():
    cluster, decisions, remembered, chosen = _decided()
    cluster.view.upsert_policy(placement_policy("spread", {"type": "ONE_PER_HOST"}))
    assert not decisions.unchanged(remembered, chosen)


def test_a_pod_without_a_uid_is_found_by_its_name():
    cluster = SnapshotCluster(view(node("n1")))
    decisions = Decisions(cluster, RULES, PodStates())
    p = to_pod(pod("nameless", phase="Pending"))
    remembered = decisions.remember(p, decide(p, cluster.view, RULES, seed=1))
    assert decisions.recall("", "default/nameless") is remembered
    assert decisions.recall("some-uid", "default/other") is None
