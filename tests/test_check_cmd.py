"""`berth check` against a scripted API server: a healthy install passes every check (exit 0); each
broken part is one failing or warning line that says what to do (exit 1 when something fails)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import httpx
import yaml

from berth.cli.check_cmd import PROBE, check
from berth.cluster.kubeapi import Credentials, KubeClient
from berth.vocab.policy.schema import TYPES
from tests.api_server import api_server
from tests.builders import pod


def _stamp(ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _healthy() -> dict[str, Any]:
    """What a working install answers, by path."""
    crd = {
        "spec": {
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "properties": {
                                "spec": {
                                    "properties": {"policy": {"properties": {"type": {"enum": list(TYPES)}}}}
                                }
                            }
                        }
                    },
                }
            ]
        },
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }
    config = {
        "percentageOfNodesToScore": 0,
        "profiles": [
            {"schedulerName": "berth-scheduler"},
            {"schedulerName": "berth-scheduler-exhaustive", "percentageOfNodesToScore": 100},
        ],
    }
    args = ["serve", "--kube-sample=berth-scheduler=0,berth-scheduler-exhaustive=100"]
    deployment = {
        "metadata": {"name": "berth-scheduler"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/component": "scheduler"}},
            "template": {
                "spec": {"containers": [{"name": "kube-scheduler"}, {"name": "extender", "args": args}]}
            },
        },
    }
    ready = {
        "metadata": {"name": "berth-scheduler-abc"},
        "status": {
            "containerStatuses": [
                {"name": "kube-scheduler", "ready": True},
                {"name": "extender", "ready": True},
            ]
        },
    }
    lease = {
        "spec": {
            "holderIdentity": "berth-scheduler-abc_1234",
            "renewTime": _stamp(2),
            "leaseDurationSeconds": 15,
        }
    }
    return {
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/placementpolicies.berth.dev": crd,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": {
            "items": [{"metadata": {"name": "berth"}, "webhooks": [{"name": "pod-annotations.berth.dev"}]}]
        },
        "dry-run": httpx.Response(
            400, json={"kind": "Status", "code": 400, "message": 'berth.dev/tags: not JSON "["'}
        ),
        "/apis/apps/v1/namespaces/berth-system/deployments/berth-scheduler": deployment,
        "/api/v1/namespaces/berth-system/pods": {"items": [ready]},
        "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases/berth-scheduler": lease,
        "/api/v1/namespaces/berth-system/configmaps/berth-scheduler-config": {
            "data": {"config.yaml": yaml.safe_dump(config)}
        },
        "/api/v1/pods": {"items": [], "metadata": {"resourceVersion": "5"}},
    }


def _run(answers: dict[str, Any]) -> list[Any]:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and request.url.params.get("dryRun") == "All":
            assert json.loads(request.content)["metadata"]["annotations"] == PROBE["metadata"]["annotations"]
            found = answers["dry-run"]
            return found if isinstance(found, httpx.Response) else httpx.Response(201, json=found)
        found = answers.get(path)
        if found is None:
            return httpx.Response(404, json={"kind": "Status", "code": 404, "message": "not found"})
        return found if isinstance(found, httpx.Response) else httpx.Response(200, json=found)

    async def scenario() -> list[Any]:
        async with api_server(handler) as url:
            client = KubeClient(Credentials(server=url, ssl_context=False))
            return await check(client, "berth-system", "berth-scheduler", "default")

    return asyncio.run(scenario())


def _by_check(findings: list[Any]) -> dict[str, Any]:
    return {f.check: f for f in findings}


def test_a_healthy_install_passes_every_check():
    findings = _run(_healthy())
    assert [(f.check, f.status) for f in findings] == [
        ("crd", "ok"),
        ("webhooks", "ok"),
        ("scheduler", "ok"),
        ("leader", "ok"),
        ("sample", "ok"),
        ("names", "ok"),
        ("pending", "ok"),
    ]
    assert "berth-scheduler-abc leads" in _by_check(findings)["leader"].message


def test_a_missing_crd_and_an_operator_that_does_not_answer_fail_with_what_to_do():
    answers = _healthy()
    del answers["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/placementpolicies.berth.dev"]
    answers["dry-run"] = {"kind": "Pod"}  # admitted: the webhook fails open
    found = _by_check(_run(answers))
    assert found["crd"].status == "fail" and "kubectl apply -f charts/berth/crds/" in found["crd"].fix
    assert found["webhooks"].status == "fail" and "was admitted" in found["webhooks"].message


def test_a_scheduler_pod_that_is_not_ready_fails_naming_why():
    answers = _healthy()
    pending = {
        "metadata": {"name": "berth-scheduler-abc"},
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}]
        },
    }
    answers["/api/v1/namespaces/berth-system/pods"] = {"items": [pending]}
    found = _by_check(_run(answers))
    assert found["scheduler"].status == "fail"
    assert "PodScheduled: 0/3 nodes are available" in found["scheduler"].message


def test_a_scheduler_that_runs_outside_the_cluster_says_so_on_its_deployment():
    answers = _healthy()
    deployment = answers["/apis/apps/v1/namespaces/berth-system/deployments/berth-scheduler"]
    deployment["metadata"]["annotations"] = {"berth.dev/runs-elsewhere": "local processes of make try"}
    answers["/api/v1/namespaces/berth-system/pods"] = {"items": []}
    found = _by_check(_run(answers))
    assert found["scheduler"].status == "ok" and "local processes of make try" in found["scheduler"].message


def test_sample_settings_that_differ_from_the_scheduler_s_fail():
    answers = _healthy()
    deployment = answers["/apis/apps/v1/namespaces/berth-system/deployments/berth-scheduler"]
    deployment["spec"]["template"]["spec"]["containers"][1]["args"] = [
        "serve",
        "--kube-sample=berth-scheduler=0",
    ]
    found = _by_check(_run(answers))
    assert found["sample"].status == "fail"
    assert (
        "berth-scheduler-exhaustive: 100 in the configuration, absent for berth serve"
        in found["sample"].message
    )


def test_misnamed_schedulers_and_pods_waiting_long_are_named_with_what_holds_them():
    answers = _healthy()
    misnamed = pod("web-1", namespace="shop", phase="Pending", tags=["web"])
    misnamed["spec"]["schedulerName"] = "berth-schedular"
    waiting = pod("db-1", namespace="shop", phase="Pending", affinity={"require_with_tag": ["db"]})
    waiting["spec"]["schedulerName"] = "berth-scheduler"
    waiting["metadata"]["creationTimestamp"] = _stamp(600)
    message = 'no node satisfies the affinity constraint require_with_tag=["db"]'
    waiting["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "message": message}]
    young = pod("db-2", namespace="shop", phase="Pending")
    young["spec"]["schedulerName"] = "berth-scheduler"
    young["metadata"]["creationTimestamp"] = _stamp(10)
    answers["/api/v1/pods"] = {"items": [misnamed, waiting, young], "metadata": {"resourceVersion": "5"}}
    findings = _run(answers)
    found = _by_check(findings)
    assert found["names"].status == "warn" and "shop/web-1 (berth-schedular)" in found["names"].message
    assert found["pending"].status == "warn"
    assert f"shop/db-1: {message}" in found["pending"].message and "db-2" not in found["pending"].message
    assert all(f.status != "fail" for f in findings)  # warnings only: exit 0
