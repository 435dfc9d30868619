"""Never worse than kube-scheduler: what berth's rules do not say is placed as kube's default profile
would place it, and simulate refuses what kube-scheduler refuses.

The expected counts of the first cases are what the real kube-scheduler (v1.36.3, default profile, the
same nodes and pods on the e2e control plane) placed; e2e/test_kube_fidelity_e2e.py runs the scheduler
itself on the rest.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from berth.cluster.convert import replica_owner, replica_pods
from berth.configure import build_pipeline, default_pipeline
from berth.engine import Decision, decide
from berth.vocab.alloc.config import parse_config
from tests.builders import node, pod, to_pod, view
from tests.policy_builders import app, placement_policy

ZONE = "topology.kubernetes.io/zone"
PIPELINE = default_pipeline(kube_filters=True)
REQUESTS = {"cpu": "250m", "memory": "256Mi"}


def _burst(v: Any, pods: list[dict[str, Any]], pipeline: Any = PIPELINE) -> list[Decision]:
    """Place the pods one after the other, each seeing the ones before, as simulate does."""
    out = []
    for i, obj in enumerate(pods):
        new = to_pod(obj)
        decision = decide(new, v, pipeline, seed=i)
        out.append(decision)
        if decision.chosen:
            placed = json.loads(json.dumps(obj))
            placed["spec"]["nodeName"] = decision.chosen
            placed["status"] = {"phase": "Running"}
            v.add_pod(to_pod(placed))
    return out


def _counts(decisions: list[Decision]) -> Counter:
    return Counter(d.chosen for d in decisions if d.chosen)


def _heterogeneous() -> list[dict[str, Any]]:
    sizes = (("big", "32", "128Gi"), ("mid-a", "16", "64Gi"), ("mid-b", "16", "64Gi"), ("small", "8", "32Gi"))
    nodes = [node(n, cpu=c, memory=m) for n, c, m in sizes]
    running = [pod(f"old-{n}", namespace="shop", node=n, **REQUESTS) for n, _, _ in sizes]
    return [*nodes, *running]


def _within(got: Counter, kube: dict[str, int], skew: int = 3) -> bool:
    return all(abs(got[n] - count) <= skew for n, count in kube.items())


def test_pods_without_any_rule_spread_over_nodes_of_different_sizes_as_kube_does():
    """20 pods with no rule (no controller): kube-scheduler placed 11 / 4 / 4 / 1; berth used to put
    all 20 on the biggest node."""
    v = view(*_heterogeneous())
    new = [pod(f"web-{i}", namespace="shop", labels={"app": "web"}, **REQUESTS) for i in range(20)]
    counts = _counts(_burst(v, new))
    assert sum(counts.values()) == 20
    assert _within(counts, {"big": 11, "mid-a": 4, "mid-b": 4, "small": 1})
    assert counts["big"] < 20 and counts["small"] < counts["big"]


def test_a_deployments_replicas_are_spread_as_kubes_default_spreading_does():
    """The replicas of one ReplicaSet: kube's system default spreading (hostname maxSkew 3) placed
    them 5 / 5 / 5 / 5 on the same nodes."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 20,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": REQUESTS}}]},
            },
        },
    }
    v = view(*_heterogeneous())
    owner = replica_owner(deployment)
    assert owner is not None
    v.upsert_workload(owner)
    counts = _counts(_burst(v, replica_pods(deployment, 20)))
    assert counts == {"big": 5, "mid-a": 5, "mid-b": 5, "small": 5}


ANTI_HOST = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_required_anti_affinity_places_one_replica_per_node_and_refuses_the_fourth():
    v = view(node("a"), node("b"), node("c"))
    new = [pod(f"web-{i}", labels={"app": "web"}, spec={"affinity": ANTI_HOST}) for i in range(4)]
    decisions = _burst(v, new)
    assert sorted(d.chosen for d in decisions[:3]) == ["a", "b", "c"]
    last = decisions[3]
    assert last.chosen is None and last.error is not None and last.error.code == 409
    assert "kube/inter-pod-affinity" in last.error.message
    assert "didn't match pod anti-affinity rules" in last.error.message


def test_a_running_pods_anti_affinity_keeps_the_new_pod_off_its_zone():
    """kube's symmetry: the running pod says "no web pod in my zone"; the web pod has no rule."""
    db_anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
            ]
        }
    }
    v = view(
        node("a", labels={ZONE: "z1"}),
        node("b", labels={ZONE: "z1"}),
        node("c", labels={ZONE: "z2"}),
        pod("db", node="a", labels={"app": "db"}, spec={"affinity": db_anti}),
    )
    decision = decide(to_pod(pod("web", labels={"app": "web"})), v, PIPELINE, seed=1)
    assert decision.chosen == "c"
    assert "existing pods anti-affinity" in str(decision.node("b").reasons[0])


