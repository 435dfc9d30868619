"""The end-to-end cluster: a real control plane, berth's extender and operator, and berth-scheduler, as the
chart installs them (e2e/local_cluster.py, which `make try` runs too).

One cluster per test session, 20 nodes. Each test works in a namespace of its own, so tags, apps and
policies of one test never meet another's; the nodes are shared.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import ControlPlane, free_port
from local_cluster import (
    CHART_NAMESPACE,
    ROOT,
    SCHEDULER,
    Chart,
    Cluster,
    chart_args,
    chart_cluster,
    render_chart,
    wait_http,
    write_kubeconfig,
)

# What the tests import from here.
__all__ = [
    "CHART_NAMESPACE",
    "ROOT",
    "SCHEDULER",
    "Chart",
    "Cluster",
    "chart_args",
    "free_port",
    "pod",
    "render_chart",
    "wait_http",
    "write_kubeconfig",
]

NODES = 20


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    cp = ControlPlane()
    cp.start()
    try:
        with chart_cluster(cp, [(f"node-{i:02d}", {}) for i in range(NODES)]) as made:
            yield made
    finally:
        cp.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    return name


def pod(
    name: str,
    namespace: str,
    *,
    tags: list[str] | None = None,
    affinity: Any = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str = SCHEDULER,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if tags is not None:
        ann["berth.dev/tags"] = json.dumps(tags)
    if affinity is not None:
        ann["berth.dev/affinity"] = affinity if isinstance(affinity, str) else json.dumps(affinity)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": ann},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.example/none:1"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }
