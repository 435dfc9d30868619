"""The chart-installed local cluster: a real control plane, berth's extender and operator, and
berth-scheduler, as the chart installs them, run as local processes (no kubelet, no Docker). The e2e
suite's session cluster and `make try` (e2e/try_cluster.py) are both made here.

The chart (charts/berth, rendered by helm with its default values) is applied with `kubectl apply
--server-side`: CRDs, namespace berth-system, RBAC, ServiceAccounts, ConfigMaps, Deployments, Services,
PodDisruptionBudgets, the webhook Secret. There is no kubelet, so the chart's Deployments never run pods;
their processes run here instead, as the chart configures them:

- `berth serve` and `berth operator` with the arguments of the chart's containers (ports and file paths
  replaced) and a token of the chart's ServiceAccount (`kubectl create token`), not as admin;
- kube-scheduler with the scheduler configuration of the chart's ConfigMap (extender URL replaced), its
  leader election on, and a token of the scheduler's ServiceAccount;
- the chart's ValidatingWebhookConfiguration, registered as admin with each webhook's service client
  config replaced by the local operator's URL and CA (the operator is not allowed to write webhook
  configurations, in the chart as here).

With `kwok`, kube-controller-manager and kwok run too and the nodes are kwok's: workloads get their pods
and the pods run (kwok's simulated kubelets).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, free_port

from berth.certs import self_signed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "charts"))
import render_chart  # noqa: E402

SCHEDULER = "berth-scheduler"
CHART_NAMESPACE = render_chart.NAMESPACE


class Chart:
    """The chart's objects as helm rendered them for this cluster."""

    def __init__(self, text: str) -> None:
        self.objects = render_chart.documents(text)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def named(self, kind: str, suffix: str) -> dict[str, Any]:
        return next(o for o in self.of_kind(kind) if o["metadata"]["name"].endswith(suffix))

    def container(self, deployment: str, name: str) -> dict[str, Any]:
        pod = self.named("Deployment", deployment)["spec"]["template"]["spec"]
        return next(c for c in pod["containers"] if c["name"] == name)

    def service_account(self, deployment: str) -> str:
        return self.named("Deployment", deployment)["spec"]["template"]["spec"]["serviceAccountName"]

    def scheduler_config(self) -> dict[str, Any]:
        return yaml.safe_load(self.named("ConfigMap", "-scheduler-config")["data"]["config.yaml"])


def chart_args(container: dict[str, Any], replace: dict[str, str]) -> list[str]:
    """The container's arguments with the values of some `--flag=value` replaced; every flag to replace
    must be there, so the chart and this harness cannot drift apart unnoticed."""
    args, seen = [], set()
    for arg in container["args"]:
        flag, eq, _ = arg.partition("=")
        if eq and flag in replace:
            arg = f"{flag}={replace[flag]}"
            seen.add(flag)
        args.append(arg)
    missing = set(replace) - seen
    assert not missing, f"the chart's {container['name']} container has no {sorted(missing)}"
    return args


def install_chart(cp: ControlPlane, chart: Chart) -> None:
    """Everything the chart renders except the webhook configuration, server-side applied as admin."""
    crds = chart.of_kind("CustomResourceDefinition")
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(crds))
    names = [f"crd/{c['metadata']['name']}" for c in crds]
    cp.kubectl("wait", "--for=condition=Established", *names, "--timeout=60s")
    cp.kubectl("create", "namespace", CHART_NAMESPACE)
    rest = [
        _runs_elsewhere(o)
        for o in chart.objects
        if o["kind"] not in ("CustomResourceDefinition", "ValidatingWebhookConfiguration")
    ]
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(rest))


RUNS_ELSEWHERE = "berth.dev/runs-elsewhere"  # berth check reads it (berth.cli.check_cmd)


def _runs_elsewhere(obj: dict[str, Any]) -> dict[str, Any]:
    """The chart's Deployments, whose processes run here beside the control plane instead: kept, with no
    replica (no pod waits for a kubelet that will never run it), saying where berth runs."""
    if obj["kind"] != "Deployment":
        return obj
    obj = copy.deepcopy(obj)
    obj["spec"]["replicas"] = 0
    where = "as local processes beside the control plane (e2e/local_cluster.py: berth serve, berth operator, "
    where += "kube-scheduler berth-scheduler)"
    obj["metadata"].setdefault("annotations", {})[RUNS_ELSEWHERE] = where
    return obj


def write_kubeconfig(
    cp: ControlPlane,
    path: Path,
    user: dict[str, Any],
    *,
    user_name: str,
    context: str = "e2e",
    namespace: str | None = None,
) -> Path:
    """A kubeconfig (mode 0600) for the e2e API server with one user and one context, current."""
    assert cp.certs
    ctx: dict[str, str] = {"cluster": "e2e", "user": user_name}
    if namespace:
        ctx["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {"server": cp.server, "certificate-authority": str(cp.certs / "ca.crt")},
            }
        ],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": context, "context": ctx}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def service_account_kubeconfig(cp: ControlPlane, service_account: str) -> Path:
    """A kubeconfig holding a token of one of the chart's ServiceAccounts."""
    assert cp.workdir
    token = cp.kubectl(
        "create", "token", service_account, "-n", CHART_NAMESPACE, "--duration=12h"
    ).stdout.strip()
    path = cp.workdir / f"{service_account}.kubeconfig"
    return write_kubeconfig(cp, path, {"token": token}, user_name=service_account)


