"""berth's processes on a ControlPlane, each one killable and restartable: the extender, the operator
and berth-scheduler. The reliability tests use it to crash parts mid-burst."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, free_port

from berth.certs import self_signed

ROOT = Path(__file__).resolve().parent.parent
SCHEDULER_CONFIG = ROOT / "manifests/scheduler/scheduler-config.yaml"


class Process:
    """One berth command run as a child process, logging to a file."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.argv, self.log = name, argv, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        out = self.log.open("a")
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def http_status(url: str, context: Any = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def until(what: str, check: Any, timeout: float = 90, *, every: float = 0.5) -> Any:
    """check()'s first true answer, asked every `every` seconds (half a second unless told); an
    AssertionError naming `what` and the last answer when none came within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not reached in {timeout}s (last: {last})")


def fence_pod(name: str) -> dict[str, Any]:
    """A pod object in kube-system that stands for the berth-scheduler pod a replica would run in."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "schedulerName": "berth-e2e-unscheduled",
            "containers": [{"name": "stand-in", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


class Stack:
    def __init__(
        self,
        cp: ControlPlane,
        *,
        https: bool = False,
        scheduler: str = "berth-scheduler",
        serve_args: tuple[str, ...] = (),
        replica: str | None = None,
        fence: bool = True,
    ) -> None:
        assert cp.logs and cp.kubeconfig and cp.workdir
        self.cp, self.https, self.scheduler_name = cp, https, scheduler
        # A replica of a scheduler with leader election (the host name of its scheduler, as a pod's):
        # its berth follows the Lease named after the scheduler in kube-system, and with `fence` catches
        # up on taking it by a condition on its pod, as the chart's does (a pod object stands for the
        # berth-scheduler pod it would run in; nothing schedules it).
        self.replica = replica
        self.fence_pod = f"{scheduler}-{replica}" if replica and fence else None
        if replica:
            serve_args = (*serve_args, "--follow-lease", f"kube-system/{scheduler}", "--identity", replica)
        if self.fence_pod:
            serve_args = (*serve_args, "--fence-pod", f"kube-system/{self.fence_pod}")
        self.port = free_port()
        self.scheme = "https" if https else "http"
        python = [sys.executable, "-m", "berth.cli"]
        # What the chart tells berth serve of its kube-scheduler's profiles (charts/berth, berth.kubeSample).
        shipped = yaml.safe_load(SCHEDULER_CONFIG.read_text())
        sample = f"{scheduler}={shipped['percentageOfNodesToScore']},{scheduler}-exhaustive=100"
        serve = [*python, "serve", "--kubeconfig", str(cp.kubeconfig), "--port", str(self.port)]
        serve += ["--kube-sample", sample, *serve_args]
        if https:
            self.certs = self_signed(cp.workdir / f"{scheduler}-extender-tls", ["127.0.0.1"])
            serve += ["--tls-cert", str(self.certs.cert), "--tls-key", str(self.certs.key)]
        label = f"{scheduler}-{replica}" if replica else scheduler
        self.extender = Process("berth-extender", serve, cp.logs / f"{label}-extender.log")
        self.webhook_port = free_port()
        self.operator = Process(
            "berth-operator",
            [
                *python,
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
                str(self.webhook_port),
            ],
            cp.logs / f"{scheduler}-operator.log",
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _context(self) -> Any:
        if not self.https:
            return None
        import ssl

        return ssl.create_default_context(cafile=str(self.certs.ca))

    def ready_status(self) -> int:
        return http_status(f"{self.url}/readyz", self._context())

    def readyz(self) -> str:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=2, context=self._context()) as r:
                return r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.read().decode()

    def wait_extender(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.extender.proc and self.extender.proc.poll() is not None:
                raise RuntimeError(f"extender exited:\n{self.extender.tail()}")
            if self.ready_status() == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"extender not ready after {timeout}s:\n{self.extender.tail()}")

    def wait_nodes(self, count: int, timeout: float = 60) -> None:
        """berth's cache holds `count` nodes (berth_cache_nodes)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=2, context=self._context()) as r:
                if f"berth_cache_nodes {float(count)}" in r.read().decode():
                    return
            time.sleep(0.3)
        raise AssertionError(f"berth's cache did not see {count} nodes in {timeout}s")

    def scheduler_config(self) -> str:
        config = yaml.safe_load(SCHEDULER_CONFIG.read_text())
        if self.replica:
            config["leaderElection"] = {
                "leaderElect": True,
                "resourceLock": "leases",
                "resourceNamespace": "kube-system",
                "resourceName": self.scheduler_name,
                "leaseDuration": "6s",
                "renewDeadline": "4s",
                "retryPeriod": "1s",
            }
        else:
            config["leaderElection"] = {"leaderElect": False}
        config["profiles"][0]["schedulerName"] = self.scheduler_name
        for profile in config["profiles"][1:]:  # the exhaustive profile, named after this scheduler
            profile["schedulerName"] = f"{self.scheduler_name}-exhaustive"
        extender = config["extenders"][0]
        extender["urlPrefix"] = self.url
        if self.https:
            # The scheduler verifies the extender's certificate against this CA.
            extender["enableHTTPS"] = True
            extender["tlsConfig"] = {"caData": base64.b64encode(self.certs.ca.read_bytes()).decode()}
        return yaml.safe_dump(config)

    def start(self, *, operator: bool = True) -> Stack:
        self.cp.kubectl("apply", "-f", str(ROOT / "manifests/crds"))
        self.cp.kubectl(
            "wait", "--for=condition=Established", "crd/placementpolicies.berth.dev", "--timeout=60s"
        )
        if self.fence_pod:
            self.cp.kubectl("apply", "-f", "-", input=json.dumps(fence_pod(self.fence_pod)))
        self.extender.start()
        self.wait_extender()
        if operator:
            self.operator.start()
            self.wait_webhooks()
        name = f"{self.scheduler_name}-{self.replica}" if self.replica else self.scheduler_name
        # A replica may not lead: it is ready without answering (kube-scheduler waits for the Lease).
        self.cp.start_scheduler(self.scheduler_config(), name=name, hostname=self.replica)
        return self

    def wait_webhooks(self, timeout: float = 90) -> None:
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "default", "annotations": {"berth.dev/tags": "["}},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
        }
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.operator.proc and self.operator.proc.poll() is not None:
                raise RuntimeError(f"operator exited:\n{self.operator.tail()}")
            result = self.cp.kubectl(
                "apply", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
            )
            if result.returncode != 0 and "berth.dev/tags" in result.stderr:
                return
            time.sleep(1)
        raise RuntimeError(f"webhook not serving:\n{self.operator.tail()}")

    # -- what a test does on the cluster -----------------------------------------------------------
    def apply(self, *objects: dict[str, Any]) -> None:
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        """The namespace's pods that are not being deleted (those matching a label `selector` if given)."""
        chosen = ["-l", selector] if selector else []
        items = self.cp.kubectl_json("get", "pods", "-n", namespace, *chosen)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def berth(self, *args: str) -> tuple[int, dict[str, Any]]:
        """`berth ARGS --live -o json` on this cluster: its exit code (0 or 1) and its answer."""
        argv = [sys.executable, "-m", "berth.cli", *args, "--live", "--kubeconfig", str(self.cp.kubeconfig)]
        result = subprocess.run(
            [*argv, "--output", "json"], capture_output=True, text=True, cwd=ROOT, check=False, timeout=120
        )
        assert result.returncode in (0, 1), result.stderr
        return result.returncode, json.loads(result.stdout)

    def restart_scheduler(self) -> None:
        self.cp.kill(self.scheduler_name)
        self.cp.revive(self.scheduler_name)

    def stop(self) -> None:
        self.operator.stop()
        self.extender.stop()


def ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


@contextlib.contextmanager
def with_kwok_nodes(nodes: dict[str, dict[str, str]]) -> Iterator[Stack]:
    """A control plane whose workloads run (kube-controller-manager, kwok), berth's stack on it, and
    `nodes` (name -> labels) as kwok nodes of 4 CPUs and 16Gi: a module's `stack` fixture."""
    cp = ControlPlane()
    cp.start()
    stack = Stack(cp)
    try:
        cp.start_controllers()
        stack.start()
        for name, labels in nodes.items():
            cp.create_node(name, cpu="4", memory="16Gi", kwok=True, labels=labels)
        stack.wait_nodes(len(nodes))
        yield stack
    finally:
        stack.stop()
        cp.stop()


# The kube-scheduler releases the version-sensitive tests run against: ids and ControlPlane(kubernetes=).
VERSIONS = {"v1.36": None, "v1.38": "v1.38"}


@contextlib.contextmanager
def running(
    kubernetes: str | None = None,
    *,
    controllers: bool = False,
    operator: bool = True,
    serve_args: tuple[str, ...] = (),
) -> Iterator[Stack]:
    """A control plane of the release (kube-controller-manager with `controllers`) and berth's stack on
    it (`serve_args` added to berth serve's), stopped afterwards whatever happens: the body of a
    module's `stack` fixture."""
    cp = ControlPlane(kubernetes=kubernetes)
    cp.start()
    stack = Stack(cp, serve_args=serve_args)
    try:
        if controllers:
            cp.start_controllers()
        stack.start(operator=operator)
        yield stack
    finally:
        stack.stop()
        cp.stop()
