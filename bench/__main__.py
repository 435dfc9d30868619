"""`python -m bench`: every benchmark, printed as the Markdown tables bench/RESULTS.md holds.

    python -m bench                  the full run: engine at every size, extender at 5000 nodes,
                                     end to end at 500 nodes and 2000 pods per scenario
    python -m bench --quick          the same at a small size, in under a minute
    python -m bench --size tiny --only engine,extender      what the CI smoke test runs
    python -m bench --only audit     `berth audit` over the large snapshot, the whole process timed
    python -m bench --only watch     `berth serve`'s CPU per watched pod event, Bindings posted at a rate
    python -m bench --only state     berth's stack started on 5000 nodes and 150,000 pods (half an hour)
    python -m bench.state            the live cache listing that cluster, in process
    python -m bench --only soak      100,000 pods through berth in rounds: memory and descriptors
    python -m bench generate large --out cluster.json       a snapshot for `berth simulate`
    python -m bench.identity OUT     seeded decisions as digests: compare two trees' files

Snapshots are generated on first use into $BERTH_CACHE/bench (default ~/.cache/berth/bench).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench import engine
from bench.generate import SIZES, cluster_file, write_cluster
from bench.scenarios import scenarios
from bench.stats import table

PARTS = ("engine", "extender", "audit", "e2e", "watch", "state", "soak")
# `state` (bench.state_e2e: a control plane filled with 150,000 pods, about a quarter of an hour) and
# `soak` (bench.soak: 100,000 pods through berth in rounds) run only when asked for by name.
DEFAULT_PARTS = ("engine", "extender", "audit", "e2e", "watch")
FULL_SIZES = ("small", "medium", "large", "xlarge")
EXTENDER_SIZE = "large"
AUDIT_SIZE = "large"


def data_dir() -> Path:
    root = Path(os.environ.get("BERTH_CACHE") or Path.home() / ".cache" / "berth")
    return root / "bench"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from berth import __version__

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "berth": __version__,
        "platform": platform.platform(),
    }


def run_engine(sizes: list[str], budget_s: float, max_decisions: int, results: dict[str, Any]) -> None:
    index_rows, decision_rows = [], []
    for size in sizes:
        path = cluster_file(SIZES[size], data_dir())
        figures, runs = engine.run(path, budget_s=budget_s, max_decisions=max_decisions)
        index_rows.append(engine.index_row(size, figures))
        decision_rows += engine.rows(size, figures, runs)
        print(f"[bench] engine {size}: done", file=sys.stderr, flush=True)
    print(table("Cluster index: build time and memory", engine.INDEX_HEADERS, index_rows))
    print(table("Engine: decisions (one core, in-process)", engine.ROW_HEADERS, decision_rows))
    results["engine"] = {"index": index_rows, "decisions": decision_rows}


def run_extender(size: str, pods: int, results: dict[str, Any]) -> None:
    from bench import extender

    path = cluster_file(SIZES[size], data_dir())
    rows = []
    for chain in ("tags", "default"):
        rows += extender.run(path, SIZES[size].nodes, chain=chain, pods=pods, size=size)
        print(f"[bench] extender {size} {chain}: done", file=sys.stderr, flush=True)
    print(table("Extender over HTTP: berth against the floor", extender.HEADERS, rows))
    results["extender"] = rows


def run_audit(size: str, results: dict[str, Any]) -> None:
    from bench import audit

    path = cluster_file(SIZES[size], data_dir())
    rows = audit.run(path, size, data_dir() / "audit")
    print(table("berth audit: the whole process, snapshot load included", audit.HEADERS, rows))
    results["audit"] = rows


def run_e2e(nodes: int, pods: int, scenarios: list[str], results: dict[str, Any]) -> None:
    from bench import e2e

    rows, ratios, cpu, versions = e2e.run(nodes=nodes, pods=pods, scenarios=tuple(scenarios))
    print(table(f"End to end: {nodes} nodes, {pods} pods per scenario ({versions})", e2e.HEADERS, rows))
    print(table("End to end: ratios", e2e.RATIO_HEADERS, ratios))
    print(table("End to end: CPU milliseconds per pod, by process", e2e.CPU_HEADERS, cpu))
    results["e2e"] = {"rows": rows, "ratios": ratios, "cpu": cpu, "versions": versions}


def run_scale(
    sizes: list[tuple[int, int]],
    new: int,
    results: dict[str, Any],
    shape: str = "spread",
    *,
    floor: bool = False,
) -> None:
    from bench import e2e

    rows, ratios, versions = e2e.scale(sizes, new=new, shape=shape, floor=floor)
    title = (
        f"Scale ({shape}): {new} new pods among pods already bound, {e2e.SCALE_GROUPS} groups ({versions})"
    )
    print(table(title, e2e.SCALE_HEADERS, rows))
    against = {
        "plain": "kube-scheduler's default profile, no rule",
        "spread": "kube-scheduler's required pod anti-affinity",
        "preferred": "kube-scheduler's preferred pod anti-affinity",
        "narrow": "kube-scheduler's required pod affinity",
    }[shape]
    print(
        table(
            f"Scale ({shape}): ratios (berth-scheduler / {against})",
            e2e.SCALE_RATIO_HEADERS,
            ratios,
        )
    )
    against_floor = e2e.floor_ratios(rows)
    if against_floor:
        print(
            table(f"Scale ({shape}): against the extender protocol's floor", e2e.FLOOR_HEADERS, against_floor)
        )
    results[f"scale-{shape}" if shape != "spread" else "scale"] = {
        "rows": rows,
        "ratios": ratios,
        "versions": versions,
        **({"floor": against_floor} if against_floor else {}),
    }


def run_watch(nodes: int, pods: int, rates: tuple[float, ...], results: dict[str, Any]) -> None:
    from bench import e2e

    rows, version = e2e.watch(nodes=nodes, pods=pods, rates=rates)
    title = f"The watch alone: CPU per pod bound by a POSTed Binding, no scheduler running ({version})"
    print(table(title, e2e.WATCH_HEADERS, rows))
    results["watch"] = rows


def run_state(nodes: int, pods: int, new: int, results: dict[str, Any]) -> None:
    from bench import state_e2e

    row = state_e2e.run(nodes, pods, new)
    print(table("berth's stack started on a cluster at its limits", state_e2e.HEADERS, [row]))
    results["state"] = [row]


def run_soak(rounds: int, pods: int, results: dict[str, Any]) -> None:
    from bench import soak

    rows, compared = soak.run(rounds, pods, 100)
    print(table("berth's memory and descriptors, round by round", soak.HEADERS, rows))
    print(table("The last rounds against the middle ones", soak.SUMMARY_HEADERS, compared))
    results["soak"] = {"rounds": rows, "compared": compared}


def _scale_sizes(value: str) -> list[tuple[int, int]]:
    """ "500x5000,5000x25000" -> [(500, 5000), (5000, 25000)]: nodes x pods already bound."""
    sizes = []
    for part in value.split(","):
        nodes, _, existing = part.strip().partition("x")
        sizes.append((int(nodes), int(existing)))
    return sizes


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["generate"]:
        return generate(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small size, under a minute")
    parser.add_argument("--size", action="append", choices=list(SIZES), help="engine and extender size")
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_PARTS),
        help=f"comma-separated subset of {PARTS} (default: all but state and soak)",
    )
    parser.add_argument("--e2e-nodes", type=int, help="nodes of the end-to-end cluster")
    parser.add_argument("--e2e-pods", type=int, help="pods per end-to-end scenario")
    parser.add_argument(
        "--e2e-scenarios", default="baseline,spread,pack", help="comma-separated: baseline, spread, pack"
    )
    parser.add_argument(
        "--e2e-scale",
        metavar="NxM,...",
        help="scale runs of the e2e part: N nodes with M pods already bound (default 500x5000,5000x25000; "
        "quick 30x300; none to skip)",
    )
    parser.add_argument("--e2e-new", type=int, help="new pods per scale run (default 1000; quick 100)")
    parser.add_argument(
        "--e2e-shape",
        choices=("plain", "spread", "preferred", "narrow"),
        default="spread",
        help="the scale runs' rule: plain (none), spread (required anti-affinity against "
        "require_without_tag), preferred (preferred anti-affinity, kube's term for both schedulers) or "
        "narrow (required pod affinity against require_with_tag toward holders on `existing` nodes, "
        "berth on both profiles)",
    )
    parser.add_argument(
        "--e2e-floor",
        action="store_true",
        help="add a last run to each scale size: berth-scheduler's profile with the extender protocol's "
        "floor (bench/floor, built with go on first use: an extender that answers the first node and "
        "posts the Binding, nothing else) in berth serve's place",
    )
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in only if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {PARTS}")

    quick = args.quick
    sizes = args.size or (["small"] if quick else list(FULL_SIZES))
    smoke = sizes == ["tiny"]
    budget_s, max_decisions = (0.05, 50) if smoke else (0.3, 300) if quick else (2.0, 3000)
    info = machine()
    started = time.perf_counter()
    mode = "smoke" if smoke else "quick" if quick else "full"
    print(f"# berth benchmarks ({mode} run)\n")
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + "\n")
    results: dict[str, Any] = {"machine": info, "quick": quick}
    if "engine" in only:
        run_engine(sizes, budget_s, max_decisions, results)
    if "extender" in only:
        size = args.size[0] if args.size else ("small" if quick else EXTENDER_SIZE)
        run_extender(size, 15 if smoke else 40 if quick else 300, results)
    if "audit" in only:
        run_audit(args.size[0] if args.size else ("small" if quick else AUDIT_SIZE), results)
    if "e2e" in only:
        nodes = args.e2e_nodes or (30 if quick else 500)
        pods = args.e2e_pods or (100 if quick else 2000)
        classic = [x.strip() for x in args.e2e_scenarios.split(",") if x.strip() and x.strip() != "none"]
        if classic:
            run_e2e(nodes, pods, classic, results)
        scale = args.e2e_scale or ("30x300" if quick else "500x5000,5000x25000")
        if scale != "none":
            new = args.e2e_new or (100 if quick else 1000)
            run_scale(_scale_sizes(scale), new, results, args.e2e_shape, floor=args.e2e_floor)
    if "watch" in only:
        run_watch(30 if quick else 500, 100 if quick else 1000, (100.0,) if quick else (50.0, 100.0), results)
    if "state" in only:
        run_state(100 if quick else 5000, 3000 if quick else 150_000, 100 if quick else 1000, results)
    if "soak" in only:
        run_soak(10 if quick else 100, 200 if quick else 1000, results)
    print(f"total {time.perf_counter() - started:.1f} s")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


def generate(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench generate", description="write a synthetic cluster")
    parser.add_argument("size", choices=list(SIZES))
    parser.add_argument("--out", metavar="FILE", help="default: the benchmark cache")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    size = SIZES[args.size]
    path = (
        write_cluster(size, Path(args.out), args.seed)
        if args.out
        else cluster_file(size, data_dir(), args.seed)
    )
    pods = path.with_name(path.stem + "-pods.yaml")
    pods.write_text(yaml.safe_dump_all([s.pod for s in scenarios()], sort_keys=False))
    print(f"{path}: {size.nodes} nodes, {size.pods} pods (seed {args.seed})")
    print(f"{pods}: the benchmark's pods; berth simulate --cluster {path} --pod {pods}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
