"""Credentials as kubectl finds them: merged KUBECONFIG files, --context, the context's namespace,
proxy-url, client certificates, tokens and token files, exec credential plugins, the service account;
and every bad input as one line naming the file, the context or the plugin."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import ssl
import stat
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
import yaml

from berth import cli
from berth.certs import self_signed
from berth.cluster import credentials
from berth.cluster.credentials import load_credentials
from berth.cluster.kubeapi import ApiError, KubeClient
from berth.errors import BerthError
from berth.operator.run import connection_info
from tests.api_server import api_server


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch, tmp_path):
    """No KUBECONFIG, no ~/.kube/config and no service account from the machine running the tests."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def kubeconfig(path: Path, *, clusters=(), users=(), contexts=(), current: str | None = None) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters],
        "users": [{"name": n, "user": u} for n, u in users],
        "contexts": [{"name": n, "context": c} for n, c in contexts],
    }
    if current:
        config["current-context"] = current
    path.write_text(yaml.safe_dump(config))
    return path


def plugin(path: Path, body: str) -> Path:
    """An exec credential plugin: a Python script."""
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def token_plugin(tmp_path: Path, *, lifetime: float | None, counter: Path) -> Path:
    expiry = "" if lifetime is None else f"'expirationTimestamp': stamp({lifetime}),"
    return plugin(
        tmp_path / "credential-plugin",
        f"""
        import datetime, json, os, sys
        counter = {str(counter)!r}
        runs = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
        open(counter, "w").write(str(runs))
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        def stamp(seconds):
            now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
            return now.strftime("%Y-%m-%dT%H:%M:%SZ")
        print(json.dumps({{
            "apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {{"token": f"token-{{runs}}", {expiry}}},
        }}))
        """,
    )


def exec_user(command: Path, *args: str) -> dict:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(command),
            "args": list(args),
            "interactiveMode": "Never",
        }
    }


def test_kubeconfig_files_are_merged_as_kubectl_merges_them(tmp_path, monkeypatch):
    first = kubeconfig(
        tmp_path / "a.yaml",
        clusters=[("dev", {"server": "https://dev.example:6443", "insecure-skip-tls-verify": True})],
        users=[("dev", {"token": "dev-token"})],
        contexts=[("dev", {"cluster": "dev", "user": "dev", "namespace": "shop"})],
        current="dev",
    )
    second = kubeconfig(
        tmp_path / "b.yaml",
        # a second "dev" cluster: the first file's wins
        clusters=[
            ("dev", {"server": "https://other.example"}),
            ("prod", {"server": "https://prod.example:6443", "insecure-skip-tls-verify": True}),
        ],
        users=[("prod", {"token": "prod-token"})],
        contexts=[("prod", {"cluster": "prod", "user": "prod"})],
        current="prod",  # the first file to set current-context wins
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing.yaml'}:{second}")
    creds = load_credentials()
    assert (creds.server, creds.namespace, creds.authorization()) == (
        "https://dev.example:6443",
        "shop",
        "Bearer dev-token",
    )
    prod = load_credentials(context="prod")
    assert (prod.server, prod.namespace, prod.authorization()) == (
        "https://prod.example:6443",
        "default",
        "Bearer prod-token",
    )
    assert "context prod" in prod.source


def test_an_unknown_context_is_one_line_naming_the_files_and_the_contexts(tmp_path):
    path = kubeconfig(
        tmp_path / "config",
        clusters=[("c", {"server": "https://c.example"})],
        contexts=[("alpha", {"cluster": "c"}), ("beta", {"cluster": "c"})],
        current="alpha",
    )
    with pytest.raises(BerthError) as caught:
        load_credentials(str(path), "gamma")
    assert caught.value.message == f"kubeconfig {path}: no context 'gamma' (contexts: alpha, beta)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clusters: [\n  - {name: x", "not YAML (line 2)"),
        ("- just\n- a list\n", "not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "no current-context; give --context (contexts: none)"),
    ],
)
def test_a_bad_kubeconfig_names_the_file(tmp_path, text, expected):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(BerthError) as caught:
        load_credentials(str(path))
    assert caught.value.message.startswith(f"kubeconfig {path}")
    assert expected in caught.value.message
    assert "\n" not in caught.value.message


def test_a_missing_kubeconfig_file_and_no_kubeconfig_at_all(tmp_path, monkeypatch):
    with pytest.raises(BerthError, match=r"^kubeconfig /nowhere/config: no such file$"):
        load_credentials("/nowhere/config")
    monkeypatch.setenv("KUBECONFIG", "/nowhere/a:/nowhere/b")
    with pytest.raises(BerthError, match=r"^KUBECONFIG=/nowhere/a:/nowhere/b: none of its files exists$"):
        load_credentials()
    monkeypatch.delenv("KUBECONFIG")
    with pytest.raises(BerthError, match=r"^no kubeconfig: give --kubeconfig"):
        load_credentials()


