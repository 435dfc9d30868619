"""Placement policies through `berth simulate` and `berth validate`, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from berth.cli import main
from tests.builders import node, pod
from tests.policy_builders import app, placement_policy


def _write(tmp_path: Path, name: str, *docs) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def test_a_burst_under_one_per_host_lands_one_pod_per_node_and_the_fourth_gets_409_naming_the_policy(
    simulate,
):
    cluster = [
        node("n1"),
        node("n2"),
        node("n3"),
        placement_policy(
            "one-per-host", {"type": "ONE_PER_HOST"}, namespace="shop", selector={"matchLabels": app("web")}
        ),
    ]
    burst = [pod(f"web-{i}", namespace="shop", labels=app("web")) for i in range(4)]
    code, out = simulate(burst, *cluster, seed=7)
    assert code == 1
    decisions = out["decisions"]
    placed = [d["chosen"] for d in decisions[:3]]
    assert sorted(placed) == ["n1", "n2", "n3"]
    fourth = decisions[3]
    assert fourth["chosen"] is None
    assert fourth["error"]["code"] == 409
    assert fourth["error"]["message"] == (
        "no node satisfies the PlacementPolicy shop/one-per-host (ONE_PER_HOST); 0/3 nodes are available: "
        "3 policy/placement-policy: PlacementPolicy shop/one-per-host: ONE_PER_HOST: a pod of app web "
        "version 1.0 is already on the node."
    )


def test_a_burst_under_max_n_per_host_fills_each_node_up_to_max(simulate):
    cluster = [node("n1"), node("n2"), placement_policy("two", {"type": "MAX_N_PER_HOST", "max": 2})]
    burst = [pod(f"w-{i}", labels=app("worker")) for i in range(5)]
    code, out = simulate(burst, *cluster, seed=1)
    assert code == 1
    chosen = [d["chosen"] for d in out["decisions"]]
    assert sorted(c for c in chosen if c) == ["n1", "n1", "n2", "n2"]
    assert chosen[4] is None


def test_simulate_policy_takes_a_bare_tree_that_governs_the_pod_whatever_the_cluster_says(simulate, tmp_path):
    pin = _write(tmp_path, "pin-n2.json", {"type": "MATCH_TAG", "tag": "n2"})
    cluster = [node("n1"), node("n2"), placement_policy("pin-n1", {"type": "MATCH_TAG", "tag": "n1"})]
    code, out = simulate(pod("new"), *cluster, extra=("--policy", pin))
    assert code == 0
    assert out["chosen"] == "n2"
    n1 = next(n for n in out["nodes"] if n["name"] == "n1")
    assert n1["reasons"] == [
        "policy/placement-policy: PlacementPolicy pin-n2.json: MATCH_TAG: the node does not carry tag 'n2' "
        '(tags=["n1"])'
    ]


def test_simulate_policy_is_repeatable_and_every_given_policy_must_hold(simulate, tmp_path):
    gpu = _write(
        tmp_path, "gpu.yaml", placement_policy("gpu", {"type": "MATCH_TAG", "tag": "gpu"}, namespace="ml")
    )
    spread = _write(
        tmp_path,
        "spread.json",
        {"type": "COMPOSITE", "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "gpu"}]},
    )
    cluster = [
        node("g1", tags=("gpu",)),
        node("g2", tags=("gpu",)),
        node("plain"),
        pod("train-0", node="g1", labels=app("train")),
    ]
    code, out = simulate(
        pod("new", labels=app("train")), *cluster, extra=("--policy", gpu, "--policy", spread)
    )
    assert code == 0
    assert out["chosen"] == "g2"
    reasons = {n["name"]: n["reasons"] for n in out["nodes"]}
    assert reasons["g1"][0].startswith("policy/placement-policy: PlacementPolicy spread.json: ONE_PER_HOST")
    assert reasons["plain"][0].startswith("policy/placement-policy: PlacementPolicy ml/gpu: MATCH_TAG")


def test_simulate_with_an_invalid_policy_file_prints_every_problem_with_its_path_and_exits_2(
    tmp_path, capsys
):
    cluster = _write(tmp_path, "cluster.yaml", node("n1"))
    pod_file = _write(tmp_path, "pod.yaml", pod("new"))
    bad = _write(
        tmp_path,
        "bad.json",
        {
            "type": "COMPOSITE",
            "policies": [{"type": "MAX_N_PER_HOST", "max": 100}, {"type": "RULE_BASED", "rule": "ctx.nodes"}],
        },
    )
    code = main(["simulate", "--cluster", cluster, "--pod", pod_file, "--policy", bad])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"berth: {bad}: policy tree: policy.policies[0].max: must be between 1 and 64",
        f"berth: {bad}: policy tree: policy.policies[1].rule: ctx.nodes is not in the rule context (it has "
        "ctx.allocation, ctx.pod, ctx.session)",
    ]


def test_simulate_with_a_policy_file_holding_no_policy_exits_2(tmp_path, capsys):
    cluster = _write(tmp_path, "cluster.yaml", node("n1"))
    pod_file = _write(tmp_path, "pod.yaml", pod("new"))
    code = main(["simulate", "--cluster", cluster, "--pod", pod_file, "--policy", pod_file])
    assert code == 2
    assert "no PlacementPolicy object or policy tree" in capsys.readouterr().err


def test_a_policy_in_the_cluster_file_is_read_with_the_nodes_and_pods(simulate):
    cluster = [node("n1"), node("n2"), placement_policy("pin", {"type": "MATCH_TAG", "tag": "n1"})]
    code, out = simulate(pod("new"), *cluster)
    assert code == 0
    assert out["chosen"] == "n1"
    n2 = next(n for n in out["nodes"] if n["name"] == "n2")
    assert n2["reasons"][0].startswith("policy/placement-policy: PlacementPolicy default/pin: MATCH_TAG")


def test_a_cluster_policy_that_is_invalid_refuses_the_pods_it_governs_with_exit_2(simulate):
    cluster = [node("n1"), placement_policy("broken", {"type": "MATCH_TAG", "tag": ""})]
    code, out = simulate(pod("new"), *cluster)
    assert code == 2
    assert out["error"] == {
        "code": 400,
        "message": "PlacementPolicy default/broken is not Ready: spec.policy.tag: must be a non-empty string",
    }


def test_the_detail_table_shows_the_policy_step_in_the_chain(tmp_path, capsys):
    cluster = _write(
        tmp_path,
        "cluster.yaml",
        node("n1"),
        node("n2"),
        placement_policy("pin", {"type": "MATCH_TAG", "tag": "n2"}),
    )
    pod_file = _write(tmp_path, "pod.yaml", pod("new"))
    code = main(
        ["simulate", "--cluster", cluster, "--pod", pod_file, "--seed", "1", "-o", "json", "--detail"]
    )
    chain = json.loads(capsys.readouterr().out)["chain"]
    assert code == 0
    main(["simulate", "--cluster", cluster, "--pod", pod_file, "--seed", "1", "--detail"])
    out = capsys.readouterr().out
    # Among the hard filters, right after the tag constraints and before the tiers.
    position = chain.index("policy/placement-policy")
    assert chain[position - 1] == "tags/require_without_tag"
    assert chain[position + 1 : position + 3] == ["rebalance/planned-target", "tags/tag-affinity"]
    assert "policy/placement-policy [hard] 1 remaining" in out
    assert (
        "- n1: policy/placement-policy: PlacementPolicy default/pin: MATCH_TAG: "
        "the node does not carry tag 'n2'" in out
    )


def test_validate_prints_every_problem_of_a_policy_with_its_field_path_and_exits_2(tmp_path, capsys):
    path = _write(
        tmp_path,
        "policies.yaml",
        placement_policy("ok", {"type": "ANY"}, namespace="shop"),
        placement_policy(
            "bad",
            {"type": "COMPOSITE", "combiner": "XOR", "policies": [{"type": "MATCH_TAG"}]},
            namespace="shop",
            selector={"matchExpressions": [{"key": "a", "operator": "In"}]},
        ),
        {"type": "RULE_BASED", "rule": "ctx.allocation.node.tags.size()"},
    )
    code = main(["validate", path])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.splitlines() == [
        f"{path}: PlacementPolicy shop/bad: spec.selector.matchExpressions[0].values: must list at least one "
        "value for operator In",
        f"{path}: PlacementPolicy shop/bad: spec.policy.combiner: must be 'AND' or 'OR'",
        f"{path}: PlacementPolicy shop/bad: spec.policy.policies[0].tag: is required",
        f"{path}: policy tree: policy.rule: must return a boolean, it returns int",
    ]
    assert "4 problem(s) in 3 object(s)" in captured.err


BERTH = {"schedulerName": "berth-scheduler"}  # without it, validate also warns berth never sees the pod


def test_validate_accepts_valid_policies_and_checks_the_placement_policy_annotation_of_pods(tmp_path, capsys):
    good = _write(tmp_path, "good.yaml", placement_policy("ok", {"type": "ONE_PER_HOST"}))
    assert main(["validate", good]) == 0
    assert capsys.readouterr().out == "ok: 1 object(s) checked\n"

    named = _write(
        tmp_path, "pod.yaml", pod("p", annotations={"berth.dev/placement-policy": "Bad Name"}, spec=BERTH)
    )
    assert main(["validate", named]) == 2
    assert capsys.readouterr().out == (
        f"{named}: Pod default/p: annotation berth.dev/placement-policy: 'Bad Name' is not a valid "
        "object name (lowercase letters, digits, '-' and '.', at most 253)\n"
    )
