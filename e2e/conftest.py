"""The end-to-end cluster: a real control plane, berth's extender and operator, and berth-scheduler.

One cluster per test session. Each test works in a namespace of its own, so tags, apps and policies of
one test never meet another's; the nodes are shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, free_port

ROOT = Path(__file__).resolve().parent.parent
NODES = 20
SCHEDULER = "berth-scheduler"


def scheduler_config(extender_port: int) -> str:
    """The scheduler configuration berth ships, pointed at this run's extender, leader election off."""
    config = yaml.safe_load((ROOT / "manifests/scheduler/scheduler-config.yaml").read_text())
    config["leaderElection"] = {"leaderElect": False}
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{extender_port}"
    return yaml.safe_dump(config)


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} not ready after {timeout}s:\n{log.read_text()[-3000:]}")


class Cluster:
    def __init__(self, cp: ControlPlane, extender_url: str) -> None:
        self.cp = cp
        self.extender_url = extender_url
        self.nodes = [f"node-{i:02d}" for i in range(NODES)]

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return self.cp.kubectl(*args, **kw)

    def apply(self, *objects: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess:
        text = yaml.safe_dump_all(objects)
        return self.cp.kubectl("apply", "-f", "-", input=text, check=check)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        ns = ["-n", namespace] if namespace else []
        return self.cp.kubectl_json("get", kind, name, *ns)

    def pod_node(self, namespace: str, name: str) -> str:
        return self.get("pod", name, namespace).get("spec", {}).get("nodeName") or ""

    def wait_placed(self, namespace: str, names: list[str], timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        placed: dict[str, str] = {}
        while time.monotonic() < deadline:
            pods = self.cp.kubectl_json("get", "pods", "-n", namespace)["items"]
            placed = {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in pods}
            if all(placed.get(n) for n in names):
                return {n: placed[n] for n in names}
            time.sleep(0.3)
        raise AssertionError(f"not all placed after {timeout}s: {placed}\n{self.events(namespace)}")

    def events(self, namespace: str, pod: str | None = None) -> list[dict[str, str]]:
        items = self.cp.kubectl_json("get", "events", "-n", namespace)["items"]
        out = [
            {
                "pod": e["involvedObject"].get("name", ""),
                "type": e.get("type", ""),
                "reason": e.get("reason", ""),
                "message": e.get("message", ""),
                "source": (e.get("source") or {}).get("component", "") or e.get("reportingComponent", ""),
            }
            for e in items
        ]
        return [e for e in out if pod is None or e["pod"] == pod]

    def wait_event(
        self, namespace: str, pod: str, match: Callable[[dict[str, str]], bool], timeout: float = 60
    ) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events(namespace, pod):
                if match(event):
                    return event
            time.sleep(0.5)
        raise AssertionError(f"no matching event for {namespace}/{pod}: {self.events(namespace, pod)}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cp = ControlPlane()
    cp.start()
    procs: list[subprocess.Popen] = []
    try:
        logs = cp.logs
        assert logs is not None
        cp.kubectl("apply", "-f", str(ROOT / "manifests/crds"))
        cp.kubectl("wait", "--for=condition=Established", "crd/placementpolicies.berth.dev", "--timeout=60s")

        port = free_port()
        extender_log = logs / "berth-extender.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "berth.cli",
                    "serve",
                    "--kubeconfig",
                    str(cp.kubeconfig),
                    "--port",
                    str(port),
                ],
                stdout=extender_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        _wait_http(f"http://127.0.0.1:{port}/readyz", procs[-1], extender_log)

        webhook_port = free_port()
        operator_log = logs / "berth-operator.log"
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "berth.cli",
                    "operator",
                    "--kubeconfig",
                    str(cp.kubeconfig),
                    "--standalone",
                    "--webhook-self-signed",
                    "--manage-webhooks",
                    "--webhook-addr",
                    "127.0.0.1",
                    "--webhook-host",
                    "127.0.0.1",
                    "--webhook-port",
                    str(webhook_port),
                    "--liveness",
                    f"http://127.0.0.1:{free_port()}/healthz",
                ],
                stdout=operator_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        _wait_webhooks(cp, procs[-1], operator_log)

        cp.start_scheduler(scheduler_config(port), name="berth-scheduler")
        for name in [f"node-{i:02d}" for i in range(NODES)]:
            cp.create_node(name, cpu="8", memory="32Gi")
        cluster = Cluster(cp, f"http://127.0.0.1:{port}")
        _wait_nodes_seen(cluster)
        yield cluster
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        cp.stop()


def _wait_webhooks(cp: ControlPlane, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    """The operator is serving once its webhook configuration exists and refuses a bad pod."""
    deadline = time.monotonic() + timeout
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "webhook-probe", "namespace": "default", "annotations": {"berth.dev/tags": "["}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
    }
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"operator exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        result = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
        if result.returncode != 0 and "berth.dev/tags" in result.stderr:
            return
        time.sleep(1)
    raise RuntimeError(f"admission webhook not serving after {timeout}s:\n{log.read_text()[-3000:]}")


def _wait_nodes_seen(cluster: Cluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{cluster.extender_url}/metrics", timeout=2) as response:
            if f"berth_cache_nodes {float(NODES)}" in response.read().decode():
                return
        time.sleep(0.3)
    raise RuntimeError("the extender's cache did not see every node")


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
