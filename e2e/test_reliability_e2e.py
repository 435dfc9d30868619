"""Bursts, crashes and TLS on a control plane of its own with 100 nodes.

Each burst creates 100 pods at once and checks, from the API alone, that no rule was broken and that
every pod is either placed or refused with a named reason (no pod is left without an event).

The extender here asks the API server about a placement the watch has not shown bound after
RESERVATION_SECONDS (2 s instead of the default 30 s), so every burst of this suite runs longer than the
reservation time, and the pods, which no kubelet ever starts, stay Pending far beyond it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from stack import Stack, running, until

NODES = [f"r-{i:03d}" for i in range(100)]
RESERVATION_SECONDS = 2


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running(serve_args=("--reservation-seconds", str(RESERVATION_SECONDS))) as stack:
        stack.cp.create_nodes(NODES)
        stack.wait_nodes(len(NODES))
        yield stack


_count = 0


@pytest.fixture
def ns(stack: Stack) -> str:
    global _count
    _count += 1
    name = f"r{_count}"
    stack.cp.kubectl("create", "namespace", name)
    return name


def _events(stack: Stack, ns: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in stack.cp.kubectl_json("get", "events", "-n", ns)["items"]:
        if e.get("reason") in ("FailedScheduling", "FailedPlacement", "InvalidPlacementSpec"):
            out.setdefault(e["involvedObject"]["name"], []).append(e.get("message", ""))
    return out


def _pod(name: str, ns: str, *, labels=None, annotations=None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"schedulerName": "berth-scheduler", "containers": [{"name": "c", "image": "x"}]},
    }


def _policy(name: str, ns: str, tree: dict, app: str) -> dict:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": app}}, "policy": tree},
    }


def _settle(stack: Stack, ns: str, expected_placed: int, timeout: float = 180) -> tuple[dict[str, str], dict]:
    """Wait until `expected_placed` pods are placed and every other pod has a refusal event."""
    deadline = time.monotonic() + timeout
    while True:
        pods = stack.pods(ns)
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
        events = _events(stack, ns)
        waiting = [p["metadata"]["name"] for p in pods if p["metadata"]["name"] not in placed]
        if len(placed) >= expected_placed and all(events.get(n) for n in waiting):
            return placed, {n: events[n] for n in waiting}
        if time.monotonic() > deadline:
            stuck = [n for n in waiting if not events.get(n)]
            raise AssertionError(f"{len(placed)} placed; without an event: {stuck[:10]}")
        time.sleep(0.5)


def _wait_policy_ready(stack: Stack, ns: str, name: str, timeout: float = 60) -> None:
    def ready() -> bool:
        obj = stack.cp.kubectl_json("get", "placementpolicy", name, "-n", ns)
        conditions = obj.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    until(f"policy {ns}/{name} Ready", ready, timeout, every=0.3)


def test_100_pods_at_once_under_one_per_host_on_100_nodes_land_one_per_node(stack, ns):
    labels = {"app.kubernetes.io/name": "burst", "app.kubernetes.io/version": "1"}
    stack.apply(_policy("one", ns, {"type": "ONE_PER_HOST"}, "burst"))
    _wait_policy_ready(stack, ns, "one")
    stack.apply(*(_pod(f"p{i:03d}", ns, labels=labels) for i in range(101)))
    placed, refused = _settle(stack, ns, 100)
    assert max(Counter(placed.values()).values()) == 1
    assert sorted(placed.values()) == NODES
    assert len(refused) == 1 and any("ONE_PER_HOST" in m for m in next(iter(refused.values())))


def test_a_burst_in_waves_longer_than_the_reservation_time_keeps_one_per_host(stack, ns):
    # 101 pods in 8 waves over about 10 s (5 reservation times): pods of the first waves stay Pending
    # on their nodes the whole time and must keep counting there for the later waves.
    labels = {"app.kubernetes.io/name": "waves", "app.kubernetes.io/version": "1"}
    stack.apply(_policy("one", ns, {"type": "ONE_PER_HOST"}, "waves"))
    _wait_policy_ready(stack, ns, "one")
    started = time.monotonic()
    names = [f"w{i:03d}" for i in range(101)]
    for wave in range(8):
        stack.apply(*(_pod(n, ns, labels=labels) for n in names[wave * 13 : (wave + 1) * 13]))
        time.sleep(1.25)
    assert time.monotonic() - started > 5 * RESERVATION_SECONDS
    placed, refused = _settle(stack, ns, 100)
    time.sleep(2 * RESERVATION_SECONDS)  # long past every reservation: nothing was forgotten
    assert max(Counter(placed.values()).values()) == 1
    assert sorted(placed.values()) == NODES
    assert len(refused) == 1 and any("ONE_PER_HOST" in m for m in next(iter(refused.values())))
    late = _pod("late", ns, labels=labels)
    stack.apply(late)
    _, refused = _settle(stack, ns, 100)
    assert any("ONE_PER_HOST" in m for m in refused["late"])
    assert len({p["spec"].get("nodeName") for p in stack.pods(ns) if p["spec"].get("nodeName")}) == 100


def test_100_pods_at_once_under_require_without_tag_never_share_a_node(stack, ns):
    annotations = {"berth.dev/tags": '["solo"]', "berth.dev/affinity": '{"require_without_tag": ["solo"]}'}
    stack.apply(*(_pod(f"s{i:03d}", ns, annotations=annotations) for i in range(100)))
    placed, _ = _settle(stack, ns, 100)
    assert max(Counter(placed.values()).values()) == 1


def test_250_pods_at_once_under_max_3_per_host_never_exceed_3(stack, ns):
    labels = {"app.kubernetes.io/name": "packed", "app.kubernetes.io/version": "2"}
    stack.apply(_policy("three", ns, {"type": "MAX_N_PER_HOST", "max": 3}, "packed"))
    _wait_policy_ready(stack, ns, "three")
    stack.apply(*(_pod(f"m{i:03d}", ns, labels=labels) for i in range(250)))
    placed, _ = _settle(stack, ns, 250)
    assert max(Counter(placed.values()).values()) <= 3


def _burst_with(stack: Stack, ns: str, crash: Callable[[], None], pods: int = 100) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": "crash", "app.kubernetes.io/version": "1"}
    stack.apply(_policy("one", ns, {"type": "ONE_PER_HOST"}, "crash"))
    _wait_policy_ready(stack, ns, "one")
    stack.apply(*(_pod(f"c{i:03d}", ns, labels=labels) for i in range(pods)))
    crash()  # at once: the scheduler is working through the burst
    placed, _ = _settle(stack, ns, pods, timeout=240)
    assert max(Counter(placed.values()).values()) == 1, "ONE_PER_HOST broken after the crash"
    return placed


def test_an_extender_killed_mid_burst_restarts_and_no_pod_is_lost_or_misplaced(stack, ns):
    def crash() -> None:
        stack.extender.kill()
        time.sleep(2)
        stack.extender.start()
        stack.wait_extender()

    assert len(_burst_with(stack, ns, crash)) == 100


def test_a_scheduler_killed_between_filter_and_bind_mid_burst_leaves_no_pod_misplaced(stack, ns):
    # berth reserves at filter: a scheduler that dies after filter and before bind leaves reservations
    # for pods it never binds. The restarted scheduler filters those pods again (their reservation
    # moves, it is never counted twice) and every pod still lands one per node.
    def crash() -> None:
        time.sleep(0.5)  # mid-burst
        stack.restart_scheduler()

    assert len(_burst_with(stack, ns, crash)) == 100


def test_an_api_server_and_etcd_killed_mid_burst_the_cache_is_unready_then_resyncs(stack, ns):
    seen_unready = []

    def crash() -> None:
        stack.cp.kill("kube-apiserver")
        stack.cp.kill("etcd")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not seen_unready:
            if stack.ready_status() == 503:
                seen_unready.append(True)
            time.sleep(0.2)
        stack.cp.revive("etcd")
        stack.cp.revive("kube-apiserver")

    placed = _burst_with(stack, ns, crash)
    assert seen_unready, "/readyz stayed 200 while the API server was down"
    assert len(placed) == 100
    # Pods are placed only while the cache is synced; it stays so (a watch restarted after the outage
    # may make it unready for a moment: it must be back within seconds).
    until("/readyz 200 again", lambda: stack.ready_status() == 200, timeout=20)


def test_an_operator_killed_mid_reconcile_resumes_and_every_policy_gets_its_status(stack, ns):
    policies = [_policy(f"p{i}", ns, {"type": "MAX_N_PER_HOST", "max": i + 1}, f"app{i}") for i in range(10)]
    stack.apply(*policies)
    stack.operator.kill()
    time.sleep(1)
    stack.operator.start()
    for i in range(10):
        _wait_policy_ready(stack, ns, f"p{i}")
        obj = stack.cp.kubectl_json("get", "placementpolicy", f"p{i}", "-n", ns)
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


def test_the_scheduler_reaches_an_https_extender_only_with_a_certificate_it_trusts(stack, ns):
    secure = Stack(stack.cp, https=True, scheduler="berth-tls")
    secure.extender.start()
    try:
        secure.wait_extender()
        stack.cp.start_scheduler(secure.scheduler_config(), name="berth-tls")
        pod = _pod("over-tls", ns)
        pod["spec"]["schedulerName"] = "berth-tls"
        stack.apply(pod)
        placed, _ = _settle(stack, ns, 1)
        assert placed["over-tls"] in NODES

        # The same scheduler configuration with a CA that did not sign the extender's certificate.
        wrong = yaml.safe_load(secure.scheduler_config())
        other = Stack(stack.cp, https=True, scheduler="berth-tls-other")  # makes a CA of its own
        ca_of_another = yaml.safe_load(other.scheduler_config())["extenders"][0]["tlsConfig"]["caData"]
        wrong["extenders"][0]["tlsConfig"]["caData"] = ca_of_another
        wrong["profiles"][0]["schedulerName"] = "berth-tls-wrong-ca"
        stack.cp.start_scheduler(yaml.safe_dump(wrong), name="berth-tls-wrong-ca")
        untrusted = _pod("untrusted", ns)
        untrusted["spec"]["schedulerName"] = "berth-tls-wrong-ca"
        stack.apply(untrusted)
        _, refused = _settle(stack, ns, 1)
        assert any("certificate" in m for m in refused["untrusted"])
    finally:
        secure.stop()


def test_two_operator_replicas_one_active_and_the_other_takes_over_when_it_dies(stack, ns):
    cp = stack.cp
    cp.kubectl(
        "apply", "-f", str(Path(__file__).resolve().parent.parent / "manifests/crds/kopf-peerings.yaml")
    )
    cp.kubectl("wait", "--for=condition=Established", "crd/clusterkopfpeerings.kopf.dev", "--timeout=60s")
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input="apiVersion: kopf.dev/v1\nkind: ClusterKopfPeering\nmetadata:\n  name: berth-ha\n",
    )
    stack.operator.stop()  # the standalone one of the fixture: this test runs its own pair
    replicas = []
    for priority in (200, 100):
        replica = Stack(cp, scheduler=f"operator-{priority}").operator
        replica.argv = [a for a in replica.argv if a not in ("--standalone", "--manage-webhooks")]
        replica.argv += ["--peering", "berth-ha", "--priority", str(priority)]
        replica.start()
        replicas.append(replica)
    try:
        stack.apply(_policy("first", ns, {"type": "ANY"}, "a"))
        _wait_policy_ready(stack, ns, "first")

        def last_peering_line(replica) -> str:
            lines = [
                x for x in replica.log.read_text(errors="replace").splitlines() if "engines.peering" in x
            ]
            return lines[-1] if lines else ""

        # kopf starts a replica paused until it knows its peers; the lower priority stays paused (or
        # pauses "in favour of" the higher one if it started first) while the higher one lives.
        time.sleep(5)
        assert "Resuming" in last_peering_line(replicas[0])
        assert "Resuming" not in last_peering_line(replicas[1])
        replicas[0].kill()  # the active one
        stack.apply(_policy("second", ns, {"type": "ANY"}, "b"))
        # handled by the replica that took over once the dead one's peering record lapsed (60 s)
        _wait_policy_ready(stack, ns, "second", timeout=150)
        assert "Resuming operations" in last_peering_line(replicas[1])
    finally:
        for replica in replicas:
            replica.stop()
        stack.operator.start()
        stack.wait_webhooks()
