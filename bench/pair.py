"""The engine's decisions in this tree and another commit's, in lockstep: a before/after comparison
that resolves a few per cent.

    python -m bench.pair REV [--size large] [--scenario allocator] [--chain default]
                             [--decisions 800] [--turn 20]

Runs one after the other on shared cores move by more than an engine change does: the machine's
speed changes from minute to minute, and what a decision costs depends on what ran on the core just
before it. Here two processes, one deciding with this tree and one with REV (checked out into a
temporary git worktree), sit on the same core and take turns of `--turn` decisions. Each decision is
one of a burst, as the engine benchmark makes them: a new pod of the scenario over every node, the
names found from shuffled JSON bytes (not timed), the pod placed before the next. Both processes see
the same moments of the machine. "This tree" is the working tree as it is, uncommitted changes
included. The pairing runs twice, with the trees in either order, and prints
each tree's p10 / p50 / p90 and the ratio, decision by decision, of this tree's time to REV's (below
1: this tree is faster). The same tree paired with itself gives 0.99 to 1.01 here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = 20  # decisions of each process left out of the figures


def child(tree: str, snapshot: str, scenario_name: str, chain: str) -> None:
    """One side of the pairing: read "go N" on stdin, make N decisions, write their times (ns)."""
    import gc
    import random
    import time

    import msgspec
    import orjson

    from bench.engine import pipeline_for
    from bench.scenarios import scenarios
    from berth.cluster.convert import pod_from_k8s
    from berth.cluster.snapshot import load_snapshot
    from berth.engine import decide

    loaded = sys.modules["berth"].__file__ or ""
    if not loaded.startswith(tree):
        raise SystemExit(f"bench.pair: berth came from {loaded}, not from {tree}")
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # both sides on the same core
    view = load_snapshot(Path(snapshot)).view
    gc.collect()
    gc.freeze()
    scenario = next(s for s in scenarios() if s.name == scenario_name)
    pipeline = pipeline_for(chain)
    base = pod_from_k8s(scenario.pod)
    names = view.node_names()
    order = random.Random(len(names))
    find = view.name_table().find if hasattr(view, "name_table") else None
    print("ready", flush=True)
    i = 0
    for line in sys.stdin:
        words = line.split()
        if words[0] != "go":
            break
        times = []
        for _ in range(int(words[1])):
            pod = msgspec.structs.replace(base, name=f"{base.name}-{i}", uid=f"{base.uid[:-6]}{i:06d}")
            order.shuffle(names)
            raw = orjson.dumps(names)
            asked = find(raw) if find is not None else None
            start = time.perf_counter_ns()
            decision = decide(pod, view, pipeline, candidates=asked if asked is not None else names, seed=i)
            times.append(time.perf_counter_ns() - start)
            if decision.chosen:
                view.add_pod(msgspec.structs.replace(pod, node_name=decision.chosen))
            i += 1
        print(" ".join(map(str, times)), flush=True)


def pair(trees: tuple[str, str], snapshot: Path, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """Both trees' decision times (ms), in turns on one core."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", tree, str(snapshot), args.scenario, args.chain],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": tree},
        )
        for tree in trees
    ]
    times: tuple[list[float], list[float]] = ([], [])
    try:
        for proc in procs:
            if proc.stdout is None or proc.stdout.readline().strip() != "ready":
                raise SystemExit("bench.pair: a side did not start")
        for turn in range(max(1, args.decisions // args.turn)):
            for k in (0, 1) if turn % 2 == 0 else (1, 0):
                proc = procs[k]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"go {args.turn}\n")
                proc.stdin.flush()
                times[k].extend(int(t) / 1e6 for t in proc.stdout.readline().split())
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.write("stop\n")
                proc.stdin.close()
            proc.wait()
    return times


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    at = [ordered[min(len(ordered) - 1, int(len(ordered) * q))] for q in (0.1, 0.5, 0.9)]
    return " / ".join(f"{v:.3f}" for v in at)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(*argv[1:5])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.pair", description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit to compare this tree with")
    parser.add_argument("--size", default="large", help="a bench cluster size (default large)")
    parser.add_argument("--scenario", default="allocator")
    parser.add_argument("--chain", default="default")
    parser.add_argument("--decisions", type=int, default=800, help="per tree and order (default 800)")
    parser.add_argument("--turn", type=int, default=20, help="decisions per turn (default 20)")
    args = parser.parse_args(argv)

    from bench.__main__ import data_dir
    from bench.generate import SIZES, cluster_file

    snapshot = cluster_file(SIZES[args.size], data_dir())
    with tempfile.TemporaryDirectory(prefix="berth-pair-") as work:
        other = str(Path(work) / "tree")
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", other, args.rev], check=True
        )
        try:
            here = str(ROOT)
            print(f"| order | this tree p10 / p50 / p90 ms | {args.rev} p10 / p50 / p90 ms | ratio p50 |")
            print("|---|---|---|---|")
            for order in ((other, here), (here, other)):
                first, second = pair(order, snapshot, args)
                mine, theirs = (second, first) if order[0] == other else (first, second)
                mine, theirs = mine[WARM_UP:], theirs[WARM_UP:]
                ratios = sorted(m / t for m, t in zip(mine, theirs, strict=True))
                label = f"{args.rev} first" if order[0] == other else "this tree first"
                print(
                    f"| {label} | {_quantiles(mine)} | {_quantiles(theirs)} | "
                    f"{ratios[len(ratios) // 2]:.3f} |",
                    flush=True,
                )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", other], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
