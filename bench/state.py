"""The live cache's cost at Kubernetes' limits, in process: memory and time to list a cluster.

    python -m bench.state [--nodes 5000] [--pods 150000]

`berth serve`'s cache (berth.cluster.live) lists the nodes and pods of a cluster from an API client that
hands it the objects as kube-apiserver stores them (identity, the defaults admission adds, bound with
berth's placement record, started by a kubelet) as the events of a streaming list, made one at a time
so that only the cache holds the cluster. The pods are a third with berth tags and tag affinity, a
third governed by a MAX_N_PER_HOST policy, a third plain, each with a ReplicaSet owner (bench.e2e's
shapes). Prints the
time to list and convert, the time to list again (as a replica taking the Lease without its fence
does), the process's resident memory before, at its peak and after (and per 10,000 pods). On a
control plane `berth serve` also holds its HTTP server and API client, and reads the JSON
from a socket: this is the cache's own share.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import resource
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from bench.sampled import bound, started, stored
from berth.cluster import lean
from berth.cluster.kubeapi import OPENED
from berth.cluster.live import INITIAL_EVENTS_END, LiveCluster

PAGE = 500
NAMESPACES = 30
GROUPS = 300  # workloads (ReplicaSets) per shape
POLICY_LABEL = "bench.berth.dev/policy"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def node_object(i: int) -> dict[str, Any]:
    name = f"node-{i:04d}"
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{i:08d}",
            "resourceVersion": "1",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "type": "kwok",
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "fake", "architecture": "amd64", "operatingSystem": "linux"},
            "phase": "Running",
        },
    }


def pod_object(i: int, nodes: int) -> dict[str, Any]:
    """Pod i: shape i % 3 (tags and affinity, under a policy, plain), its group's ReplicaSet, bound."""
    return orjson.loads(_pod_bytes(i, nodes))


def _pod_bytes(i: int, nodes: int) -> bytes:
    shape, group = i % 3, (i // 3) % GROUPS
    return (
        _template(shape, group)
        .replace(b"IDX000000", b"%06d" % i)
        .replace(b"NODE-NAME", b"node-%04d" % (i % nodes))
    )


@functools.cache
def _template(shape: int, group: int) -> bytes:
    """A stored, bound and started pod of the group as JSON, its index and node to fill in (each pod
    made from it costs the bench microseconds, not the milliseconds of building it anew)."""
    namespace = f"ns-{group % NAMESPACES:02d}"
    workload = f"{('tagged', 'governed', 'plain')[shape]}-{group:03d}"
    template_hash = f"{group * 7919 % 10**10:010d}"
    labels = {"app.kubernetes.io/name": workload, "pod-template-hash": template_hash}
    meta: dict[str, Any] = {
        "name": f"{workload}-{template_hash}-IDX000000",
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{workload}-{template_hash}",
                "uid": f"rs-{shape}-{group:06d}",
                "controller": True,
                "blockOwnerDeletion": True,
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
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
    }
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": "berth-scheduler", "containers": [container]},
    }
    body = stored(body, "uid-IDX000000", 10)
    record = {"berth.dev/placement": '{"node":"x","score":1,"top":[["x",1]],"feasible":40,"noChoice":false}'}
    pod = started(bound(body, "NODE-NAME", record))
    pod["metadata"]["resourceVersion"] = "1IDX000000"  # each pod its own, as etcd numbers writes
    pod["metadata"]["managedFields"] = managed_fields(pod)
    return orjson.dumps(pod)


