"""A real, loopback-only Kubernetes control plane for end-to-end tests.

Runs etcd + kube-apiserver (+ any number of kube-scheduler processes) built by
``e2e/build-controlplane.sh`` -- no Docker, no real kubelet. With
``start_controllers()`` it also runs kube-controller-manager (Deployments make
ReplicaSets and pods, PodDisruptionBudgets get a status, deleted pods are
garbage collected) and kwok, which plays the kubelet of the nodes made with
``kwok=True``: node heartbeats (leases), pods Running and Ready, graceful
deletion completed. Standard library only; certificates are made with the
``openssl`` CLI.

    from controlplane import ControlPlane

    with ControlPlane() as cp:
        cp.kubectl("get", "namespaces")
        cp.start_scheduler(ControlPlane.scheduler_config(extenders_yaml=...))

Binaries: ``$BERTH_CONTROLPLANE_BIN`` if set, else the build script is run (a
no-op when its cache is warm) and the last line of its stdout is used.

Everything listens on 127.0.0.1 only. ``keep_logs=True`` (or env
``BERTH_KEEP_LOGS=1``) keeps the work directory (logs, certs, configs) after
``stop()``; otherwise it is deleted.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ControlPlane", "ControlPlaneError", "KubectlError", "find_bin_dir", "free_port"]

E2E_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = E2E_DIR / "build-controlplane.sh"
REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl")
# The annotation kwok manages nodes by (its --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
LOOPBACK = "127.0.0.1"
TOKEN_USERS = ("berth-reader",)  # users of the API server's static token file


class ControlPlaneError(RuntimeError):
    pass


class KubectlError(subprocess.CalledProcessError):
    """CalledProcessError whose message includes kubectl's stderr."""

    def __str__(self) -> str:  # pragma: no cover - formatting only
        return f"{super().__str__()}\nstderr: {(self.stderr or '').strip()}"


