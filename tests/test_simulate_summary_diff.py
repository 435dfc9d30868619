"""`berth simulate --summary` (a workload per node, not per replica) and `--diff` (what a what-if
changes, pod by pod)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from berth.cli import main
from tests.builders import k8s_list, node, pod

APP = "app.kubernetes.io/name"


def _deployment(replicas: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {APP: "api"}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "api", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"replicas": replicas, "template": template},
    }


def _write(tmp_path, name: str, *objects: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _cluster(tmp_path, nodes: int = 3) -> str:
    # 4 CPUs a node: 4 replicas of 1 CPU each fit on one
    return _write(tmp_path, "cluster.yaml", k8s_list(*(node(f"n{i}", cpu="4") for i in range(1, nodes + 1))))


def test_summary_prints_pods_per_node_and_totals_not_a_table_per_replica(tmp_path, capsys):
    cluster = _cluster(tmp_path)
    api = _write(tmp_path, "api.yaml", _deployment(2))
    code = main(
        ["simulate", "--cluster", cluster, "--pod", api, "--replicas", "200", "--summary", "--seed", "1"]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 1  # 12 fit, the rest are refused
    assert lines[0].split() == ["NODE", "PODS"]
    assert sorted(line.split()[0] for line in lines[1:4]) == ["n1", "n2", "n3"]
    assert sum(int(line.split()[1]) for line in lines[1:4]) == 12
    assert lines[4] == "placed 12 of 200, refused 188"
    assert lines[5].startswith("first refusal: shop/api-12 (409) ")
    assert len(lines) == 6


def test_summary_in_json_is_the_summary_alone_and_no_headers_drops_the_header(tmp_path, capsys):
    cluster = _cluster(tmp_path)
    api = _write(tmp_path, "api.yaml", _deployment(3))
    assert main(["simulate", "--cluster", cluster, "--pod", api, "--summary", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["summary"] and out["summary"]["placed"] == 3
    main(["simulate", "--cluster", cluster, "--pod", api, "--summary", "--no-headers"])
    assert not capsys.readouterr().out.startswith("NODE")


def test_diff_lists_the_pods_a_policy_would_move_or_refuse(tmp_path, capsys):
    # without the policy the replicas pack by kube's scores; ONE_PER_HOST allows one a node
    cluster = _cluster(tmp_path, nodes=2)
    api = _write(tmp_path, "api.yaml", _deployment(3))
    one = _write(
        tmp_path,
        "one.yaml",
        {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "one", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {APP: "api"}}, "policy": {"type": "ONE_PER_HOST"}},
        },
    )
    code = main(["simulate", "--cluster", cluster, "--pod", api, "--policy", one, "--diff", "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # the what-if refuses the third replica
    assert out["pods"] == 3
    last = out["changes"][-1]
    assert last["pod"] == "shop/api-2" and last["before"] in ("n1", "n2") and last["after"] == "refused (409)"
    assert "ONE_PER_HOST" in last["reason"]
    main(["simulate", "--cluster", cluster, "--pod", api, "--policy", one, "--diff"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["POD", "BEFORE", "->", "AFTER"]
    assert any(line.startswith("shop/api-2") and "-> refused (409)" in line for line in lines)
    assert lines[-1] == f"{len(out['changes'])} of 3 pod(s) change with the what-if"


def test_diff_of_a_what_if_that_changes_nothing_says_so(tmp_path, capsys):
    cluster = _cluster(tmp_path)
    web = _write(tmp_path, "web.yaml", pod("web", namespace="shop"))
    anything = _write(tmp_path, "any.yaml", {"type": "ANY"})
    assert main(["simulate", "--cluster", cluster, "--pod", web, "--policy", anything, "--diff"]) == 0
    assert capsys.readouterr().out == "0 of 1 pod(s) change with the what-if\n"


def test_diff_names_the_rule_that_now_refuses_the_node_a_pod_had(tmp_path, capsys):
    cluster = _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(node("big", cpu="16"), node("small", cpu="2", labels={"tag.berth.dev/ssd": ""})),
    )
    web = _write(tmp_path, "web.yaml", pod("web", namespace="shop", cpu="1"))
    ssd = _write(tmp_path, "ssd.yaml", {"type": "MATCH_TAG", "tag": "ssd"})
    # kube's scores prefer the emptier big node; the policy allows only the ssd one
    main(["simulate", "--cluster", cluster, "--pod", web, "--policy", ssd, "--diff", "-o", "json"])
    (change,) = json.loads(capsys.readouterr().out)["changes"]
    assert (change["before"], change["after"]) == ("big", "small")
    assert change["reason"].startswith("big is refused now: policy/placement-policy: ")


def test_diff_needs_a_what_if(tmp_path, capsys):
    cluster = _cluster(tmp_path)
    web = _write(tmp_path, "web.yaml", pod("web"))
    assert main(["simulate", "--cluster", cluster, "--pod", web, "--diff"]) == 2
    assert "--diff compares a what-if" in capsys.readouterr().err
