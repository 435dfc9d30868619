"""berth at Kubernetes' limits, on a control plane: a cluster of 5000 nodes and 150,000 bound pods, and
berth's stack started on it as after an upgrade.

    python -m bench.state_e2e [--nodes 5000] [--pods 150000] [--new 1000]
    python -m bench --only state       the same, at 5000 x 150000 (quick: 100 x 3000)

The pods are bench.state's shapes, created bound (spec.nodeName; no kubelet runs them): a third with
berth tags and tag affinity, a third governed by a MAX_N_PER_HOST PlacementPolicy of their namespace, a
third plain, each with a ReplicaSet owner, in 30 namespaces. kube-scheduler starts first, alone, as the
reference: its resident memory once it is ready (its informers synced) is what caching this cluster
costs Go. Then berth's stack, as e2e/stack.py runs it: berth serve (the time to /readyz 200 and its peak
resident memory), berth operator (the time until its webhooks answer, and until every policy's status
counts its governed pods; its peak memory) and berth-scheduler, as the chart runs it: two replicas with
leader election, each berth following its scheduler's Lease (the second berth serve starts once the
first is ready). Then 1000 new pods under ONE_PER_HOST in a namespace of their own: the time from their
creation to the last binding, and how many nodes hold more than one of them (0 when every pod went where
the policy allows). Last, the failover: the leading kube-scheduler and its berth killed and a pod created
at once, the seconds until the standby bound it (the Lease's expiry, 6 s in e2e/stack.py against the
chart's 15, then the standby's catch-up, then the placement) and the catch-up's own seconds; then back,
to a berth serve started again without a fence pod, which lists the cluster on taking over (the time of
a relist at this size).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))

from controlplane import ControlPlane  # noqa: E402
from stack import Stack, fence_pod  # noqa: E402

from bench.e2e import Api, create_nodes  # noqa: E402
from bench.state import GROUPS, NAMESPACES, POLICY_LABEL  # noqa: E402

HEADERS = [
    "nodes",
    "pods",
    "kube-scheduler ready s",
    "kube-scheduler RSS MiB",
    "berth serve ready s",
    "berth serve peak MiB",
    "operator webhooks s",
    "operator counted s",
    "operator peak MiB",
    "new pods",
    "bound s",
    "nodes with two",
    "failover s",
    "caught up s",
    "failover listing s",
    "listed s",
]
BURST = "burst"
MAX_PER_NODE = 64  # the most MAX_N_PER_HOST allows


def pod_body(i: int, nodes: int) -> dict[str, Any]:
    """Pod i as created: bench.state's shape and group, bound to node i % nodes."""
    shape, group = i % 3, (i // 3) % GROUPS
    workload = f"{('tagged', 'governed', 'plain')[shape]}-{group:03d}"
    template_hash = f"{group * 7919 % 10**10:010d}"
    labels = {"app.kubernetes.io/name": workload, "pod-template-hash": template_hash}
    meta: dict[str, Any] = {
        "name": f"{workload}-{template_hash}-{i:06d}",
        "namespace": f"ns-{group % NAMESPACES:02d}",
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{workload}-{template_hash}",
                "uid": f"00000000-0000-0000-{shape:04d}-{group:012d}",
                "controller": True,
            }
        ],
    }
    if shape == 0:
        meta["annotations"] = {
            "berth.dev/tags": json.dumps([workload]),
            "berth.dev/affinity": json.dumps({"prefer_with_tag": [workload]}),
        }
    elif shape == 1:
        labels[POLICY_LABEL] = "max-n"
    container = {
        "name": "main",
        "image": "registry.example/app:1.0",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
    }
    spec = {
        "schedulerName": "berth-scheduler",
        "nodeName": f"node-{i % nodes:04d}",
        "containers": [container],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def policy(namespace: str, name: str, body: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"policy": body, "selector": {"matchLabels": selector}},
    }


