"""A representative set of the allocator's steps under a real kube-scheduler: traits, strict and soft
locality, an affinity rule with a glob."""

from __future__ import annotations

import json

from conftest import pod


def neighbour(name: str, namespace: str, node: str) -> dict:
    obj = pod(name, namespace)
    obj["spec"]["nodeName"] = node
    return obj


def with_annotation(obj: dict, key: str, value) -> dict:
    obj["metadata"]["annotations"][key] = value if isinstance(value, str) else json.dumps(value)
    return obj


def test_a_node_with_traits_takes_only_pods_that_ask_for_them(cluster, namespace):
    cluster.cp.create_node("ssd-0", cpu="8", memory="32Gi")
    cluster.kubectl("annotate", "node", "ssd-0", 'berth.dev/traits={"ssd": true}')
    try:
        cluster.apply(with_annotation(pod("fast", namespace), "berth.dev/traits", {"ssd": True}))
        assert cluster.wait_placed(namespace, ["fast"]) == {"fast": "ssd-0"}
        cluster.apply(*(pod(f"plain-{i}", namespace) for i in range(6)))
        placed = cluster.wait_placed(namespace, [f"plain-{i}" for i in range(6)])
        assert "ssd-0" not in placed.values()
    finally:
        cluster.kubectl("delete", "node", "ssd-0")


def test_strict_near_lands_beside_the_named_pod_and_strict_far_keeps_away(cluster, namespace):
    cluster.apply(neighbour("db-0", namespace, "node-07"))
    cluster.apply(
        with_annotation(pod("near", namespace), "berth.dev/locality", {"near": "db-0", "strict": True})
    )
    assert cluster.wait_placed(namespace, ["near"]) == {"near": "node-07"}
    cluster.apply(
        *(
            with_annotation(
                pod(f"far-{i}", namespace), "berth.dev/locality", {"far": ["db-0"], "strict": True}
            )
            for i in range(5)
        )
    )
    placed = cluster.wait_placed(namespace, [f"far-{i}" for i in range(5)])
    assert "node-07" not in placed.values()


def test_a_soft_near_hint_is_honoured_when_it_can_be(cluster, namespace):
    cluster.apply(neighbour("cache-0", namespace, "node-13"))
    cluster.apply(with_annotation(pod("web", namespace), "berth.dev/locality", {"near": ["cache-0"]}))
    assert cluster.wait_placed(namespace, ["web"]) == {"web": "node-13"}


def test_an_affinity_rule_with_a_glob_lands_beside_a_matching_container(cluster, namespace):
    cluster.apply(neighbour("database-1", namespace, "node-12"))
    rules = [
        {"key": "container", "operator": "==", "value": "database-*", "valueType": "glob", "isSoft": False}
    ]
    cluster.apply(with_annotation(pod("app", namespace), "berth.dev/affinity-rules", rules))
    assert cluster.wait_placed(namespace, ["app"]) == {"app": "node-12"}


def test_a_strict_hint_that_cannot_be_met_stays_pending_naming_the_rule(cluster, namespace):
    obj = with_annotation(
        pod("orphan", namespace), "berth.dev/locality", {"near": "no-such-pod", "strict": True}
    )
    cluster.apply(obj)
    event = cluster.wait_event(
        namespace, "orphan", lambda e: e["reason"] in ("FailedScheduling", "FailedPlacement")
    )
    assert "locality" in event["message"]
