"""The metrics port: /metrics for scrapers the API server authorises, the health endpoints for anyone,
and never the verbs; the verbs' own listener on loopback whatever it is asked."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from berth.cluster.kubeapi import ApiError
from berth.configure import default_pipeline
from berth.errors import BerthError
from berth.extender.app import build_extender, readiness
from berth.extender.placer import Writes
from berth.extender.scrape import DelegatedAuth, NoAuth, health_app
from berth.extender.serve import SnapshotCluster, loopback
from tests.builders import node, view

ROOT = Path(__file__).resolve().parent.parent


class FakeApiServer:
    """TokenReview and SubjectAccessReview answers: tokens -> users, users allowed to get /metrics."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users, self.allowed = users, allowed
        self.calls: list[str] = []
        self.down = False

    async def post(self, path, body):
        if self.down:
            raise ApiError("POST: connection refused", status=0)
        kind = body["kind"]
        self.calls.append(kind)
        if kind == "TokenReview":
            user = self.users.get(body["spec"]["token"])
            if user is None:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": user, "groups": ["g"]}}}
        spec = body["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.allowed}}


def _port_app(auth):
    app = build_extender(
        SnapshotCluster(view(node("n1"))),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=None, record=None),
    )
    placer = app.state.placer
    front = app
    return TestClient(health_app(lambda: readiness(placer), front.state.metrics.registry, auth))


@pytest.fixture
def api():
    return FakeApiServer(
        {"prom-token": "system:serviceaccount:monitoring:prometheus", "x": "someone"},
        {"system:serviceaccount:monitoring:prometheus"},
    )


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/bind", "/preempt", "/simulate", "/docs"])
def test_the_verbs_and_simulate_are_not_served_on_the_metrics_port(api, path):
    client = _port_app(DelegatedAuth(api))
    for method in (client.post, client.get):
        answer = method(path, headers={"Authorization": "Bearer prom-token"})
        assert answer.status_code == 404
    assert api.calls == []  # not even asked about


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
def test_the_health_endpoints_answer_without_a_token_for_the_kubelet(api, path):
    answer = _port_app(DelegatedAuth(api)).get(path)
    assert answer.status_code == 200
    assert api.calls == []


def test_metrics_need_a_token_the_api_server_knows_and_a_user_allowed_to_get_metrics(api):
    client = _port_app(DelegatedAuth(api))
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Basic cHJvbTpwcm9t"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer forged"}).status_code == 401
    refused = client.get("/metrics", headers={"Authorization": "Bearer x"})
    assert refused.status_code == 403 and "someone may not get /metrics" in refused.text
    allowed = client.get("/metrics", headers={"Authorization": "Bearer prom-token"})
    assert allowed.status_code == 200 and "berth_cache_ready 1.0" in allowed.text
    assert allowed.headers["content-type"].startswith("text/plain")


def test_answers_are_cached_briefly_as_kubes_delegating_authorizer_does(api):
    now = [0.0]
    client = _port_app(DelegatedAuth(api, ttl=10, clock=lambda: now[0]))
    for _ in range(5):
        assert client.get("/metrics", headers={"Authorization": "Bearer prom-token"}).status_code == 200
    assert api.calls == ["TokenReview", "SubjectAccessReview"]
    api.allowed.clear()  # the ClusterRoleBinding removed
    now[0] = 11
    assert client.get("/metrics", headers={"Authorization": "Bearer prom-token"}).status_code == 403


def test_an_api_server_that_cannot_answer_is_a_503_and_not_remembered(api):
    client = _port_app(DelegatedAuth(api))
    api.down = True
    assert client.get("/metrics", headers={"Authorization": "Bearer prom-token"}).status_code == 503
    api.down = False
    assert client.get("/metrics", headers={"Authorization": "Bearer prom-token"}).status_code == 200


def test_without_authorisation_a_local_run_serves_metrics_to_anyone():
    assert _port_app(NoAuth()).get("/metrics").status_code == 200


def test_delegated_authorisation_over_a_snapshot_is_refused_before_anything_starts(capsys):
    from berth.cli import main

    cluster = str(ROOT / "examples/cluster.yaml")
    assert main(["serve", "--cluster", cluster, "--metrics-port", "10259"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "berth: --metrics-auth delegated asks the API server who may scrape: with --cluster, use none\n"
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_the_verbs_listen_on_a_loopback_address(host):
    assert loopback(host) == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "berth.example"])
def test_the_verbs_never_listen_beyond_loopback(host):
    with pytest.raises(BerthError, match=r"loopback only.*--metrics-port"):
        loopback(host)


def _own_address() -> str | None:
    """An address of this machine that is not loopback (the route towards a documentation network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(url: str, **kw) -> int:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2, context=insecure, **kw) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:  # not listening (yet)
        return 0


def _listening_on(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at `port` (Linux's /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        host, _, at = local.partition(":")
        if state == "0A" and int(at, 16) == port:  # 0A: LISTEN
            out.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    return out


def test_berth_serve_keeps_the_verbs_on_loopback_and_only_health_and_metrics_on_the_metrics_port(tmp_path):
    # Reached from the machine's own address when it has one beyond loopback; the listening sockets
    # are checked on any machine.
    address = _own_address() or "127.0.0.1"
    verbs, metrics = _free_port(), _free_port()
    argv = [sys.executable, "-m", "berth.cli", "serve", "--cluster", str(ROOT / "examples/cluster.yaml")]
    argv += ["--port", str(verbs), "--metrics-port", str(metrics), "--metrics-auth", "none"]
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        deadline = time.monotonic() + 30
        while _status(f"https://{address}:{metrics}/readyz") != 200:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        assert _status(f"http://127.0.0.1:{verbs}/readyz") == 200
        assert _listening_on(verbs) == {"127.0.0.1"}
        assert _listening_on(metrics) == {"0.0.0.0"}
        if address != "127.0.0.1":
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, verbs), timeout=2).close()
        bind = urllib.request.Request(f"https://{address}:{metrics}/bind", data=b"{}", method="POST")
        assert _status(bind) == 404
        assert _status(f"https://{address}:{metrics}/metrics") == 200
    finally:
        proc.terminate()
        # SIGTERM stops both listeners (uvicorn re-raises the signal once it has shut down)
        assert proc.wait(timeout=15) in (0, -signal.SIGTERM)


def test_a_snapshot_has_no_api_server_to_ask_who_may_scrape(tmp_path):
    argv = [sys.executable, "-m", "berth.cli", "serve", "--cluster", str(ROOT / "examples/cluster.yaml")]
    result = subprocess.run([*argv, "--metrics-port", "1"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "with --cluster, use none" in result.stderr


def test_verb_errors_are_counted_per_verb():
    app = build_extender(
        SnapshotCluster(view(node("n1"))),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=None, record=None),
    )
    client = TestClient(app)
    assert 'berth_extender_errors_total{verb="filter"} 0.0' in client.get("/metrics").text
    assert client.post("/filter", content=b"{not json").status_code == 400
    assert 'berth_extender_errors_total{verb="filter"} 1.0' in client.get("/metrics").text
