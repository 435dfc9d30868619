"""PlacementPolicies applied with kubectl, reconciled by the operator, enforced by the extender."""

from __future__ import annotations

import pytest
from conftest import pod
from stack import until


def policy(name: str, namespace: str, tree: dict, selector: dict | None = None) -> dict:
    spec: dict = {"policy": tree}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def wait_ready(cluster, namespace: str, name: str, timeout: float = 60) -> dict:
    """The policy once it has a Ready condition (True or not)."""

    def with_ready() -> dict | None:
        obj = cluster.get("placementpolicy", name, namespace)
        conditions = obj.get("status", {}).get("conditions", [])
        return obj if any(c["type"] == "Ready" for c in conditions) else None

    return until(f"a Ready condition on PlacementPolicy {namespace}/{name}", with_ready, timeout)


def test_a_policy_becomes_ready_with_its_generation_and_governed_pods(cluster, namespace):
    cluster.apply(
        policy(
            "spread", namespace, {"type": "ONE_PER_HOST"}, {"matchLabels": {"app.kubernetes.io/name": "web"}}
        )
    )
    obj = wait_ready(cluster, namespace, "spread")
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    printed = cluster.kubectl("get", "ppol", "-n", namespace).stdout
    assert "ONE_PER_HOST" in printed and "True" in printed


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        pytest.param("ctx.allocation.node.hostname ==", "does not compile", id="a syntax error"),
        # Stored, it would be Ready and every pod it governs would stay Pending.
        pytest.param("ctx.allocation.node.hostname", "must return a boolean", id="a string result"),
    ],
)
def test_a_policy_with_an_invalid_rule_is_refused_before_it_is_stored(cluster, namespace, rule, why):
    bad = policy("bad", namespace, {"type": "RULE_BASED", "rule": rule})
    result = cluster.apply(bad, check=False)
    assert result.returncode != 0
    assert "spec.policy.rule" in result.stderr and why in result.stderr
    assert cluster.kubectl("get", "ppol", "bad", "-n", namespace, check=False).returncode != 0


def test_a_burst_of_20_pods_under_one_per_host_lands_one_per_node(cluster, namespace):
    labels = {"app.kubernetes.io/name": "burst", "app.kubernetes.io/version": "1"}
    cluster.apply(
        policy(
            "one", namespace, {"type": "ONE_PER_HOST"}, {"matchLabels": {"app.kubernetes.io/name": "burst"}}
        )
    )
    wait_ready(cluster, namespace, "one")
    names = [f"b-{i:02d}" for i in range(20)]
    cluster.apply(*(pod(n, namespace, labels=labels) for n in names))
    placed = cluster.wait_placed(namespace, names, timeout=120)
    assert sorted(placed.values()) == sorted(cluster.nodes)
    cluster.apply(pod("b-extra", namespace, labels=labels))
    event = cluster.wait_event(namespace, "b-extra", lambda e: e["reason"] == "FailedScheduling")
    assert "ONE_PER_HOST" in event["message"]


def test_match_tag_targets_the_one_tagged_node_and_any_keeps_off_it(cluster, namespace):
    cluster.cp.create_node("gpu-0", cpu="8", memory="32Gi", labels={"tag.berth.dev/gpu": ""})
    try:
        cluster.apply(
            policy("gpu", namespace, {"type": "MATCH_TAG", "tag": "gpu"}, {"matchLabels": {"want": "gpu"}}),
            policy("plain", namespace, {"type": "ANY"}, {"matchLabels": {"want": "any"}}),
        )
        wait_ready(cluster, namespace, "gpu")
        wait_ready(cluster, namespace, "plain")
        cluster.apply(pod("trainer", namespace, labels={"want": "gpu"}))
        assert cluster.wait_placed(namespace, ["trainer"]) == {"trainer": "gpu-0"}
        cluster.apply(*(pod(f"web-{i}", namespace, labels={"want": "any"}) for i in range(5)))
        placed = cluster.wait_placed(namespace, [f"web-{i}" for i in range(5)])
        assert "gpu-0" not in placed.values()
    finally:
        cluster.kubectl("delete", "node", "gpu-0")


def test_a_rule_based_policy_sees_the_node_labels(cluster, namespace):
    rule = 'ctx.allocation.node.hostname == "node-11"'
    cluster.apply(
        policy("pin", namespace, {"type": "RULE_BASED", "rule": rule}, {"matchLabels": {"pin": "yes"}})
    )
    wait_ready(cluster, namespace, "pin")
    cluster.apply(pod("pinned", namespace, labels={"pin": "yes"}))
    assert cluster.wait_placed(namespace, ["pinned"]) == {"pinned": "node-11"}


def test_no_tag_keeps_off_a_specialised_node_and_a_composite_or_reaches_it(cluster, namespace):
    cluster.cp.create_node("fast-0", cpu="8", memory="32Gi", labels={"tag.berth.dev/fast": ""})
    try:
        either = {
            "type": "COMPOSITE",
            "combiner": "OR",
            "policies": [{"type": "MATCH_TAG", "tag": "fast"}, {"type": "MATCH_TAG", "tag": "node-04"}],
        }
        cluster.apply(
            policy("plain", namespace, {"type": "NO_TAG"}, {"matchLabels": {"want": "plain"}}),
            policy("either", namespace, either, {"matchLabels": {"want": "either"}}),
        )
        wait_ready(cluster, namespace, "plain")
        wait_ready(cluster, namespace, "either")
        cluster.apply(*(pod(f"plain-{i}", namespace, labels={"want": "plain"}) for i in range(6)))
        placed = cluster.wait_placed(namespace, [f"plain-{i}" for i in range(6)])
        assert "fast-0" not in placed.values()
        cluster.apply(*(pod(f"either-{i}", namespace, labels={"want": "either"}) for i in range(6)))
        placed = cluster.wait_placed(namespace, [f"either-{i}" for i in range(6)])
        assert set(placed.values()) <= {"fast-0", "node-04"}
    finally:
        cluster.kubectl("delete", "node", "fast-0")
