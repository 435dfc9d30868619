"""The configurable chain: pipe and or as the seed explains them, berth's default chain, the data steps,
and custom algorithms from a module path or an installed package's entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from berth.configure import KUBE, build_pipeline, default_chain
from berth.engine import Kind
from berth.engine.chain import flatten
from berth.vocab.step_names import ALWAYS_HARD
from tests.alloc_helpers import candidates, chain, cn, config, reason_texts, trace, vm
from tests.builders import k8s_list, place

ROOT = Path(__file__).resolve().parent.parent
RESERVED = {"berth.dev/reserved": "true"}


def _steps(decision):
    """The steps of the configured chain that ran (berth's own rules, which run under any chain, and
    skip here for pods without tags or policies, left out)."""
    return [t.step for t in decision.steps if t.step.startswith("alloc/")]


def test_a_pipe_feeds_each_member_what_the_one_before_left_and_stops_when_none_is_left():
    cfg = chain("hard-filter-reserved", "hard-filter-min-ram", "score-unreserved-ram")
    decision = place(vm("new", memory="1Gi"), cn("held", labels=RESERVED), cfg=cfg, kube_filters=False)
    assert decision.chosen is None
    assert _steps(decision) == ["alloc/hard-filter-reserved"]  # the rest did not run


def test_an_or_takes_the_first_member_that_leaves_any_node():
    cfg = chain(["or", "hard-filter-reserved", "hard-filter-headnode"])
    head = {"node-role.kubernetes.io/control-plane": ""}
    decision = place(
        vm("new"), cn("held", labels=RESERVED), cn("head", labels=head), cfg=cfg, kube_filters=False
    )
    assert _steps(decision) == ["alloc/hard-filter-reserved"]
    assert candidates(decision) == {"head"}


def test_an_or_whose_first_member_leaves_nothing_falls_through_to_identity():
    cfg = chain(["or", "hard-filter-reserved", "identity"], "score-unreserved-ram")
    decision = place(
        vm("new"), cn("held-a", labels=RESERVED), cn("held-b", labels=RESERVED), cfg=cfg, kube_filters=False
    )
    assert decision.chosen in {"held-a", "held-b"}
    assert _steps(decision) == ["alloc/hard-filter-reserved", "alloc/identity", "alloc/score-unreserved-ram"]
    assert trace(decision, "alloc/hard-filter-reserved").remaining == ()
    assert trace(decision, "alloc/identity").remaining == ("held-a", "held-b")


def test_an_or_whose_every_member_leaves_nothing_leaves_nothing():
    cfg = chain(["or", "hard-filter-reserved", "hard-filter-headnode"])
    both = {**RESERVED, "node-role.kubernetes.io/control-plane": ""}
    decision = place(vm("new"), cn("n1", labels=both), cfg=cfg, kube_filters=False)
    assert decision.chosen is None
    assert reason_texts(decision) == {
        "n1": "alloc/hard-filter-headnode: node is a head node (label node-role.kubernetes.io/control-plane)"
    }


def test_nested_lists_compose_like_the_seeds_example():
    cfg = chain(
        "hard-filter-min-ram",
        "hard-filter-running",
        ["or", "hard-filter-large-servers", ["pipe", "hard-filter-reserved", "identity"]],
        "pick-random",
    )
    names = build_pipeline(cfg, kube_filters=False).names()
    assert names == [
        "pipe",
        *ALWAYS_HARD,
        "alloc/hard-filter-min-ram",
        "alloc/hard-filter-running",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
        ["or", "alloc/hard-filter-large-servers", ["pipe", "alloc/hard-filter-reserved", "alloc/identity"]],
        "alloc/pick-random",
    ]


def test_berths_default_chain_puts_user_intent_before_preferences_and_scorers_last():
    live = [s.name for s in flatten(default_chain(kube_filters=False))]
    # kube-scheduler runs its filters before berth is asked; its scores are berth's to rank by.
    assert [n for n in live if n.startswith("kube/")] == ["kube/preferences", "kube/default-score"]
    position = {name: i for i, name in enumerate(live)}
    # The replacement of a pod rebalance moved goes to its planned node before any preference.
    assert position["policy/placement-policy"] < position["rebalance/planned-target"]
    assert position["rebalance/planned-target"] < position["tags/tag-affinity"]
    assert position["alloc/hard-filter-traits"] < position["alloc/hard-filter-min-ram"]
    assert position["alloc/hard-filter-locality-hints"] < position["tags/tag-affinity"]
    assert position["tags/require_without_tag"] < position["tags/tag-affinity"]
    # What somebody wrote (tag preferences, kube's scores of the pod's preferences, soft locality)
    # before what nobody chose (spreading by owner, the reserves, kube's default scores), then the
    # allocator's scorers, which break the ties.
    written = ["tags/tag-affinity", "kube/preferences", "alloc/soft-filter-locality-hints"]
    defaults = ["alloc/hard-filter-reservoir", "alloc/hard-filter-large-servers", "kube/default-score"]
    assert [position[n] for n in written] == sorted(position[n] for n in written)
    assert max(position[n] for n in written) < min(position[n] for n in defaults)
    assert live[-7:-6] == ["kube/default-score"]
    assert live[-6:] == [
        "alloc/score-unreserved-ram",
        "alloc/score-unreserved-disk",
        "alloc/score-num-owner-zones",
        "alloc/score-current-platform",
        "alloc/score-next-reboot",
        "alloc/score-uniform-random",
    ]


def test_offline_a_configured_chain_without_kube_steps_is_preceded_by_them_and_live_they_are_dropped():
    cfg = chain("hard-filter-min-ram")
    offline = [s.name for s in flatten(build_pipeline(cfg, kube_filters=True).chain)]
    assert offline[: len(KUBE)] == list(KUBE)
    assert offline[len(KUBE) :] == [
        *ALWAYS_HARD,
        "alloc/hard-filter-min-ram",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
    ]
    named = chain("hard-filter-min-ram", "kube/taints")
    assert [s.name for s in flatten(build_pipeline(named, kube_filters=True).chain)] == [
        *ALWAYS_HARD,
        "alloc/hard-filter-min-ram",
        "kube/taints",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
    ]
    assert [s.name for s in flatten(build_pipeline(named, kube_filters=False).chain)] == [
        *ALWAYS_HARD,
        "alloc/hard-filter-min-ram",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
    ]


def test_a_configured_chain_keeps_berths_own_rules_and_says_so():
    """A configuration that leaves out the tag constraints, the PlacementPolicy step and the tier
    still has them enforced, and its warnings say so; one that names them keeps them where it puts
    them."""
    left_out = chain("hard-filter-min-ram", "score-unreserved-ram")
    assert any("leaves out tags/require_with_tag" in w for w in left_out.warnings)
    steps = [s.name for s in flatten(build_pipeline(left_out, kube_filters=False).chain)]
    assert steps == [
        *ALWAYS_HARD,
        "alloc/hard-filter-min-ram",
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
        "alloc/score-unreserved-ram",
    ]
    tiers = ("rebalance/planned-target", "tags/tag-affinity", "kube/preferences")
    named = chain(*tiers, "hard-filter-min-ram", *ALWAYS_HARD)
    assert named.warnings == ()
    assert [s.name for s in flatten(build_pipeline(named, kube_filters=False).chain)] == [
        "rebalance/planned-target",
        "tags/tag-affinity",
        "kube/preferences",
        "alloc/hard-filter-min-ram",
        *ALWAYS_HARD,
    ]


@pytest.mark.parametrize(
    "algorithm",
    [
        "load-server-vms",
        "calculate-server-unreserved",
        "calculate-recent-vms",
        "calculate-ticketed-vms",
        "calculate-locality-hints",
        "calculate-affinity",
    ],
)
def test_a_data_algorithm_is_a_traced_step_that_keeps_every_node_and_says_what_stands_in_for_it(algorithm):
    decision = place(vm("new"), cn("n1"), cn("n2"), cfg=chain(algorithm))
    step = trace(decision, f"alloc/{algorithm}")
    assert step.remaining == ("n1", "n2")
    assert step.note.startswith("skipped: computes only, every node kept: ")


def test_the_detail_shows_every_alloc_step_with_its_removals_scores_or_note(simulate_cfg):
    code, out = simulate_cfg(
        vm("new", memory="2Gi", annotations={"berth.dev/traits": {"ssd": True}}),
        cn("ssd", traits={"ssd": True}),
        cn("ssd-small", memory="1Gi", traits={"ssd": True}),
        cn("hdd", traits={"ssd": False}),
    )
    assert code == 0
    steps = {s["step"]: s for s in out["steps"]}
    assert steps["alloc/hard-filter-traits"]["removed"] == {
        "hdd": 'alloc/hard-filter-traits: node traits do not fulfil the requested traits {"ssd": true} '
        '(node_traits={"ssd": false}, mismatch=ssd: boolean did not match)'
    }
    assert set(steps["alloc/hard-filter-min-ram"]["removed"]) == {"ssd-small"}
    assert steps["alloc/hard-filter-vlans"]["note"] == "skipped: the pod asks for no NIC tags"
    assert "note" in steps["alloc/calculate-locality-hints"]
    for step in out["chain"]:
        if step.startswith("alloc/") and step != "alloc/identity":
            assert step in steps, step


@pytest.fixture
def simulate_cfg(tmp_path, capsys):
    from berth.cli import main

    def _run(pod_obj, *objects, cfg_data=None, extra=()):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump(k8s_list(*objects)))
        pod_file = tmp_path / "pod.yaml"
        pod_file.write_text(yaml.safe_dump(pod_obj))
        args = [
            "simulate",
            "--cluster",
            str(cluster),
            "--pod",
            str(pod_file),
            "--seed",
            "1",
            "--output",
            "json",
        ]
        args += ["--detail", *extra]
        if cfg_data is not None:
            cfg = tmp_path / "allocator.yaml"
            cfg.write_text(yaml.safe_dump(cfg_data))
            args += ["--config", str(cfg)]
        code = main(args)
        return code, json.loads(capsys.readouterr().out)

    return _run


def test_a_custom_algorithm_named_by_module_path_runs_like_a_built_in():
    sys.path.insert(0, str(ROOT / "examples/custom-algorithm"))
    try:
        cfg = config(
            allocationDescription=["pipe", "hard-filter-maintenance", "score-unreserved-ram"],
            algorithms={"hard-filter-maintenance": "berth_example_algorithm:HardFilterMaintenance"},
        )
        decision = place(
            vm("new"),
            cn("down", labels={"example.com/maintenance": "true", "example.com/maintenance-until": "friday"}),
            cn("up"),
            cfg=cfg,
        )
    finally:
        sys.path.remove(str(ROOT / "examples/custom-algorithm"))
    assert decision.chosen == "up"
    [reason] = decision.node("down").reasons
    assert str(reason) == "example/hard-filter-maintenance: node is in maintenance (until=friday)"
    assert reason.kind is Kind.UNMET


def test_a_custom_scorer_takes_its_weight_from_the_configuration():
    cfg = config(
        allocationDescription=["pipe", "my-random"],
        algorithms={"my-random": {"class": "berth.vocab.alloc.scorers:PickRandom", "weight": 3}},
    )
    decision = place(vm("new"), cn("n1"), cn("n2"), cfg=cfg)
    assert max(n.parts["alloc/pick-random"].weighted for n in decision.nodes) == 3


def test_an_installed_package_offers_its_algorithm_through_the_entry_point_group(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT / "examples/custom-algorithm", source)
    target = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    assert (target / "berth_example_algorithm").is_dir()

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump(k8s_list(cn("down", labels={"example.com/maintenance": "true"}), cn("up")))
    )
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(vm("new")))
    cfg = tmp_path / "allocator.yaml"
    cfg.write_text("allocationDescription: [pipe, hard-filter-maintenance, score-unreserved-ram]\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "simulate",
            "--cluster",
            str(cluster),
            "--pod",
            str(pod_file),
            "--config",
            str(cfg),
            "--output",
            "json",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["chosen"] == "up"
    down = next(n for n in out["nodes"] if n["name"] == "down")
    assert down["reasons"] == ["example/hard-filter-maintenance: node is in maintenance"]
