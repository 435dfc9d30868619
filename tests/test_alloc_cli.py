"""The allocator through the command line: simulate --config, capacity, and validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from berth.cli import main
from tests.alloc_helpers import cn, vm
from tests.builders import k8s_list

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def files(tmp_path):
    def _write(name, content):
        path = tmp_path / name
        if isinstance(content, str):
            path.write_text(content)
        elif isinstance(content, list):
            path.write_text(yaml.safe_dump_all(content))
        else:
            path.write_text(yaml.safe_dump(content))
        return str(path)

    return _write


def test_simulate_with_a_config_runs_its_chain_and_its_weights(files, capsys):
    cluster = files("cluster.yaml", k8s_list(cn("small", memory="4Gi"), cn("large", memory="32Gi")))
    pod = files("pod.yaml", vm("new", memory="1Gi"))
    packing = files(
        "allocator.yaml",
        {
            "allocationDescription": ["pipe", "hard-filter-min-ram", "score-unreserved-ram"],
            "defaults": {"weight_unreserved_ram": -1},
        },
    )
    code = main(
        ["simulate", "--cluster", cluster, "--pod", pod, "--config", packing, "--output", "json", "--detail"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["chosen"] == "small"
    # berth's own rules run under the configured chain: the tier before its first preference
    assert out["chain"][-5:] == [
        "alloc/hard-filter-min-ram",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
        "alloc/score-unreserved-ram",
    ]


def test_simulate_prints_the_deprecation_warning_of_server_spread(files, capsys):
    cluster = files("cluster.yaml", k8s_list(cn("small", memory="4Gi"), cn("large", memory="32Gi")))
    pod = files("pod.yaml", vm("new"))
    cfg = files("allocator.yaml", {"defaults": {"server_spread": "min-ram"}})
    code = main(
        ["simulate", "--cluster", cluster, "--pod", pod, "--config", cfg, "--output", "json", "--seed", "3"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)["chosen"] == "small"
    assert f"berth: warning: {cfg}: defaults.server_spread is deprecated" in captured.err


def test_an_invalid_config_exits_2_printing_every_problem(files, capsys):
    cluster = files("cluster.yaml", k8s_list(cn("n1")))
    pod = files("pod.yaml", vm("new"))
    cfg = files(
        "allocator.yaml", {"allocationDescription": ["pipe", "nope"], "defaults": {"filter_vm_limit": "x"}}
    )
    code = main(["simulate", "--cluster", cluster, "--pod", pod, "--config", cfg])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [
        f'berth: {cfg}: defaults.filter_vm_limit: input should be a valid integer, found "x"',
        f'berth: {cfg}: allocationDescription[1]: unknown algorithm "nope"',
    ]


def test_capacity_counts_how_many_more_pods_fit_per_node_and_in_the_cluster(files, capsys):
    cluster = files(
        "cluster.yaml",
        k8s_list(
            cn("a", memory="4Gi", cpu="8"),
            cn("b", memory="16Gi", cpu="1"),
            cn("down", ready=False),
            vm("old", node="a", memory="1Gi"),
        ),
    )
    pod = files("pod.yaml", vm("new", memory="1Gi", cpu="1"))
    code = main(["capacity", "--cluster", cluster, "--pod", pod, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    nodes = {n["name"]: n for n in out["nodes"]}
    # 3 GiB of RAM left on a: three 1 GiB pods; the fourth is refused by hard-filter-min-ram.
    assert nodes["a"]["fits"] == 3 and nodes["a"]["limitedBy"].startswith("alloc/hard-filter-min-ram")
    # One CPU at the default ratio of 4 takes four 1-CPU pods (they request none: kube lets them).
    assert nodes["b"]["fits"] == 4 and nodes["b"]["limitedBy"].startswith("alloc/hard-filter-min-cpu")
    assert nodes["down"]["fits"] == 0 and nodes["down"]["limitedBy"].startswith("kube/node-ready")
    assert out["total"] == 7 and out["bounded"] is True
    assert out["refusal"].startswith("0/3 nodes are available")
    # The table says what the allocator's CPU unit is where a node is limited by it.
    assert main(["capacity", "--cluster", cluster, "--pod", pod]) == 0
    table = capsys.readouterr().out
    assert "alloc/hard-filter-min-cpu: not enough unreserved CPU" in table
    assert "(cpu_cap is the allocator's CPU unit: 100 = one CPU, 25 = 250m)" in table


def test_capacity_follows_the_configured_ratios_and_vm_limit(files, capsys):
    cluster = files("cluster.yaml", k8s_list(cn("a", memory="4Gi")))
    pod = files("pod.yaml", vm("new", memory="1Gi"))
    cfg = files("allocator.yaml", {"defaults": {"overprovision_ratio_ram": 2.0, "filter_vm_limit": 5}})
    main(["capacity", "--cluster", cluster, "--pod", pod, "--config", cfg, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"][0]["fits"] == 5
    assert out["nodes"][0]["limitedBy"].startswith("alloc/hard-filter-vm-count")


def test_capacity_of_a_node_whose_pod_count_is_used_up_is_nothing_as_simulate_says(files, capsys):
    """A node with allocatable pods 3 running 3 pods: simulate refuses the first; capacity says 0."""
    full = cn("full")
    full["status"]["allocatable"]["pods"] = "3"
    cluster = files("cluster.yaml", k8s_list(full, *(vm(f"p{i}", node="full") for i in range(3))))
    pod = files("pod.yaml", vm("new", memory="64Mi"))
    assert main(["simulate", "--cluster", cluster, "--pod", pod, "--output", "json"]) == 1
    assert "too many pods" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert main(["capacity", "--cluster", cluster, "--pod", pod, "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == 0 and out["nodes"][0]["limitedBy"].startswith("kube/resources: too many pods")


def test_capacity_is_what_simulate_places_of_as_many_replicas(files, capsys):
    """N more fit: simulate places N replicas and refuses the one after."""
    cluster = files("cluster.yaml", k8s_list(cn("a", memory="4Gi", cpu="2"), cn("b", memory="6Gi", cpu="4")))
    pod = files("pod.yaml", vm("new", memory="1Gi", cpu="500m"))
    main(["capacity", "--cluster", cluster, "--pod", pod, "--output", "json"])
    fit = json.loads(capsys.readouterr().out)["total"]
    assert fit > 0
    for replicas, code in ((fit, 0), (fit + 1, 1)):
        assert (
            main(
                [
                    "simulate",
                    "--cluster",
                    cluster,
                    "--pod",
                    pod,
                    "--replicas",
                    str(replicas),
                    "--output",
                    "json",
                ]
            )
            == code
        )
        summary = json.loads(capsys.readouterr().out)["summary"]
        assert summary["placed"] == fit


def test_capacity_stops_counting_at_max_and_says_at_least(files, capsys):
    cluster = files("cluster.yaml", k8s_list(cn("a")))
    pod = files("pod.yaml", vm("new"))
    main(["capacity", "--cluster", cluster, "--pod", pod, "--max", "5"])
    assert (
        capsys.readouterr().out.splitlines()[0]
        == "pod default/new: at least 5 (stopped at --max 5) more fit in the cluster"
    )


def test_capacity_prints_a_table_with_why_each_node_refuses_the_next_pod(capsys):
    code = main(
        [
            "capacity",
            "--cluster",
            str(ROOT / "examples/cluster.yaml"),
            "--pod",
            str(ROOT / "examples/pods/web.yaml"),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith("pod shop/web-1: ") and "more fit in the cluster" in out[0]
    assert out[1].startswith("the next one is refused: ")
    assert out[2].split() == ["NODE", "FITS", "PODS", "LIMITED", "BY"]
    assert any(line.startswith("node-e ") and "kube/taints" in line for line in out)


def test_validate_checks_allocator_configurations_among_manifests(files, capsys):
    good = files(
        "good.yaml",
        {"defaults": {"filter_vm_limit": 10}, "packages": {"small": {"max_physical_memory": 512}}},
    )
    bad = files(
        "bad.yaml", {"allocationDescription": ["pipe", "hard-filter-hvm"], "defaults": {"weight_x": 1}}
    )
    configmap = files(
        "cm.yaml",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "berth-allocator", "namespace": "berth"},
            "data": {"allocator.yaml": "defaults: {filter_headnode: maybe}\n"},
        },
    )
    code = main(["validate", good, bad, configmap])
    out = capsys.readouterr().out.splitlines()
    assert code == 2
    assert out == [
        f"{bad}: allocator configuration: defaults.weight_x: unknown key (did you mean weight_next_reboot?)",
        f"{bad}: allocator configuration: allocationDescription[1]: "
        'algorithm "hard-filter-hvm" has no meaning on Kubernetes: '
        "there are no hardware-virtualised VM brands (kvm, bhyve) among Kubernetes pods",
        f"{configmap}: ConfigMap berth/berth-allocator: data.allocator.yaml: defaults.filter_headnode: "
        'input should be a valid boolean, found "maybe"',
    ]


def test_validate_refuses_an_algorithm_with_no_meaning_on_kubernetes(files, capsys):
    bad = files("bad.yaml", {"allocationDescription": ["pipe", "hard-filter-hvm"]})
    assert main(["validate", bad]) == 2
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(
        f"{bad}: allocator configuration: allocationDescription[1]: "
        'algorithm "hard-filter-hvm" has no meaning on Kubernetes'
    )


def test_validate_with_a_config_checks_the_packages_pods_name(files, capsys):
    cfg = files("allocator.yaml", {"packages": {"small": {"max_physical_memory": 512}}})
    pods = files(
        "pods.yaml",
        [
            vm("a", annotations={"berth.dev/package": "small"}),
            vm("b", annotations={"berth.dev/package": "huge"}),
        ],
    )
    assert main(["validate", pods]) == 0  # without a configuration, names are not checked
    capsys.readouterr()
    assert main(["validate", pods, "--config", cfg]) == 2
    assert _errors(capsys.readouterr().out) == [
        f'{pods}: Pod default/b: annotation berth.dev/package: unknown package "huge" (the allocator '
        "configuration defines: small)"
    ]


def test_validate_reports_malformed_allocator_annotations_on_pods(files, capsys):
    pods = files("pods.yaml", vm("a", annotations={"berth.dev/locality": '{"near": 1}'}))
    assert main(["validate", pods]) == 2
    assert _errors(capsys.readouterr().out) == [
        f"{pods}: Pod default/a: annotation berth.dev/locality: "
        "near should be a target or a list of targets, not a number"
    ]


def test_validate_warns_that_a_chain_leaving_berths_rules_out_still_runs_them(files, capsys):
    cfg = files("allocator.yaml", {"allocationDescription": ["pipe", "hard-filter-min-ram"]})
    assert main(["validate", cfg]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"warning: {cfg}: allocator configuration: allocationDescription leaves out")
    assert "policy/placement-policy" in out[0] and out[-1] == "ok: 1 object(s) checked, 1 warning(s)"


def _errors(out: str) -> list[str]:
    """validate's error lines (these pods name no scheduler, which is a warning of its own)."""
    return [line for line in out.splitlines() if not line.startswith("warning: ")]


