"""The `berth` command as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from berth.cli import main
from tests.builders import k8s_list, node, pod

ROOT = Path(__file__).resolve().parent.parent


def test_the_bundled_example_places_the_web_pod_beside_the_cache_and_away_from_batch(capsys):
    code = main(
        [
            "simulate",
            "--cluster",
            str(ROOT / "examples/cluster.yaml"),
            "--pod",
            str(ROOT / "examples/pods/web.yaml"),
            "--seed",
            "1",
            "--output",
            "json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["pod"] == "shop/web-1"
    assert out["chosen"] == "node-d"
    nodes = {n["name"]: n for n in out["nodes"]}
    assert len(nodes) == 6
    assert nodes["node-c"]["reasons"][0].startswith("tags/require_without_tag")
    assert nodes["node-e"]["reasons"][0].startswith("kube/taints")
    # etl-0 carries batch on node-d, but in another namespace: it does not count.
    assert nodes["node-d"]["feasible"]


def test_the_table_marks_the_chosen_node_and_aligns_columns(capsys):
    code = main(
        [
            "simulate",
            "--cluster",
            str(ROOT / "examples/cluster.yaml"),
            "--pod",
            str(ROOT / "examples/pods/web.yaml"),
            "--seed",
            "1",
            "--detail",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("pod shop/web-1: placed on node-d")
    header = lines[1]
    assert header.split() == ["NODE", "FEASIBLE", "SCORE", "TAG-AFFINITY", "KUBE-SCORE", "REASONS"]
    chosen = lines[2]
    assert chosen.startswith("*") and "node-d" in chosen
    column = header.index("FEASIBLE")
    for row in lines[2:8]:
        assert row[column : column + 3] in ("yes", "no ")
    assert "chain: 44 steps; 4 removed, set aside or scored nodes:" in out
    assert "30. tags/require_without_tag [hard] 4 remaining" in out
    # the steps that changed nothing are named once, on one line
    idle = next(line for line in out.splitlines() if line.startswith("the other "))
    assert "alloc/hard-filter-vlans" in idle and "tags/require_without_tag" not in idle
    assert out.count("alloc/hard-filter-vlans") == 1


def _write(tmp_path, name, objects):
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def test_exit_codes_are_0_placed_1_no_fit_2_invalid(tmp_path, capsys):
    cluster = _write(tmp_path, "c.yaml", [k8s_list(node("n1"))])
    cases = {
        0: pod("ok"),
        1: pod("nofit", affinity={"require_with_tag": ["missing"]}),
        2: pod("bad", affinity="{oops"),
    }
    for expected, obj in cases.items():
        assert (
            main(["simulate", "--cluster", cluster, "--pod", _write(tmp_path, "p.yaml", [obj])]) == expected
        )
    capsys.readouterr()


def test_a_workload_manifest_is_simulated_through_its_pod_template(tmp_path, capsys):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"berth.dev/affinity": '{"require_with_tag": ["cache"]}'}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            }
        },
    }
    cluster = _write(
        tmp_path, "c.yaml", [node("n1"), node("n2"), pod("c", namespace="shop", node="n2", tags=["cache"])]
    )
    pod_file = _write(tmp_path, "d.yaml", [deployment])
    code = main(["simulate", "--cluster", cluster, "--pod", pod_file, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["pod"] == "shop/web-0"
    assert out["chosen"] == "n2"


def test_a_missing_snapshot_file_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    code = main(["simulate", "--cluster", str(tmp_path / "none.yaml"), "--pod", str(tmp_path / "p.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("berth: ") and "cannot read" in err


def test_validate_prints_every_problem_with_file_and_object_and_exits_2(tmp_path, capsys):
    bad = _write(
        tmp_path,
        "bad.yaml",
        [
            pod("good", tags=["web"]),
            pod("mixed", affinity={"require_with_tag": ["a"], "web": 1}),
            pod("badtags", annotations={"berth.dev/tags": "[1]", "berth.dev/affinity": '{"a": true}'}),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}},
        ],
    )
    code = main(["validate", bad])
    out = capsys.readouterr()
    assert code == 2
    lines = [line for line in out.out.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 3
    assert lines[0].startswith(
        f'{bad}: Pod default/mixed: annotation berth.dev/affinity: affinity keys ["web"]'
    )
    assert lines[1].startswith(f"{bad}: Pod default/badtags: annotation berth.dev/tags")
    assert lines[2].startswith(f"{bad}: Pod default/badtags: annotation berth.dev/affinity")
    assert "3 problem(s) in 3 object(s)" in out.err


def test_validate_accepts_good_manifests_with_exit_0(tmp_path, capsys):
    good = _write(tmp_path, "good.yaml", [pod("a", tags=["web"], affinity={"prefer_with_tag": ["db"]})])
    assert main(["validate", good, str(ROOT / "examples/pods/web.yaml")]) == 0
    assert "ok: 2 object(s) checked" in capsys.readouterr().out


def test_the_console_script_runs_as_an_installed_command():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "simulate",
            "--cluster",
            str(ROOT / "examples/cluster.yaml"),
            "--pod",
            str(ROOT / "examples/pods/web.yaml"),
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "placed on node-d" in result.stdout


def test_explain_replays_a_pod_of_the_cluster_with_its_own_seed_and_says_where_it_is(capsys):
    cluster = str(ROOT / "examples/cluster.yaml")
    code = main(["explain", "shop/web-0", "--cluster", cluster, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["pod"] == "shop/web-0" and out["node"] == "node-b"
    assert out["decision"]["chosen"] is not None and "steps" in out["decision"]
    # the same pod, the same seed: the same answer every time
    main(["explain", "shop/web-0", "--cluster", cluster, "--output", "json"])
    assert json.loads(capsys.readouterr().out)["decision"]["chosen"] == out["decision"]["chosen"]
    assert main(["explain", "shop/web-0", "--cluster", cluster]) == 0
    assert capsys.readouterr().out.startswith(
        "shop/web-0 is on node-b; berth, asked now with the pod's own seed"
    )


def test_explain_names_a_pod_that_is_not_in_the_cluster(capsys):
    assert main(["explain", "shop/nope", "--cluster", str(ROOT / "examples/cluster.yaml")]) == 2
    assert "no pod shop/nope in the cluster" in capsys.readouterr().err


def test_explain_on_a_pending_pod_says_why_once(tmp_path, capsys):
    waiting = pod("web-1", uid="u-1", phase="Pending", affinity={"require_with_tag": ["db"]})
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(k8s_list(node("n1"), waiting)))
    assert main(["explain", "default/web-1", "--cluster", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("default/web-1 is not placed; berth, asked now, places it on no node")
    assert out.count('no node satisfies the affinity constraint require_with_tag=["db"]') == 1, out


def test_simulate_s_table_does_not_repeat_the_refusal_as_an_event():
    from berth.report import table
    from tests.builders import place

    decision = place(pod("p", affinity={"require_with_tag": ["db"]}), node("n1"))
    text = table(decision)
    assert text.count(decision.error.message) == 1 and "FailedPlacement" not in text
    assert [e.reason for e in decision.events] == ["FailedPlacement"]  # still an event, in -o json


def _recorded_cluster(tmp_path, record: dict) -> str:
    placed = pod(
        "web-0",
        node="big",
        uid="u-web",
        annotations={"berth.dev/placement": json.dumps(record)},
    )
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(k8s_list(node("small", memory="8Gi"), node("big", memory="64Gi"), placed)))
    return str(path)


def test_explain_shows_the_placement_record_beside_the_replay_and_agrees_when_nothing_changed(
    tmp_path, capsys
):
    from berth.configure import default_pipeline

    digest = default_pipeline(kube_filters=False).digest
    record = {
        "node": "big",
        "score": 2,
        "margin": 1.5,
        "top": [["big", 2], ["small", 0.5]],
        "feasible": 2,
        "noChoice": False,
        "seed": 7,
        "chain": digest,
    }
    cluster = _recorded_cluster(tmp_path, record)
    assert main(["explain", "default/web-0", "--cluster", cluster]) == 0
    out = capsys.readouterr().out
    assert (
        "recorded at binding: node big; score 2; margin 1.5; top big (2), small (0.5); 2 feasible; seed 7"
        in out
    )
    assert "the replay agrees with the record" in out
    assert "asked now with the pod's own seed 7" in out  # the recorded seed replays the decision
    main(["explain", "default/web-0", "--cluster", cluster, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["record"] == record and out["replayDiffers"] == []


def test_explain_says_when_the_replay_now_differs_from_the_record(tmp_path, capsys):
    record = {"node": "small", "seed": 7, "chain": "0123456789ab", "noChoice": True}
    cluster = _recorded_cluster(tmp_path, record)
    main(["explain", "default/web-0", "--cluster", cluster])
    out = capsys.readouterr().out
    assert "the replay now differs: it chooses big, the record says small; the chain or configuration " in out
    assert "recorded 0123456789ab" in out
