"""Pods that stay Pending on their nodes (an image that takes long to pull; here, no kubelet at all) keep
counting there: a second wave of pods created long after the first, past the extender's reservation time
(the default 30 s), must not share a node with the first."""

from __future__ import annotations

import json
import time
from collections import Counter

from conftest import pod
from stack import until
from test_policies_e2e import policy, wait_ready

WAIT_PAST_RESERVATION = 45  # seconds; the extender's default reservation time is 30 s


def _placed(cluster, namespace: str) -> dict[str, str]:
    pods = cluster.cp.kubectl_json("get", "pods", "-n", namespace)["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in pods}


def test_a_second_wave_after_the_reservation_time_sees_the_pending_pods_of_the_first(cluster, namespace):
    nodes = len(cluster.nodes)
    first, second = nodes // 2, nodes // 2 + 1  # the second wave fills the free half, and one too many
    labels = {"app.kubernetes.io/name": "slow-pull", "app.kubernetes.io/version": "1"}
    cluster.apply(
        policy(
            "one",
            namespace,
            {"type": "ONE_PER_HOST"},
            {"matchLabels": {"app.kubernetes.io/name": "slow-pull"}},
        )
    )
    wait_ready(cluster, namespace, "one")
    # The same scenario under tag affinity: each pod keeps off nodes holding its group.
    solo = {
        "tags": ["solo"],
        "affinity": {"require_without_tag": ["solo"]},
    }
    wave1 = [f"a-{i:02d}" for i in range(first)] + [f"s-{i:02d}" for i in range(first)]
    cluster.apply(
        *(pod(n, namespace, labels=labels) for n in wave1 if n.startswith("a-")),
        *(pod(n, namespace, **solo) for n in wave1 if n.startswith("s-")),
    )
    cluster.wait_placed(namespace, wave1, timeout=120)
    time.sleep(WAIT_PAST_RESERVATION)
    phases = {
        p["status"].get("phase") for p in cluster.cp.kubectl_json("get", "pods", "-n", namespace)["items"]
    }
    assert phases == {"Pending"}  # bound, never started: as a slow image pull leaves them

    wave2 = [f"a-{i:02d}" for i in range(first, first + second)] + [
        f"s-{i:02d}" for i in range(first, first + second)
    ]
    cluster.apply(
        *(pod(n, namespace, labels=labels) for n in wave2 if n.startswith("a-")),
        *(pod(n, namespace, **solo) for n in wave2 if n.startswith("s-")),
    )

    def settled() -> dict[str, dict] | None:
        """The two pods left waiting, each with its FailedScheduling event, once every other is placed."""
        placed = _placed(cluster, namespace)
        waiting = [n for n, node in placed.items() if not node]
        if len(placed) - len(waiting) < 2 * nodes or len(waiting) != 2:
            return None
        refused = {
            name: event
            for name in waiting
            for event in cluster.events(namespace, name)
            if event["reason"] == "FailedScheduling"
        }
        return refused if len(refused) == 2 else None

    refused = until("every pod placed but two, those two refused", settled, timeout=120, every=1)
    placed = _placed(cluster, namespace)
    for group in ("a-", "s-"):
        mine = {n: node for n, node in placed.items() if n.startswith(group) and node}
        assert len(mine) == nodes, f"{group}: {len(mine)} pods placed on {nodes} nodes: {json.dumps(mine)}"
        assert max(Counter(mine.values()).values()) == 1, f"{group}: two pods share a node: {mine}"
    unplaced = sorted(n for n, node in placed.items() if not node)
    assert len(unplaced) == 2, unplaced
    messages = {n: refused[n]["message"] for n in unplaced}
    assert "ONE_PER_HOST" in next(m for n, m in messages.items() if n.startswith("a-"))
    assert "require_without_tag" in next(m for n, m in messages.items() if n.startswith("s-"))