def test_capacity_without_a_pod_shows_the_room_left_per_zone_and_per_node(capsys):
    cluster = str(ROOT / "examples/cluster.yaml")
    assert main(["capacity", "--cluster", cluster]) == 0
    out = capsys.readouterr().out
    zones = out.split("per node:")[0]
    # zone-1: node-a (3 of 4 CPUs, 12Gi of 16Gi free) and node-b (3250m, 14.5Gi): summed
    assert "zone-1  6250m/8  26.5Gi/32Gi  217/220  2 node(s)" in zones
    assert "zone-3  node-e  4/4      16Gi/16Gi    110/110  tainted dedicated=infra:NoSchedule" in out
    assert main(["capacity", "--cluster", cluster, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    node_d = next(n for n in data["nodes"] if n["name"] == "node-d")
    assert node_d["free"] == {"cpu": "1750m", "memory": 7 * 2**30, "pods": 108}
    assert [z["name"] for z in data["zones"]] == ["zone-1", "zone-2", "zone-3"]


def test_capacity_without_a_pod_leaves_cordoned_nodes_out_of_their_zone(tmp_path, capsys):
    cordoned = cn("n2", labels={"topology.kubernetes.io/zone": "a"})
    cordoned["spec"]["unschedulable"] = True
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(k8s_list(cn("n1", labels={"topology.kubernetes.io/zone": "a"}), cordoned)))
    assert main(["capacity", "--cluster", str(path), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["zones"][0]["note"] == "1 node(s)"
    assert next(n for n in data["nodes"] if n["name"] == "n2")["note"] == "cordoned"