def managed_fields(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """What kube-apiserver keeps of who set which field, as it lists every pod: the controller's
    create, the scheduler's binding, the kubelet's status (about a kilobyte and a half of JSON)."""

    def fields(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {f"f:{k}": fields(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return {
                f'k:{{"name":"{v.get("name", i)}"}}': fields(v)
                for i, v in enumerate(obj)
                if isinstance(v, dict)
            }
        return {}

    at = "2026-12-06T10:00:00Z"
    meta = {k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations", "ownerReferences")}
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": at,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields({"metadata": meta, "spec": pod["spec"]}),
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": at,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {}}},
            "subresource": "status",
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": at,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields({"status": pod["status"]}),
            "subresource": "status",
        },
    ]


class PagedClient:
    """The part of berth's API client the cache lists with, serving generated objects as a streaming
    list's events (or JSON pages) decoded as the client decodes them; other watches never send
    anything (the bench measures the list)."""

    def __init__(self, nodes: int, pods: int) -> None:
        self.nodes, self.pods = nodes, pods
        self.bytes = 0

    def _objects(self, path: str) -> tuple[int, Any]:
        return {
            "/api/v1/nodes": (self.nodes, lambda i: orjson.dumps(node_object(i))),
            "/api/v1/pods": (self.pods, lambda i: _pod_bytes(i, self.nodes)),
        }.get(path, (0, None))

    async def pages(
        self, path: str, params: dict[str, Any] | None = None, limit: int = PAGE
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        count, make = self._objects(path)
        if make is None:
            yield [], "1"
            return
        for start in range(0, max(count, 1), limit):
            objects = b",".join(make(i) for i in range(start, min(start + limit, count)))
            raw = b'{"items":[' + objects + b"]}"
            self.bytes += len(raw)
            page = lean.page(raw)  # as berth's API client decodes a page
            last = start + limit >= count
            yield page["items"], "100" if last else ""
            await asyncio.sleep(0)

    async def watch(self, path: str, params: dict[str, Any], **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        """A streaming list (sendInitialEvents) as kube-apiserver sends it, each event decoded as the
        client decodes it; any other watch never sends anything."""
        count, make = self._objects(path)
        if params.get("sendInitialEvents") == "true":
            yield {"type": OPENED}
            for i in range(count):
                raw = b'{"type":"ADDED","object":' + make(i) + b"}"
                self.bytes += len(raw)
                yield lean.event(raw)
            end = {"resourceVersion": "100", "annotations": {INITIAL_EVENTS_END: "true"}}
            yield {"type": "BOOKMARK", "object": {"metadata": end}}
            return
        await asyncio.Event().wait()
        yield {}

    async def aclose(self) -> None:
        return None


async def measure(nodes: int, pods: int) -> dict[str, float]:
    gc.collect()
    before = rss_mib()
    client = PagedClient(nodes, pods)
    live = LiveCluster(client)  # type: ignore[arg-type]
    began = time.perf_counter()
    await live.start()
    while not live.ready():
        await asyncio.sleep(0.01)
    ready = time.perf_counter() - began
    after, listed = rss_mib(), client.bytes
    # What a replica taking the Lease without its fence does: nodes and pods listed again, the
    # watch having shown every pod at the version listed.
    began = time.perf_counter()
    await live.relist()
    relisted = time.perf_counter() - began
    held = sum(1 for _ in live.view.pods())
    await live.stop()
    return {
        "nodes": len(live.view),
        "pods": held,
        "ready_s": ready,
        "relist_s": relisted,
        "rss_before_mib": before,
        "rss_peak_mib": peak_mib(),
        "rss_after_mib": after,
        "per_10k_pods_mib": (after - before) / max(held, 1) * 10_000,
        "listed_mib": listed / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    args = parser.parse_args(argv)
    f = asyncio.run(measure(args.nodes, args.pods))
    print("### The live cache listing a cluster, in process\n")
    header = ["nodes", "pods", "ready (s)", "listed again (s)", "RSS before (MiB)", "peak", "after"]
    header.append("per 10,000 pods")
    print("| " + " | ".join([*header, "JSON listed (MiB)"]) + " |")
    print("|" + "---|" * (len(header) + 1))
    cells = [f"{f['nodes']:.0f}", f"{f['pods']:.0f}", f"{f['ready_s']:.1f}", f"{f['relist_s']:.1f}"]
    cells.append(f"{f['rss_before_mib']:.0f}")
    cells += [f"{f['rss_peak_mib']:.0f}", f"{f['rss_after_mib']:.0f}", f"{f['per_10k_pods_mib']:.1f}"]
    print("| " + " | ".join([*cells, f"{f['listed_mib']:.0f}"]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