def find_bin_dir(kubernetes: str | None = None) -> Path:
    """Directory holding etcd/kube-apiserver/kube-scheduler/kubectl/helm; `kubernetes="v1.38"`: the
    one with the Kubernetes binaries of e2e/controlplane/v1.38 (built on first use)."""
    env = os.environ.get("BERTH_CONTROLPLANE_BIN")
    if env and not kubernetes:
        path = Path(env)
    else:
        build_env = {**os.environ, "BERTH_KUBERNETES": kubernetes or ""}
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False, env=build_env
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise ControlPlaneError(f"{BUILD_SCRIPT} failed (exit {proc.returncode})")
        path = Path(lines[-1])
    missing = [b for b in REQUIRED_BINARIES if not os.access(path / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{path}: missing binaries {missing}")
    return path


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the usual small race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if proc.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{proc.stdout}")


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


class ControlPlane:
    """etcd + kube-apiserver on loopback, with helpers for kube-scheduler and kubectl."""

    def __init__(
        self,
        bin_dir: str | os.PathLike | None = None,
        *,
        keep_logs: bool | None = None,
        workdir: str | os.PathLike | None = None,
        startup_timeout: float = 90.0,
        apiserver_args: Sequence[str] = (),
        etcd_args: Sequence[str] = (),
        kubernetes: str | None = None,
    ) -> None:
        self._bin_arg = Path(bin_dir) if bin_dir else None
        self._kubernetes = kubernetes  # "v1.38": the other Kubernetes release the harness builds
        if keep_logs is None:
            keep_logs = os.environ.get("BERTH_KEEP_LOGS", "") not in ("", "0", "false")
        self.keep_logs = keep_logs
        self._workdir_arg = Path(workdir) if workdir else None
        self.startup_timeout = startup_timeout
        self._apiserver_extra = list(apiserver_args)
        self._etcd_extra = list(etcd_args)

        self.bin: Path | None = None
        self.workdir: Path | None = None
        self.logs: Path | None = None
        self.certs: Path | None = None
        self.kubeconfig: Path | None = None
        self.server: str | None = None
        self.etcd_url: str | None = None
        self.apiserver_port: int | None = None
        # Bearer tokens the API server accepts (--token-auth-file): user name -> token. These users
        # have no permissions until a test binds a role to them.
        self.tokens: dict[str, str] = {}

        self._procs: list[tuple[str, subprocess.Popen, object]] = []  # (name, proc, logfile)
        self._argv: dict[str, list[str]] = {}  # the flags each component was started with
        self._scheduler_count = 0
        self._stopped = False
        self._atexit_registered = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        self._stopped = False
        self.bin = self._bin_arg or find_bin_dir(self._kubernetes)
        if self._workdir_arg:
            self.workdir = self._workdir_arg
            self.workdir.mkdir(parents=True, exist_ok=True)
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="berth-cp-"))
        self.logs = self.workdir / "logs"
        self.certs = self.workdir / "pki"
        self.logs.mkdir(exist_ok=True)
        self.certs.mkdir(exist_ok=True)
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self._make_certs()
            self._write_tokens()
            for attempt in range(1, 4):
                try:
                    self._start_etcd()
                    self._start_apiserver()
                    self._write_kubeconfig()
                    self._wait_apiserver()
                    break
                except ControlPlaneError as e:
                    # free_port() is racy: another process may grab the port first.
                    if "address already in use" not in str(e) or attempt == 3:
                        raise
                    self._kill_all()
                    shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
        except BaseException:
            self.keep_logs = True  # a failed start is worth looking at
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every process (newest first), SIGKILL after 10 s; then clean up."""
        if self._stopped:
            return
        self._stopped = True
        self._kill_all()
        if self.workdir is None:
            return
        if self.keep_logs:
            shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
            print(f"[controlplane] logs kept in {self.workdir}", flush=True)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill_all(self) -> None:
        for _name, proc, logf in reversed(self._procs):
            self._terminate(proc)
            with contextlib.suppress(Exception):
                logf.close()
        self._procs.clear()

    @staticmethod
    def _terminate(proc: subprocess.Popen, grace: float = 10.0) -> None:
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    # ------------------------------------------------------------------ helpers
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        assert self.logs is not None
        logf = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        logf.write(("# " + " ".join(argv) + "\n").encode())
        logf.flush()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        self._procs.append((name, proc, logf))
        self._argv[name] = argv
        return proc

    # ------------------------------------------------------------------ controllers
    def start_controllers(self, *, controllers: str = "*,-nodeipam") -> None:
        """Start kube-controller-manager (with the admin kubeconfig, leader election off) and kwok,
        which manages the nodes annotated ``kwok.x-k8s.io/node=fake`` (create_node(kwok=True)) with the
        stages of its own repository (node heartbeats, pod lifecycle), built by the build script.
        Nodes made without kwok get no heartbeat: kube-controller-manager's node lifecycle controller
        takes them NotReady after its grace period."""
        assert self.bin and self.certs and self.kubeconfig
        missing = [b for b in ("kube-controller-manager", "kwok") if not os.access(self.bin / b, os.X_OK)]
        if missing:
            raise ControlPlaneError(f"{', '.join(missing)} missing from {self.bin}: run {BUILD_SCRIPT}")
        d = self.certs
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--controllers={controllers}",
                f"--root-ca-file={d / 'ca.crt'}",
                f"--service-account-private-key-file={d / 'sa.key'}",
                "--secure-port=0",
                "--concurrent-deployment-syncs=10",
                "--concurrent-replicaset-syncs=10",
                "--v=2",
            ],
        )
        stages = self.bin / "kwok-stages.yaml"
        self._spawn(
            "kwok",
            [
                str(self.bin / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={stages}",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--node-lease-duration-seconds=40",
                "--server-address=",
                "--cidr=10.244.0.0/16",
                f"--node-ip={LOOPBACK}",
            ],
        )
        time.sleep(1.0)
        for name in ("kube-controller-manager", "kwok"):
            proc = next(p for n, p, _ in self._procs if n == name)
            if proc.poll() is not None:
                assert self.logs is not None
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode}:\n{_tail(self.logs / (name + '.log'))}"
                )

    # ------------------------------------------------------------------ faults
    def kill(self, name: str) -> None:
        """SIGKILL one component (etcd, kube-apiserver, a scheduler) as a crash would."""
        for entry in list(self._procs):
            if entry[0] == name:
                entry[1].kill()
                entry[1].wait(timeout=10)
                with contextlib.suppress(Exception):
                    entry[2].close()
                self._procs.remove(entry)
                return
        raise ControlPlaneError(f"no running component {name!r}")

    def revive(self, name: str) -> None:
        """Start a killed component again with the same flags (same ports, same etcd data) and
        wait until it is healthy."""
        assert self.logs is not None
        proc = self._spawn(name, self._argv[name])
        if name == "kube-apiserver":
            self._apiserver = proc
            self._wait_apiserver()
        elif name == "etcd":

            def healthy() -> bool:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                    return json.load(r).get("health") == "true"

            self._wait("etcd", proc, self.logs / "etcd.log", healthy, self.startup_timeout)
        else:
            time.sleep(0.5)

    def _wait(self, what: str, proc: subprocess.Popen, log: Path, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_err = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{what} exited with code {proc.returncode}; log {log}:\n{_tail(log)}"
                )
            try:
                if check():
                    return
            except Exception as e:
                last_err = e
            time.sleep(0.25)
        raise ControlPlaneError(
            f"{what} not ready after {timeout:.0f}s (last error: {last_err}); log {log}:\n{_tail(log)}"
        )

    def _make_certs(self) -> None:
        d = self.certs
        assert d is not None
        _openssl("genrsa", "-out", "ca.key", "2048", cwd=d)
        _openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-sha256",
            "-days",
            "3650",
            "-subj",
            "/CN=berth-e2e-ca",
            "-out",
            "ca.crt",
            cwd=d,
        )
        (d / "serving.ext").write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1\n"
        )
        (d / "client.ext").write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=clientAuth\n"
        )
        for name, subj, ext in (
            ("apiserver", "/CN=kube-apiserver", "serving.ext"),
            ("admin", "/O=system:masters/CN=admin", "client.ext"),
            ("front-proxy-client", "/CN=front-proxy-client", "client.ext"),
        ):
            _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=d)
            _openssl("req", "-new", "-key", f"{name}.key", "-subj", subj, "-out", f"{name}.csr", cwd=d)
            _openssl(
                "x509",
                "-req",
                "-in",
                f"{name}.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "3650",
                "-sha256",
                "-extfile",
                ext,
                "-out",
                f"{name}.crt",
                cwd=d,
            )
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)

    def _ssl_context(self) -> ssl.SSLContext:
        d = self.certs
        assert d is not None
        ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
        ctx.load_cert_chain(str(d / "admin.crt"), str(d / "admin.key"))
        return ctx

    def _start_etcd(self) -> None:
        assert self.bin and self.workdir and self.logs
        etcd = str(self.bin / "etcd")
        h = subprocess.run([etcd, "--help"], capture_output=True, text=True)
        help_text = h.stdout + h.stderr
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://{LOOPBACK}:{client}"
        peer_url = f"http://{LOOPBACK}:{peer}"
        argv = [
            etcd,
            "--name=berth-e2e",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=berth-e2e={peer_url}",
            "--initial-cluster-state=new",
            "--log-level=warn",
        ]
        if "--unsafe-no-fsync" in help_text:
            argv.append("--unsafe-no-fsync")
        argv += self._etcd_extra
        proc = self._spawn("etcd", argv)

        def healthy() -> bool:
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                return json.load(r).get("health") == "true"

        self._wait("etcd", proc, self.logs / "etcd.log", healthy, self.startup_timeout)

    def _start_apiserver(self) -> None:
        assert self.bin and self.workdir and self.certs
        d = self.certs
        port = free_port()
        self.apiserver_port = port
        self.server = f"https://{LOOPBACK}:{port}"
        argv = [
            str(self.bin / "kube-apiserver"),
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--etcd-servers={self.etcd_url}",
            "--authorization-mode=RBAC",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--service-account-issuer=https://{LOOPBACK}:{port}/",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            # Request-header (front-proxy) authn config: published in the
            # extension-apiserver-authentication ConfigMap, which kube-scheduler's
            # delegated authn reads (it logs errors every few seconds without it).
            f"--requestheader-client-ca-file={d / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={d / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={d / 'front-proxy-client.key'}",
            # Loopback addresses are invalid in Endpoints; nothing here needs the
            # in-cluster "kubernetes" Service endpoints.
            "--endpoint-reconciler-type=none",
            *self._apiserver_extra,
        ]
        self._apiserver = self._spawn("kube-apiserver", argv)

    def _write_tokens(self) -> None:
        assert self.certs
        self.tokens = {user: secrets.token_hex(16) for user in TOKEN_USERS}
        lines = [f"{token},{user},uid-{user}" for user, token in self.tokens.items()]
        path = self.certs / "tokens.csv"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)

    def _write_kubeconfig(self) -> None:
        assert self.workdir and self.certs
        d = self.certs
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.kubeconfig.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: berth-e2e
  cluster:
    server: {self.server}
    certificate-authority: {d / "ca.crt"}
users:
- name: admin
  user:
    client-certificate: {d / "admin.crt"}
    client-key: {d / "admin.key"}
contexts:
- name: berth-e2e
  context:
    cluster: berth-e2e
    user: admin
    namespace: default
current-context: berth-e2e
"""
        )

    def _wait_apiserver(self) -> None:
        assert self.logs
        ctx = self._ssl_context()

        def get(path: str) -> int:
            try:
                with urllib.request.urlopen(self.server + path, timeout=3, context=ctx) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        # /readyz covers etcd and the post-start hooks (RBAC bootstrap roles, ...);
        # the default namespace is created by a bootstrap controller right after.
        self._wait(
            "kube-apiserver",
            self._apiserver,
            self.logs / "kube-apiserver.log",
            lambda: get("/readyz") == 200 and get("/api/v1/namespaces/default") == 200,
            self.startup_timeout,
        )

    # ------------------------------------------------------------------ public API
    def api_get(self, path: str):
        """GET an API path as admin and decode the JSON body."""
        with urllib.request.urlopen(self.server + path, timeout=10, context=self._ssl_context()) as r:
            return json.load(r)

    def api_request(self, method: str, path: str, body: dict, *, patch: bool = False):
        """POST/PUT/PATCH (merge patch) as admin without spawning kubectl; the decoded answer."""
        ctype = "application/merge-patch+json" if patch else "application/json"
        request = urllib.request.Request(
            self.server + path, data=json.dumps(body).encode(), method=method, headers={"Content-Type": ctype}
        )
        with urllib.request.urlopen(request, timeout=30, context=self._ssl_context()) as r:
            return json.load(r)

    def create_nodes(
        self,
        names: Sequence[str],
        *,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: str = "110",
        labels: dict[str, str] | None = None,
        kwok: bool = False,
    ) -> None:
        """create_node() for many nodes at once, through the API directly (seconds for hundreds)."""
        res = {"cpu": cpu, "memory": memory, "pods": pods}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "fake node (berth e2e)",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for name in names:
            meta: dict = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
            if kwok:
                meta["annotations"] = {KWOK_ANNOTATION: "fake"}
            self.api_request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta})
            status = {"status": {"capacity": res, "allocatable": res, "conditions": [ready]}}
            self.api_request("PATCH", f"/api/v1/nodes/{name}/status", status, patch=True)
            # TaintNodesByCondition added not-ready at create; no controller-manager removes it here.
            self.api_request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, patch=True)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """Run kubectl with the admin kubeconfig; raises KubectlError on failure if check."""
        assert self.bin and self.kubeconfig, "control plane not started"
        argv = [str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def kubectl_json(self, *args: str, **kw):
        """kubectl ... -o json, decoded."""
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)

    def create_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: str = "110",
        labels: dict[str, str] | None = None,
        extra_allocatable: dict[str, str] | None = None,
        kwok: bool = False,
    ) -> dict:
        """Create a fake Ready Node (no kubelet) the scheduler will place pods on; with ``kwok``,
        kwok (start_controllers) plays its kubelet.

        1. ``kubectl apply`` the Node (status is ignored on create);
        2. ``kubectl patch --subresource=status``: capacity/allocatable + Ready;
        3. drop the ``node.kubernetes.io/not-ready:NoSchedule`` taint that the
           TaintNodesByCondition admission plugin adds on create (normally the
           node-lifecycle controller removes it; there is no controller-manager).
        """
        meta: dict = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
        if kwok:
            meta["annotations"] = {KWOK_ANNOTATION: "fake"}
        self.kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": meta})
        )
        res = {"cpu": cpu, "memory": memory, "pods": pods, **(extra_allocatable or {})}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "status": {
                "capacity": res,
                "allocatable": res,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "fake node (berth e2e)",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        }
        self.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))
        self.remove_not_ready_taint(name)
        return self.kubectl_json("get", "node", name)

    def remove_not_ready_taint(self, name: str) -> None:
        """Remove node.kubernetes.io/not-ready taints from a Node (if any)."""
        node = self.kubectl_json("get", "node", name)
        taints = node.get("spec", {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
        if len(keep) != len(taints):
            self.kubectl(
                "patch", "node", name, "--type=merge", "-p", json.dumps({"spec": {"taints": keep or None}})
            )

    @staticmethod
    def scheduler_config(
        scheduler_name: str = "default-scheduler",
        extenders_yaml: str = "",
        extra_yaml: str = "",
    ) -> str:
        """A minimal KubeSchedulerConfiguration (v1, leader election off, one profile).

        ``extenders_yaml`` is the *list items* under ``extenders:`` (indented by
        two spaces), ``extra_yaml`` further top-level keys (e.g.
        ``percentageOfNodesToScore: 100``). clientConnection is filled in by
        start_scheduler().
        """
        text = (
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            "leaderElection:\n"
            "  leaderElect: false\n"
            "profiles:\n"
            f"  - schedulerName: {scheduler_name}\n"
        )
        if extenders_yaml.strip():
            text += "extenders:\n" + extenders_yaml.rstrip() + "\n"
        if extra_yaml.strip():
            text += extra_yaml.rstrip() + "\n"
        return text

    def start_scheduler(
        self,
        config_yaml_text: str,
        *,
        name: str | None = None,
        secure_port: int | None = None,
        wait_ready: bool = True,
        extra_args: Sequence[str] = (),
        verbosity: int = 2,
        hostname: str | None = None,
    ) -> subprocess.Popen:
        """Start kube-scheduler with ``--config`` written from config_yaml_text; with ``hostname``, in
        a UTS namespace of its own with that host name (kube-scheduler's identity in its leader Lease
        is its host name, so replicas on one machine need names of their own, as pods have).

        With --config, kube-scheduler ignores --kubeconfig, so unless the text
        has a top-level ``clientConnection:`` the admin kubeconfig is appended
        (the literal ``__KUBECONFIG__`` in the text is also replaced by its
        path). ``secure_port=None`` picks a free loopback port for /healthz and
        /readyz (waited for when wait_ready); ``secure_port=0`` disables serving.
        Logs go to ``<logs>/<name>.log``.
        """
        assert self.bin and self.workdir and self.logs and self.kubeconfig, "not started"
        self._scheduler_count += 1
        name = name or (
            "kube-scheduler" if self._scheduler_count == 1 else f"kube-scheduler-{self._scheduler_count}"
        )
        text = config_yaml_text.replace("__KUBECONFIG__", str(self.kubeconfig))
        if not any(line.startswith("clientConnection:") for line in text.splitlines()):
            text = text.rstrip("\n") + f"\nclientConnection:\n  kubeconfig: {self.kubeconfig}\n"
        cfg = self.workdir / f"{name}.yaml"
        cfg.write_text(text)
        port = free_port() if secure_port is None else secure_port
        argv = [
            str(self.bin / "kube-scheduler"),
            f"--config={cfg}",
            f"--secure-port={port}",
            f"--v={verbosity}",
        ]
        if port:
            argv += [
                f"--bind-address={LOOPBACK}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                f"--cert-dir={self.workdir / (name + '-certs')}",
            ]
        argv += list(extra_args)
        if hostname:
            argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]
        proc = self._spawn(name, argv)
        log = self.logs / f"{name}.log"
        if port and wait_ready:
            insecure = ssl.create_default_context()
            insecure.check_hostname = False
            insecure.verify_mode = ssl.CERT_NONE

            def ready() -> bool:
                url = f"https://{LOOPBACK}:{port}/readyz"
                with urllib.request.urlopen(url, timeout=2, context=insecure) as r:
                    return r.status == 200

            self._wait(name, proc, log, ready, self.startup_timeout)
        else:
            time.sleep(0.5)
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with code {proc.returncode}:\n{_tail(log)}")
        return proc

    def versions(self) -> dict[str, str]:
        """Short version strings of the binaries in use."""
        assert self.bin
        out = {}
        for b in ("etcd", "kube-apiserver", "kube-scheduler"):
            r = subprocess.run([str(self.bin / b), "--version"], capture_output=True, text=True)
            out[b] = (r.stdout or r.stderr).splitlines()[0].strip() if (r.stdout or r.stderr) else "?"
        return out
