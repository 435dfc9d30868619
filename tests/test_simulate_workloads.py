"""`berth simulate` of a whole workload: its replicas placed in order, each seeing the ones before."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from berth.cli import main
from tests.builders import k8s_list, node, pod

SPREAD = {"berth.dev/tags": '["web"]', "berth.dev/affinity": '{"require_without_tag": ["web"]}'}


def _workload(kind: str, count: int | None, **extra: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app.kubernetes.io/name": "web"}, "annotations": SPREAD},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    spec: dict[str, Any] = {"template": template, **extra}
    if count is not None:
        spec["parallelism" if kind == "Job" else "replicas"] = count
    api = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


def _files(tmp_path, workload: dict[str, Any], nodes: int = 3) -> tuple[str, str]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(k8s_list(*(node(f"n{i}") for i in range(1, nodes + 1)))))
    pod = tmp_path / "workload.yaml"
    pod.write_text(yaml.safe_dump(workload))
    return str(cluster), str(pod)


def _json(capsys) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "Job"])
def test_a_workload_places_its_replicas_each_seeing_the_ones_before(tmp_path, capsys, kind):
    cluster, pod = _files(tmp_path, _workload(kind, 3))
    code = main(["simulate", "--cluster", cluster, "--pod", pod, "--seed", "1", "--output", "json"])
    out = _json(capsys)
    assert code == 0
    assert [d["pod"] for d in out["decisions"]] == ["shop/web-0", "shop/web-1", "shop/web-2"]
    # require_without_tag web: each replica avoids the nodes of the ones before.
    assert sorted(d["chosen"] for d in out["decisions"]) == ["n1", "n2", "n3"]
    assert out["summary"] == {
        "placed": 3,
        "total": 3,
        "podsPerNode": {"n1": 1, "n2": 1, "n3": 1},
        "firstRefusal": None,
    }


def test_a_replica_that_does_not_fit_is_the_first_refusal_and_the_exit_is_1(tmp_path, capsys):
    cluster, pod = _files(tmp_path, _workload("Deployment", 4))
    code = main(["simulate", "--cluster", cluster, "--pod", pod, "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 1
    lines = out.rstrip().splitlines()
    assert lines[-2].startswith("placed 3 of 4; pods per node: n1 1, n2 1, n3 1")
    assert lines[-1].startswith(
        "first refusal: shop/web-3 (409) no node satisfies the affinity constraint require_without_tag="
    )


def test_replicas_override_the_workloads_count(tmp_path, capsys):
    cluster, pod = _files(tmp_path, _workload("StatefulSet", 12))
    code = main(["simulate", "--cluster", cluster, "--pod", pod, "--replicas", "2", "--output", "json"])
    out = _json(capsys)
    assert code == 0 and out["summary"]["placed"] == 2 and out["summary"]["total"] == 2


def test_a_job_runs_its_parallelism_but_no_more_than_its_completions(tmp_path, capsys):
    cluster, pod = _files(tmp_path, _workload("Job", 3, completions=2))
    main(["simulate", "--cluster", cluster, "--pod", pod, "--output", "json"])
    assert _json(capsys)["summary"]["total"] == 2


def test_a_workload_without_replicas_places_one_pod_as_before(tmp_path, capsys):
    cluster, pod = _files(tmp_path, _workload("Deployment", None))
    main(["simulate", "--cluster", cluster, "--pod", pod, "--output", "json"])
    out = _json(capsys)
    assert out["pod"] == "shop/web-0" and "summary" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--replicas", "0"], "--replicas should be at least 1, found 0", id="replicas 0"),
        pytest.param([], "spec.replicas should be a whole number of at least 0", id="a count that is a word"),
    ],
)
def test_a_count_that_cannot_be_is_bad_input(tmp_path, capsys, args, message):
    workload = _workload("Deployment", None)
    workload["spec"]["replicas"] = "three"
    cluster, pod = _files(tmp_path, workload)
    assert main(["simulate", "--cluster", cluster, "--pod", pod, *args]) == 2
    assert message in capsys.readouterr().err


def test_a_replica_stands_in_for_the_running_pod_of_its_name(tmp_path, capsys):
    cluster = tmp_path / "cluster.yaml"
    running = pod("web-1", namespace="shop", node="n1", annotations=SPREAD)
    cluster.write_text(yaml.safe_dump(k8s_list(node("n1"), node("n2"), running)))
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump(_workload("StatefulSet", 2)))
    code = main(["simulate", "--cluster", str(cluster), "--pod", str(workload), "--output", "json"])
    out = _json(capsys)
    # web-0 avoids n1 (web-1 runs there); the new web-1 replaces that pod, so n1 is free for it.
    assert code == 0
    assert [(d["pod"], d["chosen"]) for d in out["decisions"]] == [("shop/web-0", "n2"), ("shop/web-1", "n1")]
