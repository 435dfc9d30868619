"""`berth audit --live` on a real cluster: pods that break their rules now, or would after a change,
and the same count in a PlacementPolicy's status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from conftest import pod
from stack import until
from test_policies_e2e import policy, wait_ready

ROOT = Path(__file__).resolve().parent.parent
APP = "app.kubernetes.io/name"


def bound(name: str, namespace: str, node: str, **kw: Any) -> dict:
    """A pod created with spec.nodeName: placed by hand, past every scheduler."""
    obj = pod(name, namespace, **kw)
    obj["spec"]["nodeName"] = node
    return obj


def audit(cluster, namespace: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "audit",
            "--live",
            "--kubeconfig",
            str(cluster.cp.kubeconfig),
            "--namespace",
            namespace,
            "--output",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def pairs(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((v["pod"], v["node"]) for v in found)


def test_a_pod_placed_by_hand_beside_a_tag_it_excludes_is_reported(cluster, namespace):
    cluster.apply(bound("batch-0", namespace, "node-03", tags=["batch"]))
    code, report = audit(cluster, namespace)
    assert code == 0 and report["clean"]
    cluster.apply(bound("web-0", namespace, "node-03", affinity={"require_without_tag": ["batch"]}))
    code, report = audit(cluster, namespace)
    assert code == 1
    (violation,) = report["violations"]["tags/require_without_tag"]
    assert (violation["pod"], violation["node"]) == (f"{namespace}/web-0", "node-03")
    assert f"a pod of namespace {namespace} on the node carries an excluded tag" in violation["reason"]
    assert report["refusedOnReschedule"] == []  # 19 other nodes would take it


def test_a_require_with_tag_pod_whose_neighbour_is_deleted_is_refused_on_reschedule(cluster, namespace):
    cluster.apply(bound("db-0", namespace, "node-06", tags=["db"]))
    cluster.apply(pod("app", namespace, affinity={"require_with_tag": ["db"]}))
    assert cluster.wait_placed(namespace, ["app"]) == {"app": "node-06"}
    assert audit(cluster, namespace)[0] == 0
    cluster.kubectl("delete", "pod", "-n", namespace, "db-0", "--force", "--grace-period=0")
    code, report = audit(cluster, namespace)
    assert code == 1
    (refused,) = report["refusedOnReschedule"]
    assert refused["pod"] == f"{namespace}/app" and refused["rules"] == ["tags/require_with_tag"]
    assert refused["message"].startswith('no node satisfies the affinity constraint require_with_tag=["db"]')


def test_one_per_host_over_an_app_two_per_node_shows_in_the_what_if_then_in_the_status(
    cluster, namespace, tmp_path
):
    labels = {APP: "pair", "app.kubernetes.io/version": "1"}
    placed = {"pair-0": "node-01", "pair-1": "node-01", "pair-2": "node-02", "pair-3": "node-02"}
    cluster.apply(*(bound(name, namespace, node, labels=labels) for name, node in placed.items()))
    spread = policy("spread", namespace, {"type": "ONE_PER_HOST"}, {"matchLabels": {APP: "pair"}})
    policy_file = tmp_path / "spread.yaml"
    policy_file.write_text(yaml.safe_dump(spread))

    assert audit(cluster, namespace)[0] == 0  # no policy yet: nothing to break
    code, report = audit(cluster, namespace, "--policy", str(policy_file))
    assert code == 1
    # Two per node where the policy allows one: the younger of each pair is the one too many (applied
    # in order, pair-1 starts no earlier than pair-0; the name breaks a tie), colliding with the other.
    expected = [(f"{namespace}/pair-1", "node-01"), (f"{namespace}/pair-3", "node-02")]
    assert pairs(report["violations"]["policy/placement-policy"]) == expected
    collides = {v["pod"]: v["collidesWith"] for v in report["violations"]["policy/placement-policy"]}
    assert collides == {
        f"{namespace}/pair-1": [f"{namespace}/pair-0"],
        f"{namespace}/pair-3": [f"{namespace}/pair-2"],
    }

    cluster.apply(spread)
    wait_ready(cluster, namespace, "spread")

    def violating_two() -> dict[str, Any] | None:
        status = cluster.get("placementpolicy", "spread", namespace).get("status", {})
        return status if status.get("violatingPods") == 2 else None

    status = until("the policy's status counting 2 violating pods", violating_two, timeout=60)
    assert status.get("governedPods") == 4 and status.get("violatingPods") == 2, status
    printed = cluster.kubectl("get", "ppol", "spread", "-n", namespace).stdout.splitlines()
    assert printed[0].split()[:4] == ["NAME", "TYPE", "READY", "VIOLATING"]
    assert printed[1].split()[:4] == ["spread", "ONE_PER_HOST", "True", "2"]
    # The live policy, audited as it now is: the same two.
    code, report = audit(cluster, namespace)
    assert code == 1 and pairs(report["violations"]["policy/placement-policy"]) == expected