def memory_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) MiB of a process."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def wait(what: str, check: Any, timeout: float, every: float = 0.2) -> float:
    """Seconds until check() is true."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)
    return time.monotonic() - began


async def populate(api: Api, nodes: int, pods: int) -> None:
    await create_nodes(api, nodes)
    for namespace in [*(f"ns-{n:02d}" for n in range(NAMESPACES)), BURST]:
        await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    step = 2000
    for start in range(0, pods, step):
        stop = min(start + step, pods)
        await api.each(
            [
                ("POST", f"/api/v1/namespaces/{b['metadata']['namespace']}/pods", b, False)
                for b in (pod_body(i, nodes) for i in range(start, stop))
            ]
        )
        print(f"[bench] state: {stop}/{pods} pods created", file=sys.stderr, flush=True)


def governed_counted(cp: ControlPlane, expected: int) -> bool:
    items = cp.kubectl_json("get", "placementpolicies", "-A")["items"]
    counted = sum(
        (p.get("status") or {}).get("governedPods") or 0 for p in items if p["metadata"]["namespace"] != BURST
    )
    return counted == expected


def run(nodes: int, pods: int, new: int, timeout: float = 1800) -> list[Any]:
    with ControlPlane() as cp:
        api = Api(cp)

        async def setup() -> None:
            await populate(api, nodes, pods)
            await api.close()

        asyncio.run(setup())
        # The reference: kube-scheduler caching the same cluster, ready once its informers synced.
        began = time.monotonic()
        kube = cp.start_scheduler(ControlPlane.scheduler_config("default-scheduler"), name="reference")
        kube_ready = time.monotonic() - began
        kube_rss, _ = memory_mib(kube.pid)
        cp.kill("reference")
        # berth-scheduler as the chart runs it: two replicas, each berth following its scheduler's Lease.
        stack, standby = Stack(cp, replica="sched-a"), Stack(cp, replica="sched-b")
        for replica in (stack, standby):
            assert replica.fence_pod is not None
            cp.kubectl("apply", "-f", "-", input=json.dumps(fence_pod(replica.fence_pod)))
        cp.kubectl("apply", "-f", str(ROOT / "manifests/crds"))
        cp.kubectl("wait", "--for=condition=Established", "crd/placementpolicies.berth.dev", "--timeout=60s")
        governed = sum(1 for i in range(pods) if i % 3 == 1)
        for n in range(NAMESPACES):
            namespace = f"ns-{n:02d}"
            body = {"type": "MAX_N_PER_HOST", "max": MAX_PER_NODE}
            stack.apply(policy(namespace, "max-n", body, {POLICY_LABEL: "max-n"}))
        # As after an upgrade: berth's processes start on the cluster as it is.
        stack.extender.start()
        assert stack.extender.proc is not None
        serve_ready = wait("berth serve ready", lambda: stack.ready_status() == 200, timeout)
        standby.extender.start()
        wait("the standby's berth serve ready", lambda: standby.ready_status() == 200, timeout)
        stack.operator.start()
        assert stack.operator.proc is not None
        began = time.monotonic()
        stack.wait_webhooks(timeout=timeout)
        webhooks = time.monotonic() - began
        counted = webhooks + wait("every policy counted", lambda: governed_counted(cp, governed), timeout, 2)
        name = stack.scheduler_name
        cp.start_scheduler(stack.scheduler_config(), name=f"{name}-a", hostname="sched-a")
        wait("sched-a leading", lambda: _holder(cp).startswith("sched-a_"), timeout)
        cp.start_scheduler(standby.scheduler_config(), name=f"{name}-b", hostname="sched-b")
        stack.apply(
            policy(BURST, "one-per-host", {"type": "ONE_PER_HOST"}, {"app.kubernetes.io/name": BURST})
        )
        burst = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"b-{i:05d}", "labels": {"app.kubernetes.io/name": BURST}},
                "spec": {
                    "schedulerName": name,
                    "containers": [{"name": "main", "image": "registry.example/app:1.0"}],
                },
            }
            for i in range(new)
        ]
        began = time.monotonic()
        api = Api(cp)

        async def create() -> None:
            await api.each([("POST", f"/api/v1/namespaces/{BURST}/pods", b, False) for b in burst])

        asyncio.run(create())

        def placed() -> list[dict[str, Any]]:
            return [
                p for p in cp.kubectl_json("get", "pods", "-n", BURST)["items"] if p["spec"].get("nodeName")
            ]

        wait(f"{new} pods bound", lambda: len(placed()) >= new, timeout, 1)
        bound = time.monotonic() - began  # from the first creation
        on_nodes = [p["spec"]["nodeName"] for p in placed()]
        twice = len({n for n in on_nodes if on_nodes.count(n) > 1})
        _, serve_peak = memory_mib(stack.extender.proc.pid)
        _, operator_peak = memory_mib(stack.operator.proc.pid)
        failover, caught_up = fail_over(cp, (f"{name}-a", stack), standby, "after-failover", timeout)
        # Back to sched-a, its berth now without a fence pod: it lists the cluster again on taking over.
        listing = Stack(cp, replica="sched-a", fence=False)
        listing.extender.start()
        wait("sched-a's berth serve ready again", lambda: listing.ready_status() == 200, timeout)
        cp.start_scheduler(listing.scheduler_config(), name=f"{name}-a2", hostname="sched-a")
        time.sleep(2)  # its scheduler waiting for the Lease
        failback, listed = fail_over(cp, (f"{name}-b", standby), listing, "after-failback", timeout)
        stack.stop()
        standby.stop()
        listing.stop()
        print(
            f"[bench] state {nodes}/{pods}: kube-scheduler {kube_rss:.0f} MiB; berth serve ready in "
            f"{serve_ready:.1f} s, peak {serve_peak:.0f} MiB; operator peak {operator_peak:.0f} MiB; "
            f"{new} bound in {bound:.1f} s from their creation; failover {failover:.1f} s "
            f"(caught up in {caught_up:.2f} s), without a fence {failback:.1f} s (listed in {listed:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        return [
            nodes,
            pods,
            kube_ready,
            kube_rss,
            serve_ready,
            serve_peak,
            webhooks,
            counted,
            operator_peak,
            new,
            bound,
            twice,
            failover,
            caught_up,
            failback,
            listed,
        ]


def _holder(cp: ControlPlane) -> str:
    lease = cp.kubectl_json("get", "lease", "berth-scheduler", "-n", "kube-system", check=False)
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def fail_over(
    cp: ControlPlane, leader: tuple[str, Stack], standby: Stack, pod: str, timeout: float
) -> tuple[float, float]:
    """The leading kube-scheduler and its berth (`leader`: the scheduler's process name, its stack)
    killed (SIGKILL) and a pod created at once: the seconds until the standby's berth-scheduler bound it
    (the Lease's expiry, the standby's catch-up and the placement), and the seconds of the catch-up
    alone, by its fence or by a list, from the standby's log."""
    scheduler, stack = leader
    cp.kill(scheduler)
    stack.extender.kill()
    began = time.monotonic()
    after = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "labels": {"app.kubernetes.io/name": BURST}},
        "spec": {
            "schedulerName": stack.scheduler_name,
            "containers": [{"name": "main", "image": "registry.example/app:1.0"}],
        },
    }
    cp.kubectl("apply", "-n", BURST, "-f", "-", input=json.dumps(after))

    def bound() -> bool:
        found = cp.kubectl_json("get", "pod", pod, "-n", BURST, check=False)
        return bool((found.get("spec") or {}).get("nodeName"))

    wait(f"the standby bound {pod}", bound, timeout, 0.2)
    failover = time.monotonic() - began  # from the kill
    log = standby.extender.log.read_text()
    found = re.findall(r"(?:caught up with the watch|listed nodes and pods again) in ([0-9.]+) s", log)
    return failover, float(found[-1]) if found else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_e2e", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--new", type=int, default=1000)
    args = parser.parse_args(argv)
    from bench.stats import table

    row = run(args.nodes, args.pods, args.new)
    print(table("berth's stack started on a cluster at its limits", HEADERS, [row]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
