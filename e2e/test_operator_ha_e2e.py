"""The operator as the chart runs it: two replicas in kopf peering, a certificate renewed under a running
operator. On the chart's cluster (conftest.py), whose operator process runs the chart's container
arguments (`--peering=berth`, the webhook certificate from files) with the operator ServiceAccount's
token, and serves the webhook configuration the API server calls.

- a second replica with the chart's arguments and a higher priority becomes the active one; the first
  pauses and still answers the API server's admission requests; the active one is SIGKILLed: the webhook
  never stops answering, and the paused replica resumes and reconciles a policy created after the kill.
  (In a cluster the webhook Service sends the API server to either replica; here the API server calls
  the first one's URL, so the test shows what the Service relies on: a paused replica serves the
  webhook, and losing the other one costs no admission.)
- the certificate files are replaced the way the kubelet updates a Secret volume (atomically, new
  bytes), and the same operator process presents the new certificate within seconds: the API server,
  given only the new CA, gets its admission answers, and the log says the certificate was reloaded.
- a PlacementPolicy the operator handled carries no finalizer, so deleting it never waits for the
  operator; pods placed after it are counted in its status by the operator's refresh loop.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from conftest import Cluster, free_port
from cryptography import x509
from stack import until

from berth.certs import self_signed

BAD_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "ha-probe", "namespace": "default", "annotations": {"berth.dev/tags": "["}},
    "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
}


def _webhook_answers(cluster: Cluster) -> bool:
    """The operator refused a pod with a broken berth annotation (and did not fail to answer)."""
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(BAD_POD), check=False)
    return (
        result.returncode != 0 and "berth.dev/tags" in result.stderr and "failed calling" not in result.stderr
    )


def _policy(name: str, namespace: str) -> dict:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, "policy": {"type": "ONE_PER_HOST"}},
    }


def _ready(cluster: Cluster, namespace: str, name: str) -> bool:
    status = cluster.get("placementpolicy", name, namespace).get("status", {})
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))


def _peering_lines(log: Path) -> list[str]:
    return [x for x in log.read_text(errors="replace").splitlines() if "engines.peering" in x]


def test_pods_placed_after_a_policy_are_counted_in_its_status_without_a_timer_per_policy(cluster, namespace):
    from conftest import pod

    cluster.apply(_policy("counted", namespace))
    until("the policy reconciled", lambda: _ready(cluster, namespace, "counted"))
    status = cluster.get("placementpolicy", "counted", namespace)["status"]
    assert status.get("governedPods") == 0
    labels = {"app": "counted", "app.kubernetes.io/name": "counted", "app.kubernetes.io/version": "1"}
    cluster.apply(*(pod(f"counted-{i}", namespace, labels=labels) for i in range(3)))
    cluster.wait_placed(namespace, [f"counted-{i}" for i in range(3)])

    def counted() -> dict | None:
        status = cluster.get("placementpolicy", "counted", namespace)["status"]
        return status if status.get("governedPods") == 3 else None

    # the operator's refresh loop recounts the namespace whose pods changed, every 30 s
    status = until("the placed pods counted", counted, timeout=75)
    assert status["violatingPods"] == 0  # one per host: berth placed them so
    assert not cluster.get("placementpolicy", "counted", namespace)["metadata"].get("finalizers")


def test_a_paused_replica_answers_the_webhook_and_takes_over_when_the_active_one_dies(cluster, namespace):
    first_log: Path = cluster.webhook["log"]
    args = list(cluster.webhook["args"])
    port = free_port()
    args = [f"--webhook-port={port}" if a.startswith("--webhook-port=") else a for a in args]
    args = [
        f"--liveness=http://127.0.0.1:{free_port()}/healthz" if a.startswith("--liveness=") else a
        for a in args
    ]
    assert "--peering=berth" in args
    # above any priority a replica draws for itself (1 to 2**31 - 1): this one is the active one
    argv = [sys.executable, "-m", "berth.cli", *args, "--priority", str(2**31), "--kubeconfig"]
    argv.append(str(cluster.kubeconfigs["operator"]))
    log = cluster.cp.logs / "berth-operator-2.log"
    second = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ})
    try:
        until(
            "the first replica pauses in favour of the second",
            lambda: any("Pausing" in x for x in _peering_lines(first_log)[-3:]),
            timeout=60,
        )
        assert _webhook_answers(cluster)  # paused, and answering
        cluster.apply(_policy("before", namespace))
        until("the policy reconciled by the active replica", lambda: _ready(cluster, namespace, "before"))
        assert "Handler 'reconcile' succeeded" in log.read_text(errors="replace")  # the second one did

        second.kill()  # SIGKILL: its peering record stays until it lapses
        second.wait(timeout=10)
        killed = time.monotonic()
        cluster.apply(_policy("after", namespace))  # admitted through the webhook at once
        answered = 0
        while not _ready(cluster, namespace, "after"):
            assert _webhook_answers(cluster), "the webhook stopped answering"
            answered += 1
            assert time.monotonic() - killed < 150, _peering_lines(first_log)[-3:]
            time.sleep(2)
        assert answered > 0  # there was a gap before the takeover, and the webhook answered through it
        assert "Resuming" in _peering_lines(first_log)[-1]
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(timeout=10)
    # no finalizer: the policy goes at once, whoever runs
    assert not cluster.get("placementpolicy", "after", namespace)["metadata"].get("finalizers")
    cluster.kubectl("delete", "placementpolicy", "after", "before", "-n", namespace, "--timeout=20s")


def _served_serial(port: int) -> int:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        insecure.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


def test_a_certificate_replaced_in_its_files_is_served_without_a_restart(cluster: Cluster, tmp_path):
    port, certs, log = cluster.webhook["port"], cluster.webhook["certs"], cluster.webhook["log"]
    old_serial = _served_serial(port)
    renewed = self_signed(tmp_path / "renewed", ["127.0.0.1", "localhost"])
    new_serial = x509.load_pem_x509_certificate(renewed.cert.read_bytes()).serial_number
    assert new_serial != old_serial
    # the API server trusts the old and the new CA for the switch, as a CA bundle being rotated does
    config = cluster.get("validatingwebhookconfiguration", "berth")
    both = base64.b64encode(certs.ca.read_bytes() + renewed.ca.read_bytes()).decode()
    _set_ca_bundle(cluster, config, both)
    # the kubelet's update of a Secret volume: the new files appear at once, each by a rename
    for name, source in (("tls.key", renewed.key), ("tls.crt", renewed.cert)):
        staged = certs.cert.parent / f".{name}.new"
        staged.write_bytes(source.read_bytes())
        os.replace(staged, certs.cert.parent / name)
    until("the renewed certificate served", lambda: _served_serial(port) == new_serial, timeout=30)
    _set_ca_bundle(cluster, config, base64.b64encode(renewed.ca.read_bytes()).decode())  # the new CA only
    until(
        "the API server's admission answered over the renewed certificate", lambda: _webhook_answers(cluster)
    )
    text = log.read_text(errors="replace")
    assert "webhook certificate reloaded" in text
    assert "Restarting with the renewed SSL" not in text  # kopf's own restart of its listener
    (certs.ca).write_bytes(renewed.ca.read_bytes())  # later tests of the session read the CA here


def _set_ca_bundle(cluster: Cluster, config: dict, bundle: str) -> None:
    patch = [
        {"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in range(len(config["webhooks"]))
    ]
    cluster.kubectl(
        "patch", "validatingwebhookconfiguration", "berth", "--type=json", "-p", json.dumps(patch)
    )
