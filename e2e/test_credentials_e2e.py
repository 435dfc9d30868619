"""berth logs in as kubectl does, on the e2e API server: a user whose bearer token the API server takes
(its --token-auth-file), bound to a read-only role, reached through an exec credential plugin that
hands out that token with a few seconds of life; KUBECONFIG files merged; --context; the context's
namespace; `kubectl berth` as a kubectl plugin."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import Cluster, pod, wait_http, write_kubeconfig
from controlplane import free_port

USER = "berth-reader"
LIFETIME = 6  # seconds of an exec credential
BERTH = [sys.executable, "-m", "berth.cli"]


@pytest.fixture(scope="module")
def reader(cluster: Cluster) -> str:
    """The token user, allowed to read what berth reads, and nothing else."""
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "berth-e2e-reader"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
                {
                    "apiGroups": ["berth.dev"],
                    "resources": ["placementpolicies"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "berth-e2e-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "berth-e2e-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )
    return cluster.cp.tokens[USER]


def write_plugin(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def token_plugin(directory: Path, token: str) -> tuple[Path, Path]:
    """A plugin printing an ExecCredential with the token and LIFETIME seconds to live, and the file
    that counts its runs."""
    runs = directory / "plugin-runs"
    plugin = write_plugin(
        directory / "sso-credential",
        f"""
        import datetime, json, os
        runs = {str(runs)!r}
        with open(runs, "a") as out:
            out.write("run\\n")
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={LIFETIME})
        print(json.dumps({{
            "apiVersion": info["apiVersion"],
            "kind": "ExecCredential",
            "status": {{"token": {token!r}, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}},
        }}))
        """,
    )
    return plugin, runs


def runs_of(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def kubeconfig(
    path: Path, cluster: Cluster, *, context: str, user: dict, namespace: str | None = None
) -> Path:
    return write_kubeconfig(cluster.cp, path, user, user_name="sso", context=context, namespace=namespace)


def exec_user(plugin: Path) -> dict:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }


def pod_file(path: Path, name: str) -> Path:
    obj = pod(name, "x", tags=["web"])
    del obj["metadata"]["namespace"]  # in the context's namespace
    path.write_text(yaml.safe_dump(obj))
    return path


def run(args: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env={**full, **(env or {})}, **kw)


def test_kubectl_berth_simulate_logs_in_through_an_exec_plugin(cluster, namespace, reader, tmp_path):
    plugin, runs = token_plugin(tmp_path, reader)
    config = kubeconfig(
        tmp_path / "config", cluster, context="sso", user=exec_user(plugin), namespace=namespace
    )
    assert cluster.cp.bin
    # kubectl finds kubectl-berth on the PATH and hands it every argument after `berth`.
    path = f"{Path(sys.executable).parent}:{cluster.cp.bin}:{os.environ['PATH']}"
    web = pod_file(tmp_path / "web.yaml", "web")
    kubectl = [str(cluster.cp.bin / "kubectl"), "berth", "simulate", "--kubeconfig", str(config)]
    result = run([*kubectl, "--pod", str(web), "--output", "json", "--seed", "1"], {"PATH": path})
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["pod"] == f"{namespace}/web" and decision["chosen"] in cluster.nodes
    assert runs_of(runs) == 1


def test_a_failing_plugin_is_one_line_naming_it_with_its_stderr(cluster, namespace, tmp_path):
    plugin = write_plugin(
        tmp_path / "sso-credential",
        """
        import sys
        print("error: the SSO session has expired; run sso login", file=sys.stderr)
        sys.exit(1)
        """,
    )
    config = kubeconfig(tmp_path / "config", cluster, context="sso", user=exec_user(plugin))
    result = run(
        [
            *BERTH,
            "simulate",
            "--live",
            "--kubeconfig",
            str(config),
            "--pod",
            str(pod_file(tmp_path / "p.yaml", "p")),
        ]
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"berth: kubeconfig {config}, context sso, user sso: exec plugin '{plugin}' failed: "
        "process returned 1. error: the SSO session has expired; run sso login\n"
    )


def test_merged_kubeconfig_files_and_context_pick_the_cluster(cluster, namespace, reader, tmp_path):
    # The first file's current context points at nothing listening; the second file has the real one.
    stale = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "old",
                "cluster": {"server": f"https://127.0.0.1:{free_port()}", "insecure-skip-tls-verify": True},
            }
        ],
        "users": [{"name": "old", "user": {"token": "nothing"}}],
        "contexts": [{"name": "old", "context": {"cluster": "old", "user": "old"}}],
        "current-context": "old",
    }
    first = tmp_path / "old.yaml"
    first.write_text(yaml.safe_dump(stale))
    plugin, _ = token_plugin(tmp_path, reader)
    second = kubeconfig(
        tmp_path / "e2e.yaml", cluster, context="e2e-sso", user=exec_user(plugin), namespace=namespace
    )
    env = {"KUBECONFIG": f"{first}:{second}"}
    db = pod("db-0", namespace, tags=["db"])
    db["spec"]["nodeName"] = "node-07"
    cluster.apply(db)

    picked = run([*BERTH, "explain", "db-0", "--live", "--context", "e2e-sso"], env)
    assert picked.returncode == 0, picked.stderr
    assert picked.stdout.startswith(f"{namespace}/db-0 is on node-07")

    current = run([*BERTH, "explain", "db-0", "--live"], env)
    assert current.returncode == 2
    assert (
        current.stderr.startswith("berth: GET /api/v1/nodes: ClientConnectorError: Cannot connect to host")
        and current.stderr.count("\n") == 1
    )


def test_serve_renews_the_plugins_credential_as_it_expires(cluster, namespace, reader, tmp_path):
    # To bind, besides reading: only in this namespace.
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "bind", "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["pods/binding", "events"], "verbs": ["create"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "bind", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bind"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )
    plugin, runs = token_plugin(tmp_path, reader)
    config = kubeconfig(tmp_path / "config", cluster, context="sso", user=exec_user(plugin))
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*BERTH, "serve", "--port", str(port), "--kubeconfig", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", proc, log)
        started = time.monotonic()
        assert runs_of(runs) == 1
        cluster.apply(pod("late", namespace, scheduler="nobody"))
        uid = cluster.get("pod", "late", namespace)["metadata"]["uid"]
        time.sleep(max(0.0, LIFETIME + 1 - (time.monotonic() - started)))  # the first credential has expired
        body = {"PodName": "late", "PodNamespace": namespace, "PodUID": uid, "Node": "node-04"}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/bind",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        assert answer.get("Error", "") == "", answer
        assert cluster.pod_node(namespace, "late") == "node-04"
        assert runs_of(runs) >= 2, log.read_text()
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=15)
