"""Synthetic clusters for the benchmarks: seeded, so every run sees the same cluster.

A cluster is a Kubernetes `List` of Nodes, Pods and PlacementPolicies written as JSON (what
`kubectl get nodes,pods,placementpolicies -A -o json` writes), so `berth simulate --cluster`,
`berth serve --cluster` and the benchmarks all read the same file.

What it holds, scaled by the size:
- nodes `node-00000`...: three machine shapes, zones and racks, about 8% specialised (tag labels
  `tag.berth.dev/gpu` or `ssd`), 4% with traits, 1% reserved, a few head nodes, not Ready, tainted or
  with a reboot planned, and platform versions from two release lines;
- pods across namespaces `ns-000`...: each namespace runs a handful of apps (`app.kubernetes.io/name`
  and `version` labels, a `tier` and `team` label), most pods carry one to three tags from their
  namespace's pool (`berth.dev/tags`), each with requests and limits, bound to a random node;
- namespace `bench`: the PlacementPolicies of the policy benchmarks (one per policy type, each
  selecting the pods labelled `bench.berth.dev/policy: <type>`) and an app already running on a fifth of
  the nodes, so per-host policies have something to count;
- namespace `bench-zone`: ONE_PER_HOST and MAX_N_PER_HOST (64) per zone, and their app running 64 pods
  in zone-a only, so that a per-zone policy removes a fifth of the nodes, as a per-host one in `bench`.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

BENCH_NAMESPACE = "bench"
BENCH_APP = "bench-app"
ZONE_NAMESPACE = "bench-zone"
ZONE_APP = "bench-zoned"
ZONE_MAX = 64  # zone-a holds this many pods of the app: MAX_N_PER_HOST per zone refuses it
ZONE_POLICIES: dict[str, dict[str, Any]] = {
    "one-per-zone": {"type": "ONE_PER_HOST", "topologyKey": "topology.kubernetes.io/zone"},
    "max-n-per-zone": {
        "type": "MAX_N_PER_HOST",
        "max": ZONE_MAX,
        "topologyKey": "topology.kubernetes.io/zone",
    },
}
POLICY_LABEL = "bench.berth.dev/policy"
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
TAG_POOL = ("web", "db", "cache", "batch", "frontend", "backend", "queue", "search")
SHAPES = (  # cpu, memory, ephemeral-storage
    ("64", "256Gi", "1Ti"),
    ("96", "384Gi", "2Ti"),
    ("128", "512Gi", "2Ti"),
)
CONTAINER_SIZES = (  # (request cpu, request memory, limit cpu, limit memory)
    ("100m", "128Mi", "250m", "256Mi"),
    ("250m", "512Mi", "500m", "1Gi"),
    ("500m", "1Gi", "1", "2Gi"),
    ("1", "2Gi", "2", "4Gi"),
)


@dataclass(frozen=True)
class Size:
    name: str
    nodes: int
    pods: int

    @property
    def namespaces(self) -> int:
        return max(4, self.pods // 500)


SIZES = {
    size.name: size
    for size in (
        Size("tiny", 20, 400),  # the CI smoke test
        Size("small", 100, 10_000),  # `make bench-quick`
        Size("medium", 1000, 50_000),
        Size("large", 5000, 50_000),  # the targets
        Size("xlarge", 5000, 150_000),
    )
}

POLICIES: dict[str, dict[str, Any]] = {
    "any": {"type": "ANY"},
    "one-per-host": {"type": "ONE_PER_HOST"},
    "max-n-per-host": {"type": "MAX_N_PER_HOST", "max": 2},
    "match-tag": {"type": "MATCH_TAG", "tag": "ssd"},
    "no-tag": {"type": "NO_TAG"},
    "composite": {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [{"type": "MATCH_TAG", "tag": "gpu"}, {"type": "MAX_N_PER_HOST", "max": 1}],
    },
    "rule-based": {
        "type": "RULE_BASED",
        "rule": 'ctx.allocation.node.metadata[?"topology.kubernetes.io/zone"].orValue("") in '
        '["zone-a", "zone-b"] && ctx.session.nodes[?ctx.allocation.node.hostname].orValue(0) < 2',
    },
}


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def tag_pool(k: int) -> list[str]:
    """The tags the pods of namespace ns-<k> carry: four of TAG_POOL and the namespace's group tag
    (ns-000: web, db, batch, backend, group-0)."""
    return [TAG_POOL[(k + i) % len(TAG_POOL)] for i in (0, 1, 3, 5)] + [f"group-{k % 20}"]


def _node(i: int, rng: random.Random, count: int) -> dict[str, Any]:
    name = node_name(i)
    cpu, memory, disk = SHAPES[i % len(SHAPES)]
    labels = {
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
        "bench.berth.dev/rack": f"rack-{i // 40:03d}",
    }
    annotations: dict[str, str] = {}
    roll = rng.random()
    if roll < 0.05:
        labels["tag.berth.dev/ssd"] = ""
    elif roll < 0.08:
        labels["tag.berth.dev/gpu"] = ""
    if rng.random() < 0.04:
        annotations["berth.dev/traits"] = orjson.dumps({"ssd": True, "class": "fast"}).decode()
    if rng.random() < 0.01:
        labels["berth.dev/reserved"] = "true"
    if i < 3 and count >= 100:
        labels["node-role.kubernetes.io/control-plane"] = ""
    if rng.random() < 0.1:
        annotations["berth.dev/next-reboot"] = (
            f"2030-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T03:00:00Z"
        )
    kubelet = rng.choice(("v1.35.4", "v1.36.3"))
    ready = rng.random() >= 0.005
    spec: dict[str, Any] = {}
    if rng.random() < 0.01:
        spec["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    resources = {"cpu": cpu, "memory": memory, "ephemeral-storage": disk, "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "labels": labels,
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": spec,
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "nodeInfo": {"kubeletVersion": kubelet},
        },
    }


def _container(rng: random.Random) -> dict[str, Any]:
    req_cpu, req_mem, lim_cpu, lim_mem = rng.choice(CONTAINER_SIZES)
    return {
        "name": "main",
        "image": "registry.example/app:1",
        "resources": {
            "requests": {"cpu": req_cpu, "memory": req_mem},
            "limits": {"cpu": lim_cpu, "memory": lim_mem},
        },
    }


def _pod(
    namespace: str,
    name: str,
    node: str,
    rng: random.Random,
    *,
    labels: dict[str, str],
    tags: list[str] | None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "labels": labels,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if tags:
        meta["annotations"] = {"berth.dev/tags": orjson.dumps(tags).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "schedulerName": "berth-scheduler", "containers": [_container(rng)]},
        "status": {"phase": "Running"},
    }


def _namespace_pods(size: Size, rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    namespaces = [f"ns-{k:03d}" for k in range(size.namespaces)]
    # Each namespace runs a few apps and uses a few tags of the pool, one of them its own group tag.
    apps = {ns: [f"app-{a}" for a in range(rng.randint(3, 12))] for ns in namespaces}
    pools = {ns: tag_pool(k) for k, ns in enumerate(namespaces)}
    per_ns = [0] * len(namespaces)
    for _ in range(size.pods):
        k = rng.randrange(len(namespaces))
        ns = namespaces[k]
        app = rng.choice(apps[ns])
        labels = {
            "app.kubernetes.io/name": app,
            "app.kubernetes.io/version": rng.choice(("1.0", "1.1", "2.0")),
            "tier": rng.choice(("front", "middle", "back")),
            "team": f"team-{k % 7}",
        }
        tags = rng.sample(pools[ns], rng.randint(1, 3)) if rng.random() < 0.7 else None
        name = f"{app}-{per_ns[k]:05d}"
        per_ns[k] += 1
        pods.append(_pod(ns, name, node_name(rng.randrange(size.nodes)), rng, labels=labels, tags=tags))
    return pods


def _bench_namespace(size: Size, rng: random.Random) -> list[dict[str, Any]]:
    """The policies of the policy benchmarks, and pods of the app they govern on a fifth of the nodes."""
    objects: list[dict[str, Any]] = []
    for name, policy in POLICIES.items():
        objects.append(
            {
                "apiVersion": "berth.dev/v1alpha1",
                "kind": "PlacementPolicy",
                "metadata": {"name": name, "namespace": BENCH_NAMESPACE, "generation": 1},
                "spec": {"selector": {"matchLabels": {POLICY_LABEL: name}}, "policy": policy},
            }
        )
    labels = {"app.kubernetes.io/name": BENCH_APP, "app.kubernetes.io/version": "1.0"}
    for i in range(max(1, size.nodes // 5)):
        node = node_name(rng.randrange(size.nodes))
        tags = ["db"] if i % 3 == 0 else ["web"]
        objects.append(_pod(BENCH_NAMESPACE, f"{BENCH_APP}-{i:05d}", node, rng, labels=labels, tags=tags))
    return objects


def _zone_namespace(size: Size, rng: random.Random) -> list[dict[str, Any]]:
    """The per-zone policies of namespace bench-zone, and their app on a few nodes of zone-a."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": name, "namespace": ZONE_NAMESPACE, "generation": 1},
            "spec": {"selector": {"matchLabels": {POLICY_LABEL: name}}, "policy": policy},
        }
        for name, policy in ZONE_POLICIES.items()
    ]
    labels = {"app.kubernetes.io/name": ZONE_APP, "app.kubernetes.io/version": "1.0"}
    for i in range(ZONE_MAX):
        node = node_name(len(ZONES) * rng.randrange(max(1, size.nodes // len(ZONES))))  # zone-a
        objects.append(_pod(ZONE_NAMESPACE, f"{ZONE_APP}-{i:05d}", node, rng, labels=labels, tags=None))
    return objects


def generate(size: Size, seed: int = 1) -> dict[str, Any]:
    """The cluster of `size` as a Kubernetes List; the same seed gives the same cluster."""
    rng = random.Random(seed)
    nodes = [_node(i, rng, size.nodes) for i in range(size.nodes)]
    items = [*nodes, *_namespace_pods(size, rng), *_bench_namespace(size, rng), *_zone_namespace(size, rng)]
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


def write_cluster(size: Size, path: Path, seed: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(generate(size, seed)))
    return path


def cluster_file(size: Size, directory: Path, seed: int = 1) -> Path:
    """The snapshot of `size`, generated on first use and reused while the generator is unchanged."""
    path = directory / f"cluster-{size.name}-seed{seed}.json"
    stamp = path.with_suffix(".source")
    source = Path(__file__).read_bytes()
    if not path.exists() or not stamp.exists() or stamp.read_bytes() != source:
        write_cluster(size, path, seed)
        stamp.write_bytes(source)
    return path
