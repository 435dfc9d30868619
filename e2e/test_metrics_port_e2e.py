"""The extender's metrics port on the chart's cluster (conftest.py): its processes run on this machine as
the chart's containers would, so "outside the pod" is any address of the machine but loopback.

- the verbs' port takes connections on 127.0.0.1 only, whatever address is tried;
- the metrics port answers /bind and /filter with 404, the health endpoints without a token, and
  /metrics only to a bearer token the real API server authenticates (TokenReview) for a user it allows to
  get /metrics (SubjectAccessReview): the chart's ClusterRole berth-metrics-reader, bound as
  metrics.readers would bind it;
- every series the chart's alerts and dashboard read is exported by the running extender or by the
  running kube-scheduler of the chart's configuration.
"""

from __future__ import annotations

import re
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import CHART_NAMESPACE, SCHEDULER, Cluster
from stack import until

INSECURE = ssl.create_default_context()
INSECURE.check_hostname, INSECURE.verify_mode = False, ssl.CERT_NONE


def _own_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: the route picks the machine's address
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def _get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        url, headers=headers, method=method, data=b"{}" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(request, timeout=5, context=INSECURE) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def outside(cluster: Cluster) -> str:
    """The machine's own address beyond loopback; loopback on a machine that has none (the metrics
    port answers the same there, and the verbs port's socket is checked directly)."""
    return _own_address() or "127.0.0.1"


def _listening_on(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at `port` (Linux's /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        host, _, at = fields[1].partition(":")
        if fields[3] == "0A" and int(at, 16) == port:  # 0A: LISTEN
            out.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    return out


def test_the_verbs_port_refuses_every_address_but_loopback(cluster: Cluster, outside: str):
    port = int(cluster.extender_url.rsplit(":", 1)[1])
    assert _listening_on(port) == {"127.0.0.1"}
    if outside != "127.0.0.1":
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((outside, port), timeout=3).close()
    socket.create_connection(("127.0.0.1", port), timeout=3).close()  # kube-scheduler's way in


@pytest.mark.parametrize("verb", ["bind", "filter", "prioritize", "preempt", "simulate"])
def test_the_metrics_port_does_not_serve_the_verbs(cluster: Cluster, outside: str, verb: str):
    status, _ = _get(f"https://{outside}:{cluster.metrics_port}/{verb}", method="POST")
    assert status == 404


def test_the_health_endpoints_answer_the_kubelet_without_a_token(cluster: Cluster, outside: str):
    for path in ("/healthz", "/livez", "/readyz"):
        assert _get(f"https://{outside}:{cluster.metrics_port}{path}")[0] == 200


def test_metrics_answer_only_a_token_the_api_server_allows_to_get_metrics(cluster: Cluster, outside: str):
    url = f"https://{outside}:{cluster.metrics_port}/metrics"
    cluster.kubectl("create", "namespace", "monitoring")
    cluster.kubectl("create", "serviceaccount", "prometheus", "-n", "monitoring")
    token = cluster.kubectl("create", "token", "prometheus", "-n", "monitoring").stdout.strip()
    assert _get(url)[0] == 401
    assert _get(url, "not-a-token")[0] == 401
    status, body = _get(url, token)
    assert status == 403 and "system:serviceaccount:monitoring:prometheus may not get /metrics" in body
    # what metrics.readers renders: the subject bound to the chart's ClusterRole
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "prometheus-reads-berth",
        "--clusterrole=berth-metrics-reader",
        "--serviceaccount=monitoring:prometheus",
    )
    # the refusal is remembered for up to 10 s, as kube's delegating authorizer does
    status, body = until(
        "the bound token allowed", lambda: (r := _get(url, token))[0] == 200 and r, timeout=30
    )
    assert "berth_cache_ready 1.0" in body


def _scheduler_metrics(cluster: Cluster) -> str:
    log = (cluster.cp.logs / f"{SCHEDULER}.log").read_text()
    port = next(a.split("=")[1] for a in log.splitlines()[0].split() if a.startswith("--secure-port="))
    return _get(f"https://127.0.0.1:{port}/metrics")[1]  # the e2e scheduler allows /metrics to anyone


def test_every_series_of_the_alerts_and_the_dashboard_is_exported_by_a_running_process(
    cluster: Cluster, namespace: str
):
    from conftest import pod, render_chart

    # one pod placed, so that the decision and latency series have samples
    cluster.apply(pod("placed", namespace))
    cluster.wait_placed(namespace, ["placed"])

    text = render_chart.render(
        "--namespace",
        CHART_NAMESPACE,
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.dashboard.enabled=true",
    )
    wanted = set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", _queries(text))) - {"up"}  # up is Prometheus's
    token = cluster.kubectl("create", "token", "berth-scheduler", "-n", CHART_NAMESPACE).stdout.strip()
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "berth-reads-itself",
        "--clusterrole=berth-metrics-reader",
        f"--serviceaccount={CHART_NAMESPACE}:berth-scheduler",
        check=False,
    )
    url = f"https://127.0.0.1:{cluster.metrics_port}/metrics"
    _, berth = until(
        "the extender's own token allowed", lambda: (r := _get(url, token))[0] == 200 and r, timeout=30
    )
    exported = berth + _scheduler_metrics(cluster)
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", exported, re.M))
    # the leader gauge of berth-scheduler's kube-scheduler (named after the component, not the lease; the
    # alert tells ours apart by job), at 1: it leads
    assert 'leader_election_master_status{name="kube-scheduler"} 1' in exported
    assert wanted <= names, wanted - names


def _queries(rendered: str) -> str:
    import json

    from conftest import render_chart

    out = []
    for obj in render_chart.documents(rendered):
        if obj["kind"] == "PrometheusRule":
            out += [r["expr"] for g in obj["spec"]["groups"] for r in g["rules"]]
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-dashboard"):
            panels = json.loads(obj["data"]["berth.json"])["panels"]
            out += [t["expr"] for p in panels for t in p["targets"]]
    return "\n".join(out)