def test_certificates_from_files_and_data_and_the_proxy_url(tmp_path):
    tls = self_signed(tmp_path / "tls", ["api.example"])
    b64 = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
    path = kubeconfig(
        tmp_path / "config",
        clusters=[
            (
                "c",
                {
                    "server": "https://api.example:6443/",
                    "certificate-authority": "tls/ca.crt",  # relative to the kubeconfig, as for kubectl
                    "proxy-url": "http://proxy.example:3128",
                    "tls-server-name": "api.internal",
                },
            )
        ],
        users=[("u", {"client-certificate-data": b64(tls.cert), "client-key-data": b64(tls.key)})],
        contexts=[("c", {"cluster": "c", "user": "u"})],
        current="c",
    )
    creds = load_credentials(str(path))
    assert creds.server == "https://api.example:6443"
    assert creds.proxy == "http://proxy.example:3128"
    assert creds.tls_server_name == "api.internal"
    assert creds.ca_file == str(tls.ca)
    assert Path(creds.cert_file).read_bytes() == tls.cert.read_bytes()
    assert isinstance(creds.ssl_context, ssl.SSLContext)
    assert creds.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert creds.authorization() is None


def test_a_token_file_is_read_relative_to_the_kubeconfig_and_again_as_it_rotates(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("first\n")
    path = kubeconfig(
        tmp_path / "config",
        clusters=[("c", {"server": "https://c.example", "insecure-skip-tls-verify": True})],
        users=[("u", {"tokenFile": "token"})],
        contexts=[("c", {"cluster": "c", "user": "u"})],
        current="c",
    )
    creds = load_credentials(str(path))
    assert creds.authorization() == "Bearer first"
    (tmp_path / "token").write_text("second\n")
    assert creds.authorization() == "Bearer first"  # re-read once a minute, not at every request
    monkeypatch.setattr(credentials, "TOKEN_REREAD_SECONDS", 0)
    assert creds.authorization() == "Bearer second"


def test_in_a_pod_the_service_account_is_used_and_its_token_re_read(tmp_path, monkeypatch):
    account = tmp_path / "serviceaccount"
    account.mkdir()
    tls = self_signed(tmp_path / "tls", ["localhost"])
    (account / "ca.crt").write_bytes(tls.ca.read_bytes())
    (account / "token").write_text("sa-1")
    (account / "namespace").write_text("berth-system")
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    creds = load_credentials()
    assert (creds.server, creds.namespace, creds.authorization()) == (
        "https://[fd00::1]:443",
        "berth-system",
        "Bearer sa-1",
    )
    (account / "token").write_text("sa-2")
    monkeypatch.setattr(credentials, "TOKEN_REREAD_SECONDS", 0)
    assert creds.authorization() == "Bearer sa-2"
    with pytest.raises(BerthError, match=r"^--context x: there is no kubeconfig"):
        load_credentials(context="x")


def exec_config(tmp_path: Path, command: Path, *args: str) -> Path:
    return kubeconfig(
        tmp_path / "config",
        clusters=[("c", {"server": "https://c.example", "insecure-skip-tls-verify": True})],
        users=[("sso", exec_user(command, *args))],
        contexts=[("c", {"cluster": "c", "user": "sso"})],
        current="c",
    )


def test_an_exec_plugin_is_run_again_before_its_credential_expires(tmp_path):
    counter = tmp_path / "runs"
    creds = load_credentials(str(exec_config(tmp_path, token_plugin(tmp_path, lifetime=2, counter=counter))))
    assert creds.authorization() == "Bearer token-1"
    assert creds.stale() is False
    expires = creds.expiration()
    assert expires is not None and expires < datetime.datetime.now(datetime.UTC) + datetime.timedelta(
        seconds=2
    )
    deadline = expires.timestamp() + 1
    while not creds.stale():
        assert datetime.datetime.now(datetime.UTC).timestamp() < deadline
        asyncio.run(asyncio.sleep(0.1))
    assert creds.authorization() == "Bearer token-2"
    assert counter.read_text() == "2"


def test_an_exec_credential_without_expiry_is_kept(tmp_path):
    counter = tmp_path / "runs"
    creds = load_credentials(
        str(exec_config(tmp_path, token_plugin(tmp_path, lifetime=None, counter=counter)))
    )
    for _ in range(3):
        assert creds.authorization() == "Bearer token-1"
    assert creds.expiration() is None and counter.read_text() == "1"


def test_a_failing_plugin_is_one_line_with_its_stderr(tmp_path):
    failing = plugin(
        tmp_path / "sso-login",
        """
        import sys
        print("error: the SSO session has expired", file=sys.stderr)
        print("run: sso login --profile dev", file=sys.stderr)
        sys.exit(3)
        """,
    )
    path = exec_config(tmp_path, failing)
    with pytest.raises(BerthError) as caught:
        load_credentials(str(path))
    assert caught.value.message == (
        f"kubeconfig {path}, context c, user sso: exec plugin '{failing}' failed: process returned 3. "
        "error: the SSO session has expired | run: sso login --profile dev"
    )


def test_a_plugin_that_is_not_installed_shows_its_install_hint(tmp_path):
    path = exec_config(tmp_path, tmp_path / "no-such-plugin")
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"]["exec"]["installHint"] = "install it with: apt-get install sso-plugin"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(BerthError) as caught:
        load_credentials(str(path))
    assert "could not run: No such file or directory (install it with: apt-get install sso-plugin)" in str(
        caught.value.message
    )


def test_a_plugin_answering_nonsense_is_named(tmp_path):
    silly = plugin(tmp_path / "silly", 'print(\'{"apiVersion": "client.authentication.k8s.io/v1"}\')\n')
    with pytest.raises(
        BerthError, match=r"exec plugin '.*silly' failed: malformed response. missing key 'kind'"
    ):
        load_credentials(str(exec_config(tmp_path, silly)))


def _at(creds: credentials.Credentials, url: str) -> credentials.Credentials:
    """The same credentials, for the scripted API server at `url` (plain HTTP on loopback)."""
    creds.server, creds.ssl_context = url, False
    return creds


def test_the_client_renews_a_credential_the_server_refuses_and_retries_once(tmp_path):
    counter = tmp_path / "runs"
    creds = load_credentials(
        str(exec_config(tmp_path, token_plugin(tmp_path, lifetime=3600, counter=counter)))
    )
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        if request.headers["Authorization"] == "Bearer token-1":
            return httpx.Response(401, json={"kind": "Status", "message": "Unauthorized"})
        return httpx.Response(200, json={"items": []})

    async def scenario():
        async with api_server(handler) as url:
            client = KubeClient(_at(creds, url))
            try:
                return await client.get("/api/v1/nodes")
            finally:
                await client.aclose()

    assert asyncio.run(scenario()) == {"items": []}
    assert seen == ["Bearer token-1", "Bearer token-2"]


def test_a_plugin_failing_later_is_an_api_error_naming_it(tmp_path):
    counter = tmp_path / "runs"
    command = token_plugin(tmp_path, lifetime=3600, counter=counter)
    creds = load_credentials(str(exec_config(tmp_path, command)))
    command.write_text("#!/bin/sh\necho 'token service unavailable' >&2\nexit 1\n")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"kind": "Status", "message": "Unauthorized"})

    async def scenario():
        async with api_server(handler) as url:
            client = KubeClient(_at(creds, url))
            try:
                await client.get("/api/v1/nodes")
            finally:
                await client.aclose()

    with pytest.raises(ApiError) as caught:
        asyncio.run(scenario())
    assert caught.value.status == 0
    assert "exec plugin" in caught.value.message and "token service unavailable" in caught.value.message