def register_webhooks(cp: ControlPlane, chart: Chart, port: int, ca: Path) -> dict[str, Any]:
    """The chart's ValidatingWebhookConfiguration, pointed at the local operator instead of its Service."""
    config = json.loads(json.dumps(chart.of_kind("ValidatingWebhookConfiguration")[0]))
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for hook in config["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
    cp.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(config))
    return config


def scheduler_config(chart: Chart, extender_port: int, kubeconfig: Path) -> str:
    """The chart's scheduler configuration with this run's extender port and the scheduler's token."""
    config = chart.scheduler_config()
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{extender_port}"
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    return yaml.safe_dump(config)


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
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
    def __init__(self, cp: ControlPlane, extender_url: str, chart: Chart) -> None:
        self.cp = cp
        self.extender_url = extender_url
        self.chart = chart
        # what the chart's processes run with: kubeconfig per component, the operator's liveness URL
        self.kubeconfigs: dict[str, Path] = {}
        self.operator_liveness = ""
        self.metrics_port = 0  # the extender's metrics port (the chart's, on every address as in a pod)
        # the operator's webhook: its port, certificate files, log and arguments (the chart's, localised)
        self.webhook: dict[str, Any] = {}
        self.nodes: list[str] = []

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


@contextlib.contextmanager
def chart_cluster(
    cp: ControlPlane, nodes: Sequence[tuple[str, dict[str, str]]], *, kwok: bool = False
) -> Iterator[Cluster]:
    """The chart installed on a started control plane, berth's processes running as it configures them,
    and `nodes` (name, labels) created; with `kwok`, kube-controller-manager and kwok run the nodes and
    their pods. berth's processes are stopped afterwards (the control plane is the caller's)."""
    procs: list[subprocess.Popen] = []
    try:
        logs, workdir = cp.logs, cp.workdir
        assert logs is not None and workdir is not None and cp.bin is not None
        os.environ.setdefault("BERTH_HELM", str(cp.bin / "helm"))
        if kwok:
            cp.start_controllers()
        chart = Chart(render_chart.render("--namespace", CHART_NAMESPACE, crds=True))
        install_chart(cp, chart)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        berth = [sys.executable, "-m", "berth.cli"]

        # The extender, with the scheduler pod's service account (it is a sidecar of kube-scheduler).
        scheduler_kubeconfig = service_account_kubeconfig(cp, chart.service_account("-scheduler"))
        allocator = workdir / "allocator.yaml"
        allocator.write_text(chart.named("ConfigMap", "-allocator")["data"]["allocator.yaml"])
        port, metrics_port = free_port(), free_port()
        serve = chart_args(
            chart.container("-scheduler", "extender"),
            {"--port": str(port), "--config": str(allocator), "--metrics-port": str(metrics_port)},
        )
        extender_log = logs / "berth-extender.log"
        procs.append(
            subprocess.Popen(
                [*berth, *serve, f"--kubeconfig={scheduler_kubeconfig}"],
                stdout=extender_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        wait_http(f"http://127.0.0.1:{port}/readyz", procs[-1], extender_log)

        # The operator, with its own service account, serving the chart's webhooks on loopback.
        operator_kubeconfig = service_account_kubeconfig(cp, chart.service_account("-operator"))
        certs = self_signed(workdir / "webhook-tls", ["127.0.0.1", "localhost"])
        webhook_port = free_port()
        liveness = f"http://127.0.0.1:{free_port()}/healthz"
        operator = chart_args(
            chart.container("-operator", "operator"),
            {
                "--webhook-addr": "127.0.0.1",
                "--webhook-port": str(webhook_port),
                "--webhook-cert": str(certs.cert),
                "--webhook-key": str(certs.key),
                "--liveness": liveness,
                "--config": str(allocator),  # the ConfigMap the chart mounts into both
            },
        )
        operator_log = logs / "berth-operator.log"
        procs.append(
            subprocess.Popen(
                [*berth, *operator, f"--kubeconfig={operator_kubeconfig}"],
                stdout=operator_log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        register_webhooks(cp, chart, webhook_port, certs.ca)
        _wait_webhooks(cp, procs[-1], operator_log)

        cp.start_scheduler(scheduler_config(chart, port, scheduler_kubeconfig), name=SCHEDULER)
        for name, labels in nodes:
            cp.create_node(name, cpu="8", memory="32Gi", labels=labels, kwok=kwok)
        cluster = Cluster(cp, f"http://127.0.0.1:{port}", chart)
        cluster.nodes = [name for name, _ in nodes]
        cluster.kubeconfigs = {"scheduler": scheduler_kubeconfig, "operator": operator_kubeconfig}
        cluster.operator_liveness = liveness
        cluster.metrics_port = metrics_port
        cluster.webhook = {"port": webhook_port, "certs": certs, "log": operator_log, "args": operator}
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
            if f"berth_cache_nodes {float(len(cluster.nodes))}" in response.read().decode():
                return
        time.sleep(0.3)
    raise RuntimeError("the extender's cache did not see every node")
