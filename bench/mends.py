"""What each step's mend saves: the engine benchmark's bursts with the step's mend, then without it
(its answer worked out afresh whenever the state moved), the step itself timed.

    python -m bench.mends [--size large] [--decisions 300] [--rounds 4]

A step mends (Step.mend) when a pod placed since its answer was kept changes only a few nodes; a
mend is code to keep right, so it stays only where it pays (docs/engine.md, "only when measured").
Each burst is a scenario of bench.engine placed pod after pod over every node of the generated
cluster, on berth's default chain, the same decisions with the mend and without it, interleaved
round after round. What is timed is the step's run in each decision (its answer, mended, kept or
afresh, and the candidates it leaves): a whole decision varies by a quarter from burst to burst on
a shared machine, more than a step's mend can save. Decisions are the same either way (the property
tests hold every mended answer to the one worked out afresh).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.__main__ import data_dir
from bench.engine import pipeline_for, run_scenario
from bench.generate import SIZES, cluster_file
from bench.scenarios import Scenario, pod, scenarios
from berth.cluster.snapshot import load_snapshot
from berth.engine import Step, chain, flatten

GROUP = "bench-group"


def group_scenario() -> Scenario:
    """A group kept one pod per node by its own tag: each placement adds a holder of the tag the
    next pod excludes (require_without_tag's mend)."""
    affinity = {"require_without_tag": [GROUP]}
    annotations = {"berth.dev/tags": json.dumps([GROUP]), "berth.dev/affinity": json.dumps(affinity)}
    return Scenario("tag-group", pod("probe-group", "ns-000", annotations=annotations), ("default",))


def strict_scenario() -> Scenario:
    """The allocator's pod with a strict locality hint: the spread by owner stands down ("only strict
    locality requested"), so the large-server reserve sees the same candidates pod after pod."""
    locality = {"far": ["no-such-pod"], "strict": True}
    annotations = {"berth.dev/locality": json.dumps(locality)}
    labels = {"app.kubernetes.io/name": "app-0"}
    probe = pod("probe-strict", "ns-001", labels=labels, annotations=annotations)
    return Scenario("allocator-strict", probe, ("default",))


def new_app_scenario() -> Scenario:
    """The allocator's pod in a namespace with no pod yet: the spread by owner sets aside one node
    more with each pod placed."""
    probe = pod("probe-new-app", "bench-mends", labels={"app.kubernetes.io/name": "new-app"})
    return Scenario("allocator-new-app", probe, ("default",))


def mending_steps() -> list[type[Step]]:
    """The step classes of the default chain that mend, in chain order."""
    out: list[type[Step]] = []
    for step in flatten(pipeline_for("default").chain):
        if type(step).mend is not Step.mend and type(step) not in out:
            out.append(type(step))
    return out


@contextmanager
def timed(cls: type[Step], mend: bool) -> Iterator[tuple[list[int], list[bool]]]:
    """The nanoseconds each run of a `cls` step takes while the block runs, and whether each call
    of its mend gave an answer; its mend off unless `mend`."""
    own = cls.__dict__["mend"]
    run_step = chain._run_step
    spent: list[int] = []

    def timed_run(step: Step, *args: Any) -> Any:
        if type(step) is not cls:
            return run_step(step, *args)
        start = time.perf_counter_ns()
        try:
            return run_step(step, *args)
        finally:
            spent.append(time.perf_counter_ns() - start)

    def counted_mend(self: Step, *args: Any) -> Any:
        answer = own(self, *args)
        mended.append(answer is not None)
        return answer

    mended: list[bool] = []
    chain._run_step = timed_run  # type: ignore[assignment]  # looked up by name at every call
    cls.mend = counted_mend if mend else Step.mend  # type: ignore[method-assign]
    try:
        yield spent, mended
    finally:
        chain._run_step = run_step
        cls.mend = own  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mends", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="large", choices=sorted(SIZES))
    parser.add_argument("--decisions", type=int, default=300, help="decisions per burst")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)

    view = load_snapshot(cluster_file(SIZES[args.size], data_dir())).view
    gc.collect()
    gc.freeze()
    bursts = [s for s in scenarios() if s.name in ("allocator", "tag-affinity")]
    bursts += [new_app_scenario(), group_scenario(), strict_scenario()]
    # (step, scenario, mend) -> per round: (median us of the step's runs, whole decision p50 ms,
    # how many answers the mend made)
    figures: dict[tuple[str, str, bool], list[tuple[float, float, int]]] = {}
    for round_ in range(args.rounds):
        for cls in mending_steps():
            for scenario in bursts:
                for mend in (True, False) if round_ % 2 == 0 else (False, True):
                    with timed(cls, mend) as (spent, mended):
                        run = run_scenario(
                            view, scenario, "default", budget_s=1e9, max_decisions=args.decisions
                        )
                    if spent:
                        step_us = statistics.median(spent[1:] or spent) / 1000
                        figures.setdefault((cls.name, scenario.name, mend), []).append(
                            (step_us, run.latency.p50, sum(mended))
                        )
        print(f"[bench.mends] round {round_ + 1} done", file=sys.stderr, flush=True)

    print("### Each mend against its answer worked out afresh")
    print(
        f"{args.size} ({len(view.node_names())} nodes), {args.decisions} decisions per burst, "
        f"median of {args.rounds} rounds (their range)"
    )
    print(
        "| step | burst | mended answers per burst | the step's run, us: with its mend | without "
        "| decision p50 ms: with | without |"
    )
    print("|---|---|---|---|---|---|---|")
    for step, burst, mend in figures:
        if not mend:
            continue
        cells = [str(statistics.median(f[2] for f in figures[(step, burst, True)]))]
        for kind in (0, 1):
            for with_mend in (True, False):
                values = [f[kind] for f in figures[(step, burst, with_mend)]]
                fmt = "{:.0f}" if kind == 0 else "{:.3f}"
                med, low, high = (
                    fmt.format(v) for v in (statistics.median(values), min(values), max(values))
                )
                cells.append(f"{med} ({low}-{high})")
        print(f"| {step} | {burst} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
