"""What the benchmarks place: one pod per vocabulary, and the chains they run through.

Every pod is a full Pod object as kube-scheduler sends it to the extender (labels, annotations,
requests and limits, the default tolerations), so the extender benchmark's bodies have a realistic
size. The tag-affinity pod lives in namespace ns-000, whose pods carry web, db, batch, backend and
group-0 (bench.generate.tag_pool); the policy pods run the app `bench-app` that a fifth of the nodes
already host, in namespace `bench`, where the generator put one PlacementPolicy per type.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from bench.generate import (
    BENCH_APP,
    BENCH_NAMESPACE,
    POLICIES,
    POLICY_LABEL,
    ZONE_APP,
    ZONE_NAMESPACE,
    ZONE_POLICIES,
)

# The chains, in the allocator configuration's words; None is berth's default chain.
CHAINS: dict[str, list[Any] | None] = {
    # The tag-affinity vocabulary alone: what a cluster that uses only tags configures.
    "tags": ["pipe", "tags/require_with_tag", "tags/require_without_tag", "tags/tag-affinity"],
    # The PlacementPolicy step alone.
    "policy": ["pipe", "policy/placement-policy"],
    # berth's default chain as the extender runs it (every vocabulary, the allocator's 30 steps).
    "default": None,
}


@dataclass(frozen=True)
class Scenario:
    name: str
    pod: dict[str, Any]
    chains: tuple[str, ...]


def pod(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str = "",
) -> dict[str, Any]:
    """A pending Pod as the API server stores it (what kube-scheduler puts in ExtenderArgs.Pod)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"00000000-0000-4000-8000-{zlib.crc32(f'{namespace}/{name}'.encode()):012d}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": "berth-scheduler",
            "priority": 0,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "512Mi"},
                        "limits": {"cpu": "500m", "memory": "1Gi"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _app_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": BENCH_APP, "app.kubernetes.io/version": "1.0"}


TAG_AFFINITY = {"require_without_tag": ["db"], "prefer_with_tag": ["web"]}


def tag_affinity_pod(name: str = "probe-tags", uid: str = "") -> dict[str, Any]:
    """Stays off nodes running db pods of its namespace, prefers nodes running its web pods."""
    return pod(
        name,
        "ns-000",
        labels={"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"},
        annotations={"berth.dev/tags": json.dumps(["web"]), "berth.dev/affinity": json.dumps(TAG_AFFINITY)},
        uid=uid,
    )


def scenarios() -> list[Scenario]:
    out = [
        Scenario("tag-affinity", tag_affinity_pod(), ("tags", "default")),
        Scenario(
            "tag-require-with",
            pod(
                "probe-with",
                "ns-000",
                annotations={"berth.dev/affinity": json.dumps({"require_with_tag": ["web"]})},
            ),
            ("tags", "default"),
        ),
        # The same per zone: every node of a zone holding a web pod of the namespace.
        Scenario(
            "tag-require-with-zone",
            pod(
                "probe-with-zone",
                "ns-000",
                annotations={
                    "berth.dev/affinity": json.dumps(
                        {"require_with_tag": ["web"], "topologyKey": "topology.kubernetes.io/zone"}
                    )
                },
            ),
            ("tags", "default"),
        ),
        # The allocator's chain with nothing but the pod's limits: every allocator step runs.
        Scenario(
            "allocator",
            pod("probe-alloc", "ns-001", labels={"app.kubernetes.io/name": "app-0"}),
            ("default",),
        ),
    ]
    for policy in POLICIES:
        labels = {**_app_labels(), POLICY_LABEL: policy}
        name = "cel-rule" if policy == "rule-based" else f"policy-{policy}"
        out.append(
            Scenario(name, pod(f"probe-{policy}", BENCH_NAMESPACE, labels=labels), ("policy", "default"))
        )
    # Per zone, the app in one zone of five: a fifth of the nodes removed, as per host. Under
    # ONE_PER_HOST every zone holds the app after four decisions: its first decision is the figure.
    for policy in ZONE_POLICIES:
        labels = {
            "app.kubernetes.io/name": ZONE_APP,
            "app.kubernetes.io/version": "1.0",
            POLICY_LABEL: policy,
        }
        out.append(
            Scenario(
                f"policy-{policy}",
                pod(f"probe-{policy}", ZONE_NAMESPACE, labels=labels),
                ("policy", "default"),
            )
        )
    return out
