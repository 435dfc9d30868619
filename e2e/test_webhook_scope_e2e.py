"""The pod and workload webhooks see only berth's objects (the chart's matchConditions): with the
operator unreachable and the pod webhook failing closed, a plain pod is still created at once, and a
pod with a berth annotation, or naming berth's scheduler, is refused."""

from __future__ import annotations

import base64
import json
import time

import pytest
from conftest import CHART_NAMESPACE, SCHEDULER, Chart, pod, render_chart
from controlplane import free_port


@pytest.fixture
def operator_down(cluster, namespace):
    """The chart's webhooks rendered with failurePolicy Fail, pointed at a port where no operator
    listens, for this test's namespace only (the chart's namespaceSelector knob)."""
    values = ["--set", "webhook.failurePolicy.pods=Fail", "--set", "webhook.failurePolicy.workloads=Fail"]
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    chart = Chart(
        render_chart.render(
            "--namespace",
            CHART_NAMESPACE,
            *values,
            "--set-json",
            # null drops the default's matchExpressions (helm merges maps)
            f"webhook.namespaceSelector={json.dumps({**selector, 'matchExpressions': None})}",
        )
    )
    config = chart.of_kind("ValidatingWebhookConfiguration")[0]
    config["metadata"]["name"] = f"berth-down-{namespace}"
    assert cluster.cp.certs
    bundle = base64.b64encode((cluster.cp.certs / "ca.crt").read_bytes()).decode()
    port = free_port()
    config["webhooks"] = [h for h in config["webhooks"] if h["name"] != "placement-policy.berth.dev"]
    for hook in config["webhooks"]:
        assert hook["namespaceSelector"] == selector
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/{hook['name']}", "caBundle": bundle}
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(config))
    try:
        yield config
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", config["metadata"]["name"])


def deployment(name: str, namespace: str, template: dict) -> dict:
    labels = {"app": name}
    template = json.loads(json.dumps(template))
    template = {"metadata": {**template["metadata"], "labels": labels}, "spec": template["spec"]}
    del template["metadata"]["namespace"], template["metadata"]["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": template},
    }


def test_only_berths_objects_wait_on_the_operator(cluster, namespace, operator_down):
    started = time.monotonic()
    plain = cluster.apply(pod("plain", namespace, scheduler="default-scheduler"), check=False)
    assert plain.returncode == 0, plain.stderr
    assert time.monotonic() - started < 5  # no webhook call, no timeout waited for
    deploy = cluster.apply(
        deployment("plain-web", namespace, pod("t", namespace, scheduler="default-scheduler"))
    )
    assert deploy.returncode == 0

    refused = [
        pod("tagged", namespace, tags=["web"], scheduler="default-scheduler"),
        pod("berth-scheduled", namespace, scheduler=SCHEDULER),
        deployment("tagged-web", namespace, pod("t", namespace, tags=["web"], scheduler="default-scheduler")),
    ]
    for obj in refused:
        result = cluster.apply(obj, check=False)
        assert result.returncode != 0, obj["metadata"]["name"]
        assert "failed calling webhook" in result.stderr and ".berth.dev" in result.stderr, result.stderr
