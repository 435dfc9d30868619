"""The order of berth's ranking: a preference somebody wrote outranks a default nobody chose.

Written: berth's `prefer_*` tags and soft locality, the pod's preferences as kube-scheduler scores them
(preferred node and pod affinity, the running pods' terms that select the pod, ScheduleAnyway spread,
PreferNoSchedule taints), and the operator's configured weights. Not chosen by anyone: the allocator's
spreading by owner and reserves, kube-scheduler's system default spreading and resource scores.
The cases come from sdc-designation's scorers and kube-scheduler's InterPodAffinity scoring tables
(pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from berth.cli import main
from berth.configure import build_pipeline
from tests.alloc_helpers import cn, config, reason_texts, trace, vm
from tests.builders import k8s_list, node, place, pod

REGION = "region"
CHINA, INDIA = {REGION: "China"}, {REGION: "India"}
AZ1 = {"az": "az1"}


def _affinity_term(key: str, values: list[str], topology: str) -> dict[str, Any]:
    return {
        "labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": values}]},
        "topologyKey": topology,
    }


def _preferred(kind: str, weight: int, term: dict[str, Any]) -> dict[str, Any]:
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]
        }
    }


def _three_nodes() -> list[dict[str, Any]]:
    return [node("node1", labels=CHINA), node("node2", labels=INDIA), node("node3", labels=AZ1)]


# -- the operator's configured weight -------------------------------------------------------------

PACKING = {
    "weight_unreserved_ram": -2,
    "weight_unreserved_disk": 0,
    "weight_current_platform": 0,
    "weight_next_reboot": 0,
    "weight_uniform_random": 0,
    "weight_num_owner_zones": 0,
    "filter_large_servers": False,
}


def _ram_cluster() -> list[dict[str, Any]]:
    return [cn("r1", memory="8Gi"), cn("r2", memory="32Gi"), cn("r3", memory="16Gi")]


def test_a_negative_unreserved_ram_weight_fills_the_node_with_the_least_free_ram():
    # sdc-designation: a negative weight_unreserved_ram fills the fullest nodes first, to keep spare
    # capacity; kube-scheduler's LeastAllocated (a default nobody chose) must not set r1 aside first.
    decision = place(
        vm("new", memory="1Gi"), *_ram_cluster(), cfg=config(defaults=PACKING), kube_filters=False
    )
    assert decision.chosen == "r1"
    assert "kube/default-score" not in reason_texts(decision).get("r1", "")
    assert trace(decision, "kube/default-score").note.startswith(
        "skipped: the configured defaults.weight_unreserved_ram and defaults.weight_unreserved_disk replaces"
    )


def test_a_positive_unreserved_ram_weight_spreads_to_the_node_with_the_most_free_ram():
    cfg = config(defaults={**PACKING, "weight_unreserved_ram": 2})
    assert place(vm("new", memory="1Gi"), *_ram_cluster(), cfg=cfg, kube_filters=False).chosen == "r2"


def test_without_a_configured_resource_weight_kube_schedulers_resource_scores_rank():
    decision = place(vm("new", memory="1Gi"), *_ram_cluster(), kube_filters=False)
    assert decision.chosen == "r2"
    assert "kube/default-score" in decision.node("r2").parts


def test_the_configuration_says_in_one_line_that_its_weight_replaces_kubes_resource_scores(tmp_path, capsys):
    cfg = config(defaults=PACKING)
    lines = [w for w in cfg.warnings if "resource scores" in w]
    assert lines == [
        "defaults.weight_unreserved_ram and defaults.weight_unreserved_disk replace kube-scheduler's "
        "resource scores (LeastAllocated, BalancedAllocation) in kube/default-score: the operator's "
        "resource strategy, as NodeResourcesFit's scoringStrategy"
    ]
    # No line where the file sets no resource weight, nor where kube's scores are off anyway.
    assert not [w for w in config(defaults={"weight_uniform_random": 0}).warnings if "resource scores" in w]
    off = {"weight_unreserved_ram": 1, "kube_default_scoring": False}
    assert not [w for w in config(defaults=off).warnings if "resource scores" in w]
    path = tmp_path / "allocator.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"weight_unreserved_ram": -2}}))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert "defaults.weight_unreserved_ram replaces kube-scheduler's resource scores" in out.out + out.err


def test_a_package_spread_replaces_kubes_resource_scores_but_not_the_pods_preferences():
    cfg = config(packages={"pack": {"alloc_server_spread": "min-ram"}})
    cluster = [cn("small", memory="8Gi"), cn("large", memory="64Gi", labels={"disk": "ssd"})]
    packed = place(
        vm("new", annotations={"berth.dev/package": "pack"}), *cluster, cfg=cfg, kube_filters=False
    )
    assert packed.chosen == "small"
    # The same pod preferring an ssd node: what it wrote outranks the package's packing.
    ssd = vm("new", annotations={"berth.dev/package": "pack"})
    ssd["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }
    decision = place(ssd, *cluster, cfg=cfg, kube_filters=False)
    assert decision.chosen == "large"
    small = reason_texts(decision)["small"]
    assert small.startswith("set aside: kube/preferences: lower score for the pod's")


# -- the running pods' preferred and required pod affinity (kube's symmetry) ---------------------------


def test_affinity_symmetry_considers_the_running_pods_preferred_terms():
    # kube: "Affinity symmetry: considered only preferredDuringScheduling in pod affinity symmetry".
    stay_with_s1 = _preferred("podAffinity", 5, _affinity_term("security", ["S1"], REGION))
    stay_with_s2 = _preferred("podAffinity", 5, _affinity_term("security", ["S2"], REGION))
    decision = place(
        pod("new", labels={"security": "S1"}),
        *_three_nodes(),
        pod("p1", node="node1", spec={"affinity": stay_with_s1}),
        pod("p2", node="node2", spec={"affinity": stay_with_s2}),
    )
    assert decision.chosen == "node1"
    assert reason_texts(decision)["node2"].startswith("set aside: kube/preferences:")
    assert reason_texts(decision)["node3"].startswith("set aside: kube/preferences:")


def test_affinity_symmetry_considers_the_running_pods_required_terms():
    # kube: "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod
    # affinity symmetry": both nodes of a running pod whose required term selects the pod score 100.
    hard = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _affinity_term("security", ["S1", "value2"], REGION)
            ]
        }
    }
    cluster = [
        *_three_nodes(),
        pod("p1", node="node1", spec={"affinity": hard}),
        pod("p2", node="node2", spec={"affinity": hard}),
    ]
    chosen = {place(pod("new", labels={"security": "S1"}), *cluster, seed=s).chosen for s in range(8)}
    # The allocator's spreading by owner (both nodes run a pod of the namespace) no longer sets them aside.
    assert chosen <= {"node1", "node2"}
    decision = place(pod("new", labels={"security": "S1"}), *cluster)
    assert "spread by owner" not in " ".join(reason_texts(decision).values())


def test_preferred_pod_affinity_to_the_namespaces_pods_is_honoured_where_the_namespace_runs():
    api = {"app.kubernetes.io/name": "api"}
    cluster = [node(f"n{i}") for i in range(5)]
    running = [pod(f"api-{i}", namespace="shop", node=f"n{i}", labels=api) for i in (0, 1, 3, 4)]
    want = _preferred(
        "podAffinity", 100, _affinity_term("app.kubernetes.io/name", ["api"], "kubernetes.io/hostname")
    )
    for kube_filters in (True, False):
        for seed in range(6):
            new = pod("cache-client", namespace="shop", spec={"affinity": want})
            decision = place(new, *cluster, *running, seed=seed, kube_filters=kube_filters)
            assert decision.chosen in {"n0", "n1", "n3", "n4"}, (kube_filters, seed, reason_texts(decision))


def test_the_owner_spread_still_applies_where_the_pod_prefers_nothing():
    api = {"app.kubernetes.io/name": "api"}
    cluster = [node(f"n{i}") for i in range(5)]
    running = [pod(f"api-{i}", namespace="shop", node=f"n{i}", labels=api) for i in (0, 1, 3, 4)]
    decision = place(pod("plain", namespace="shop"), *cluster, *running)
    assert decision.chosen == "n2"
    assert "spread by owner" in reason_texts(decision)["n0"]


def test_a_deployment_with_preferred_pod_affinity_to_a_cache_lands_beside_it(tmp_path, capsys):
    cache = pod("cache", namespace="shop", node="n2", labels={"app": "cache"}, cpu="100m", memory="128Mi")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(k8s_list(node("n1"), node("n2"), node("n3"), cache)))
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "affinity": _preferred(
                "podAffinity", 100, _affinity_term("app", ["cache"], "kubernetes.io/hostname")
            ),
            "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }
    workload = tmp_path / "web.yaml"
    workload.write_text(yaml.safe_dump(deployment))
    code = main(
        ["simulate", "--cluster", str(cluster), "--pod", str(workload), "--seed", "3", "--output", "json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    # kube-scheduler's default profile puts all three beside the cache: InterPodAffinity (2 x 100)
    # outweighs its default spreading for three replicas on one node.
    assert out["summary"]["podsPerNode"] == {"n2": 3}


# -- berth's own written preferences before the reserves ------------------------------------------------


def test_a_soft_near_hint_outranks_the_large_server_reserve():
    # The reserve keeps the largest nodes for large pods (a default); the pod asked to be near its
    # database, which runs on the large node (written).
    cluster = [cn(f"s{i}", memory="16Gi") for i in range(8)] + [cn("big", memory="256Gi")]
    db = vm("db", node="big", labels={"role": "db"}, memory="1Gi")
    near = {"near": ["db"], "strict": False}
    cfg = config()
    decision = place(vm("app", memory="1Gi", annotations={"berth.dev/locality": near}), *cluster, db, cfg=cfg)
    assert decision.chosen == "big"
    plain = place(vm("app", memory="1Gi"), *cluster, db, cfg=cfg)
    assert plain.chosen != "big"


@pytest.mark.parametrize("configured", [False, True])
def test_a_configured_chain_runs_the_pods_kube_preferences_too(configured):
    cfg = (
        config(allocationDescription=["pipe", "hard-filter-min-ram", "score-unreserved-ram"])
        if configured
        else None
    )
    pipeline = build_pipeline(cfg, kube_filters=False)
    assert "kube/preferences" in pipeline.names()
    cluster = [cn("small", memory="8Gi", labels={"disk": "ssd"}), cn("large", memory="64Gi")]
    p = vm("new")
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }
    assert place(p, *cluster, cfg=cfg, kube_filters=False).chosen == "small"
    assert place(vm("new"), *cluster, cfg=cfg, kube_filters=False).chosen == "large"
