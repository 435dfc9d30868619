"""The engine benchmark: decide() in-process, one core, no HTTP.

For each cluster size: the time to read a snapshot and build the cluster index from it (parse,
convert, index), the memory the index holds per 10k pods, and for every scenario and chain
(bench.scenarios) decisions per second with per-decision latency percentiles.

Each decision is a new pod of the scenario over every node of the cluster, placed on the node it
chose before the next one is decided: a burst as the extender sees it, where each placement changes
the counters the next decision reads. The pods placed are removed after the scenario, so every
scenario starts from the same cluster.

The node names come as filter hands them to decide(): the JSON array kube-scheduler sends, in a new
order for every pod (its filters run in parallel), found in the view's name table straight from the
bytes. decide() is timed; finding the names is timed apart (`names ms`), as part of reading the
request rather than of the decision (the extender benchmark times both, over HTTP).
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import orjson

from bench.scenarios import CHAINS, Scenario, scenarios
from bench.stats import Latency, latency
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.snapshot import load_snapshot
from berth.cluster.view import ClusterView
from berth.configure import build_pipeline
from berth.engine import Pipeline, decide
from berth.vocab.alloc.config import parse_config


@dataclass(frozen=True)
class IndexFigures:
    nodes: int
    pods: int
    parse_s: float  # JSON to Python objects
    convert_s: float  # Kubernetes objects to berth's compact records
    index_s: float  # records into the ClusterView and its counters
    load_s: float  # berth.cluster.load_snapshot, end to end
    bytes_per_10k_pods: float


@dataclass(frozen=True)
class Run:
    scenario: str
    chain: str
    latency: Latency
    first_ms: float  # the first decision, with every cache cold
    candidates: int  # nodes left at the end of the chain, first decision
    names_ms: float  # finding the names in the request's bytes, p50


def pipeline_for(chain: str) -> Pipeline:
    description = CHAINS[chain]
    config = parse_config({"allocationDescription": description}) if description is not None else None
    return build_pipeline(config, kube_filters=False)


def index_figures(path: Path) -> tuple[IndexFigures, ClusterView]:
    """How long a snapshot takes to become a ClusterView, step by step and end to end; and the view."""
    gc.collect()
    start = time.perf_counter()
    items = orjson.loads(path.read_bytes())["items"]
    parsed = time.perf_counter()
    nodes = [node_from_k8s(o) for o in items if o.get("kind") == "Node"]
    pods = [pod_from_k8s(o) for o in items if o.get("kind") == "Pod"]
    converted = time.perf_counter()
    ClusterView(nodes, pods)
    indexed = time.perf_counter()
    del items
    gc.collect()
    load_start = time.perf_counter()
    view = load_snapshot(path).view
    load_s = time.perf_counter() - load_start
    figures = IndexFigures(
        nodes=len(nodes),
        pods=len(pods),
        parse_s=parsed - start,
        convert_s=converted - parsed,
        index_s=indexed - converted,
        load_s=load_s,
        bytes_per_10k_pods=index_bytes_per_10k_pods(path),
    )
    return figures, view


def index_bytes_per_10k_pods(path: Path) -> float:
    """The memory a ClusterView holds for its pods (records, counters, indexes and the strings they
    keep), per 10k pods: everything still allocated once the parsed file is dropped, less the same
    for the nodes alone."""

    def held(with_pods: bool) -> int:
        gc.collect()
        tracemalloc.start()
        items = orjson.loads(path.read_bytes())["items"]
        nodes = [node_from_k8s(o) for o in items if o.get("kind") == "Node"]
        pods = [pod_from_k8s(o) for o in items if o.get("kind") == "Pod"] if with_pods else []
        del items
        view = ClusterView(nodes, pods)
        del nodes, pods
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del view
        return size

    pods = sum(1 for o in orjson.loads(path.read_bytes())["items"] if o.get("kind") == "Pod")
    return (held(True) - held(False)) / pods * 10_000 if pods else 0.0


def run_scenario(
    view: ClusterView, scenario: Scenario, chain: str, *, budget_s: float, max_decisions: int
) -> Run:
    pipeline = pipeline_for(chain)
    base = pod_from_k8s(scenario.pod)
    names = view.node_names()
    order = random.Random(len(names))
    # An engine from before the name table (a before/after run) is handed the names as a list.
    find = view.name_table().find if hasattr(view, "name_table") else orjson.loads
    placed: list[str] = []
    samples: list[int] = []
    finding: list[int] = []
    first_ms = 0.0
    candidates = 0
    spent = 0.0
    i = 0
    try:
        while i < max_decisions and (spent < budget_s or i < 5):
            pod = msgspec.structs.replace(base, name=f"{base.name}-{i}", uid=f"{base.uid[:-6]}{i:06d}")
            order.shuffle(names)
            raw = orjson.dumps(names)
            start = time.perf_counter_ns()
            asked = find(raw)
            found = time.perf_counter_ns()
            decision = decide(pod, view, pipeline, candidates=asked if asked is not None else names, seed=i)
            elapsed = time.perf_counter_ns() - found
            finding.append(found - start)
            if i == 0:
                first_ms = elapsed / 1e6
                candidates = len(_candidate_names(decision))
            else:
                samples.append(elapsed)
            spent += elapsed / 1e9
            if decision.chosen:
                view.add_pod(msgspec.structs.replace(pod, node_name=decision.chosen))
                placed.append(pod.key)
            i += 1
    finally:
        for key in placed:
            view.remove_pod(key)
    return Run(scenario.name, chain, latency(samples), first_ms, candidates, latency(finding).p50)


def _candidate_names(decision: Any) -> list[str]:
    """The candidates, also from engines that predate Decision.candidate_names (before/after runs)."""
    if hasattr(decision, "candidate_names"):
        return decision.candidate_names()
    return [n.name for n in decision.nodes if n.candidate]


def run(path: Path, *, budget_s: float, max_decisions: int) -> tuple[IndexFigures, list[Run]]:
    figures, view = index_figures(path)
    # As the live cache does once it has synced (berth.cluster.live): the view's objects are
    # long-lived, and full collections over them would otherwise land in the latencies.
    gc.collect()
    gc.freeze()
    runs = []
    for scenario in scenarios():
        for chain in scenario.chains:
            runs.append(run_scenario(view, scenario, chain, budget_s=budget_s, max_decisions=max_decisions))
    del view
    gc.unfreeze()
    gc.collect()
    return figures, runs


def rows(size: str, figures: IndexFigures, runs: list[Run]) -> list[list[Any]]:
    return [
        [
            size,
            figures.nodes,
            figures.pods,
            r.scenario,
            r.chain,
            r.latency.per_second,
            r.latency.p50,
            r.latency.p99,
            r.latency.max,
            r.first_ms,
            r.candidates,
            r.names_ms,
        ]
        for r in runs
    ]


ROW_HEADERS = [
    "size",
    "nodes",
    "pods",
    "scenario",
    "chain",
    "decisions/s",
    "p50 ms",
    "p99 ms",
    "max ms",
    "first ms",
    "candidates",
    "names ms",
]
INDEX_HEADERS = [
    "size",
    "nodes",
    "pods",
    "parse s",
    "convert s",
    "index s",
    "load_snapshot s",
    "index MiB per 10k pods",
]


def index_row(size: str, f: IndexFigures) -> list[Any]:
    return [
        size,
        f.nodes,
        f.pods,
        f.parse_s,
        f.convert_s,
        f.index_s,
        f.load_s,
        f.bytes_per_10k_pods / 2**20,
    ]