def test_the_operator_logs_in_with_the_same_credentials(tmp_path):
    counter = tmp_path / "runs"
    creds = load_credentials(
        str(exec_config(tmp_path, token_plugin(tmp_path, lifetime=600, counter=counter)))
    )
    info = connection_info(creds)
    assert (info.server, info.scheme, info.token, info.insecure) == (
        "https://c.example",
        "Bearer",
        "token-1",
        True,
    )
    # kopf logs in again before the plugin's credential expires
    assert info.expiration == creds.expiration()
    assert info.expiration < datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=600)


def test_cli_live_commands_fail_in_one_line_on_a_bad_kubeconfig(tmp_path, capsys):
    path = tmp_path / "config"
    path.write_text("clusters: [")
    pod = tmp_path / "pod.yaml"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}))
    code = cli.main(["simulate", "--live", "--kubeconfig", str(path), "--pod", str(pod)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_INVALID
    assert err.startswith(f"berth: kubeconfig {path}: not YAML") and err.count("\n") == 1
    code = cli.main(["explain", "web-0", "--live", "--kubeconfig", str(path), "--context", "x"])
    assert code == cli.EXIT_INVALID and "Traceback" not in capsys.readouterr().err


def test_kubeconfig_and_context_go_with_live(tmp_path, capsys):
    code = cli.main(["simulate", "--cluster", "examples/cluster.yaml", "--pod", "p.yaml", "--context", "x"])
    assert code == cli.EXIT_INVALID
    assert capsys.readouterr().err == "berth: --kubeconfig and --context go with --live\n"
