"""Tag affinity under a real kube-scheduler: pods created through the API, placement read from
spec.nodeName, refusals read from the FailedScheduling events."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, pod


def neighbour(name: str, namespace: str, node: str, tags: list[str]) -> dict:
    """A pod already bound to `node` (created with spec.nodeName, as after a scheduling)."""
    obj = pod(name, namespace, tags=tags)
    obj["spec"]["nodeName"] = node
    return obj


def test_require_with_tag_lands_beside_the_tagged_pod(cluster, namespace):
    cluster.apply(neighbour("db-0", namespace, "node-05", ["db"]))
    cluster.apply(pod("app", namespace, affinity={"require_with_tag": ["db"]}))
    assert cluster.wait_placed(namespace, ["app"]) == {"app": "node-05"}


def test_require_without_tag_avoids_every_node_with_the_tag(cluster, namespace):
    busy = [n for n in cluster.nodes if n != "node-17"]
    cluster.apply(*(neighbour(f"batch-{i}", namespace, n, ["batch"]) for i, n in enumerate(busy)))
    cluster.apply(pod("web", namespace, affinity={"require_without_tag": ["batch"]}))
    assert cluster.wait_placed(namespace, ["web"]) == {"web": "node-17"}


def test_three_web_and_one_batch_at_plus_two_beat_one_web_at_plus_one(cluster, namespace):
    cluster.apply(
        *(neighbour(f"web-{i}", namespace, "node-01", ["web"]) for i in range(3)),
        neighbour("batch-0", namespace, "node-01", ["batch"]),
        neighbour("web-9", namespace, "node-02", ["web"]),
    )
    cluster.apply(
        pod("new", namespace, affinity={"prefer_with_tag": ["web"], "prefer_without_tag": ["batch"]})
    )
    assert cluster.wait_placed(namespace, ["new"]) == {"new": "node-01"}
    # The placement record rides on the pod, written with the binding.
    annotations = cluster.get("pod", "new", namespace)["metadata"]["annotations"]
    record = json.loads(annotations["berth.dev/placement"])
    assert record["node"] == "node-01" and record["top"][0][0] == "node-01"
    assert record["feasible"] == len(cluster.nodes) and record["noChoice"] is False
    assert len(record["chain"]) == 12 and isinstance(record["seed"], int)
    # berth writes no per-placement event by default (--placement-events), only kube-scheduler's own.
    assert not [e for e in cluster.events(namespace, "new") if e["source"] == "berth"]


def test_weighted_affinity_is_admitted_with_a_warning_and_ties_a_and_b(cluster, namespace):
    cluster.apply(neighbour("a", namespace, "node-03", ["a"]), neighbour("b", namespace, "node-04", ["b"]))
    result = cluster.apply(pod("new", namespace, affinity={"a": 100, "b": 1}))
    assert "Warning:" in result.stderr and '{"prefer_with_tag": ["a", "b"]}' in result.stderr
    assert cluster.wait_placed(namespace, ["new"])["new"] in ("node-03", "node-04")
    warning = cluster.wait_event(namespace, "new", lambda e: e["reason"] == "DeprecatedAffinity")
    assert warning["type"] == "Warning"


def test_an_unsatisfiable_constraint_stays_pending_with_the_constraint_named(cluster, namespace):
    cluster.apply(pod("lonely", namespace, tags=["web"], affinity={"require_with_tag": ["web"]}))
    event = cluster.wait_event(namespace, "lonely", lambda e: e["reason"] == "FailedScheduling")
    assert "tags/require_with_tag" in event["message"]
    berth = cluster.wait_event(namespace, "lonely", lambda e: e["reason"] == "FailedPlacement")
    assert 'no node satisfies the affinity constraint require_with_tag=["web"]' in berth["message"]
    assert cluster.pod_node(namespace, "lonely") == ""


def test_a_recreated_pod_whose_tagged_neighbour_is_gone_stays_pending_naming_the_constraint(
    cluster, namespace
):
    cluster.apply(neighbour("db-0", namespace, "node-06", ["db"]))
    cluster.apply(pod("app", namespace, affinity={"require_with_tag": ["db"]}))
    assert cluster.wait_placed(namespace, ["app"]) == {"app": "node-06"}
    # No kubelet finishes a graceful deletion here: delete at once.
    cluster.kubectl("delete", "pod", "-n", namespace, "db-0", "app", "--force", "--grace-period=0")
    cluster.apply(pod("app", namespace, affinity={"require_with_tag": ["db"]}))
    event = cluster.wait_event(namespace, "app", lambda e: e["reason"] == "FailedScheduling")
    assert "require_with_tag" in event["message"]
    assert cluster.pod_node(namespace, "app") == ""


def test_admission_refuses_mixed_affinity_forms_naming_the_keys(cluster, namespace):
    result = cluster.apply(
        pod("mixed", namespace, affinity={"prefer_with_tag": ["a"], "web": 5}), check=False
    )
    assert result.returncode != 0
    assert 'affinity keys ["web"]' in result.stderr and "cannot be mixed" in result.stderr


def test_admission_refuses_a_deployment_whose_template_has_bad_tags(cluster, namespace):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"berth.dev/tags": '["ok", ""]'}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    result = cluster.apply(deployment, check=False)
    assert result.returncode != 0 and "annotation berth.dev/tags" in result.stderr


def test_simulate_live_agrees_with_where_the_scheduler_put_the_pod(cluster, namespace, tmp_path):
    cluster.apply(neighbour("cache-0", namespace, "node-09", ["cache"]))
    spec = pod("web", namespace, affinity={"prefer_with_tag": ["cache"]})
    cluster.apply(spec)
    placed = cluster.wait_placed(namespace, ["web"])["web"]
    pod_file = tmp_path / "web.json"
    pod_file.write_text(json.dumps(spec))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "simulate",
            "--live",
            "--kubeconfig",
            str(cluster.cp.kubeconfig),
            "--pod",
            str(pod_file),
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["chosen"] == placed == "node-09"