def test_zone_spreading_that_cannot_hold_refuses_the_pod():
    """maxSkew 1 over two zones where the second holds one small node: once it is full, the first zone
    may run only one pod more than it."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    v = view(
        node("a", labels={ZONE: "z1"}),
        node("b", labels={ZONE: "z1"}),
        node("c", cpu="1", memory="2Gi", labels={ZONE: "z2"}),
    )
    new = [
        pod(
            f"web-{i}",
            labels={"app": "web"},
            cpu="400m",
            memory="512Mi",
            spec={"topologySpreadConstraints": spread},
        )
        for i in range(8)
    ]
    decisions = _burst(v, new)
    counts = _counts(decisions)
    # z2 takes 2 pods (its one node's CPU), z1 at most one more: 5 placed, 3 refused.
    assert counts["c"] == 2 and counts["a"] + counts["b"] == 3
    refused = [d for d in decisions if d.chosen is None]
    assert len(refused) == 3
    assert "topology spread" in refused[0].error.message


def test_a_host_port_in_use_and_a_full_pod_count_refuse_the_node():
    port = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    v = view(
        node("ports"),
        node("full", pods="1"),
        node("free"),
        pod("uses-port", node="ports", spec=port),
        pod("fills", node="full"),
    )
    decision = decide(to_pod(pod("new", spec=port)), v, PIPELINE, seed=1)
    assert decision.chosen == "free"
    assert decision.node("ports").reasons[0].step == "kube/node-ports"
    assert decision.node("full").reasons[0].step == "kube/resources"
    assert "too many pods" in str(decision.node("full").reasons[0])


def test_preferred_node_affinity_and_prefer_no_schedule_taints_rank_the_nodes():
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }
    spot = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    v = view(
        node("hdd"),
        node("ssd", labels={"disk": "ssd"}),
        node("ssd-spot", labels={"disk": "ssd"}, taints=spot),
    )
    decision = decide(to_pod(pod("new", spec={"affinity": preferred})), v, PIPELINE, seed=1)
    assert decision.chosen == "ssd"
    part = decision.node("ssd-spot").reasons[0]
    assert part.step == "kube/preferences" and part.values["score"] < part.values["highest"]


def test_preferred_pod_anti_affinity_spreads_replicas_over_zones():
    preferred = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": ZONE,
                    },
                }
            ]
        }
    }
    v = view(*(node(f"n{z}{i}", labels={ZONE: f"z{z}"}) for z in range(3) for i in range(2)))
    new = [pod(f"web-{i}", labels={"app": "web"}, spec={"affinity": preferred}) for i in range(3)]
    zones = Counter(d.chosen[:2] for d in _burst(v, new))
    assert zones == {"n0": 1, "n1": 1, "n2": 1}


def test_a_configured_chain_still_keeps_one_replica_per_host():
    """The docs' example configuration names no PlacementPolicy step: ONE_PER_HOST holds all the same."""
    config = parse_config(
        {
            "allocationDescription": [
                "pipe",
                "hard-filter-min-ram",
                "hard-filter-min-cpu",
                "score-unreserved-ram",
            ]
        }
    )
    v = view(node("a"), node("b"), node("c"), placement_policy("one", {"type": "ONE_PER_HOST"}))
    new = [pod(f"web-{i}", labels=app("web")) for i in range(4)]
    decisions = _burst(v, new, build_pipeline(config, kube_filters=True))
    assert sorted(d.chosen for d in decisions[:3]) == ["a", "b", "c"]
    assert decisions[3].chosen is None
    assert "ONE_PER_HOST" in decisions[3].error.message


def test_simulate_names_what_kube_checks_that_berth_does_not_model():
    claim = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    decision = decide(to_pod(pod("db", spec=claim)), view(node("a")), PIPELINE, seed=1)
    (note,) = [e for e in decision.events if e.reason == "NotModelled"]
    assert "VolumeBinding" in note.message and note.type == "Warning"
    live = build_pipeline(None, kube_filters=False)
    assert not [
        e
        for e in decide(to_pod(pod("db", spec=claim)), view(node("a")), live, seed=1).events
        if e.reason == "NotModelled"
    ]
