"""The audit benchmark: `berth audit --cluster FILE` as a user runs it, the whole process timed
(interpreter start, imports, snapshot load and every pod's decisions), with its findings.

Three cases on the same snapshot:
- *cluster*: the cluster's own rules (the synthetic pods carry instance tags only, so this is mostly
  the load and the selection of the pods to audit);
- *what-if one-per-host*: `--policy` ONE_PER_HOST over the app of namespace `bench` (a fifth of the
  node count of pods, bound at random, so some share a node);
- *what-if every pod*: `--policy` MAX_N_PER_HOST 2 in every namespace selecting every pod, so every
  pod of the cluster is audited.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.generate import BENCH_APP, BENCH_NAMESPACE

HEADERS = ["size", "nodes", "pods", "case", "pods audited", "findings", "exit", "wall s"]
APP = "app.kubernetes.io/name"


def _policy(name: str, namespace: str, tree: dict[str, Any], selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector, "policy": tree},
    }


def policy_files(directory: Path, namespaces: list[str]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    one = directory / "audit-one-per-host.yaml"
    one.write_text(
        yaml.safe_dump(
            _policy("spread", BENCH_NAMESPACE, {"type": "ONE_PER_HOST"}, {"matchLabels": {APP: BENCH_APP}})
        )
    )
    every = directory / "audit-every-pod.yaml"
    selector = {"matchExpressions": [{"key": APP, "operator": "Exists"}]}
    tree = {"type": "MAX_N_PER_HOST", "max": 2}
    every.write_text(yaml.safe_dump_all([_policy("audit-all", ns, tree, selector) for ns in namespaces]))
    return {"what-if one-per-host": one, "what-if every pod": every}


def _census(path: Path) -> tuple[int, int, list[str]]:
    """Nodes, pods and the pods' namespaces of the snapshot."""
    items = orjson.loads(path.read_bytes())["items"]
    pods = [o for o in items if o.get("kind") == "Pod"]
    nodes = sum(1 for o in items if o.get("kind") == "Node")
    return nodes, len(pods), sorted({o["metadata"]["namespace"] for o in pods})


def run(path: Path, size: str, work: Path) -> list[list[Any]]:
    nodes, pods, namespaces = _census(path)
    files = policy_files(work, namespaces)
    cases: list[tuple[str, list[str]]] = [("cluster", [])]
    cases += [(name, ["--policy", str(file)]) for name, file in files.items()]
    rows = []
    for name, extra in cases:
        command = [sys.executable, "-m", "berth.cli", "audit", "--cluster", str(path), "--output", "json"]
        start = time.perf_counter()
        result = subprocess.run([*command, *extra], capture_output=True, text=True, check=False, timeout=900)
        wall = time.perf_counter() - start
        if result.returncode not in (0, 1):
            raise RuntimeError(f"berth audit exited {result.returncode}: {result.stderr[-2000:]}")
        report = json.loads(result.stdout)
        findings = sum(len(v) for v in report["violations"].values()) + sum(
            len(report[k]) for k in ("refusedOnReschedule", "deprecated", "invalid")
        )
        rows.append([size, nodes, pods, name, report["checked"], findings, result.returncode, round(wall, 2)])
        print(f"[bench] audit {size} {name}: {wall:.1f} s", file=sys.stderr, flush=True)
    return rows
