"""Seeded burst decisions as digests: the check that an engine change still decides as before.

    python -m bench.identity OUT [--tiny]

writes one line per decision: the cluster, the scenario, the chain, the pod's place in the burst and
the SHA-256 of the Decision (its full dict with every node's detail, the node chosen, the summary,
the events and whether it had no choice). Run it in two trees at about the same time (the weeks to a
planned reboot count from now) and compare the files: a change that only makes the engine faster
leaves them byte for byte the same.

Every scenario and chain of bench.scenarios decides a burst of 16 pods over two generated clusters
(300 nodes / 4000 pods and 1200 nodes / 9000 pods; `--tiny`: 30 / 200 and 60 / 500). Each pod is
placed where it was decided before the next one is; every fifth is asked about half the nodes, in a
shuffled order; pods carrying the excluded and preferred tags land and leave between decisions.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson

from bench.engine import pipeline_for
from bench.generate import Size, generate
from bench.scenarios import Scenario, scenarios
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.engine import decide

BURST = 16
CLUSTERS = ((Size("i1", 300, 4000), 1), (Size("i2", 1200, 9000), 2))
TINY = ((Size("t1", 30, 200), 1), (Size("t2", 60, 500), 2))


def decision_bytes(decision: Any) -> bytes:
    """Everything a Decision says, as bytes: its full dict with every node's detail, the node
    chosen, the summary, the events and whether it had no choice."""
    return (
        orjson.dumps(decision.to_dict(detail=True))
        + repr((decision.chosen, decision.summary, decision.events, decision.had_no_choice)).encode()
    )


def digests(clusters: tuple[tuple[Size, int], ...] = CLUSTERS) -> Iterator[str]:
    for size, seed in clusters:
        items = generate(size, seed=seed)["items"]
        for scenario in scenarios():
            for chain in scenario.chains:
                yield from _burst(items, size.name, scenario, chain, seed)


def _burst(items: list, cluster: str, scenario: Scenario, chain: str, seed: int) -> Iterator[str]:
    view = ClusterView(
        [node_from_k8s(o) for o in items if o["kind"] == "Node"],
        [pod_from_k8s(o) for o in items if o["kind"] == "Pod"],
    )
    for o in items:
        if o["kind"] == "PlacementPolicy":
            view.upsert_policy(o)
    pipeline = pipeline_for(chain)
    names = view.node_names()
    rng = random.Random(seed)
    base = pod_from_k8s(scenario.pod)
    for i in range(BURST):
        asked = names if i % 5 else rng.sample(names, len(names) // 2)
        pod = msgspec.structs.replace(base, name=f"{base.name}-{i}", uid=f"uid-{scenario.name}-{i}")
        decision = decide(pod, view, pipeline, candidates=asked, seed=i)
        yield f"{cluster} {scenario.name} {chain} {i} {hashlib.sha256(decision_bytes(decision)).hexdigest()}"
        if decision.chosen:
            view.add_pod(msgspec.structs.replace(pod, node_name=decision.chosen))
        if i % 7 == 3:  # a pod carrying the excluded and preferred tags lands, another leaves
            tagged = msgspec.structs.replace(
                base,
                name=f"db-{i}",
                uid=f"db-{scenario.name}-{i}",
                tags=("db", "web"),
                node_name=rng.choice(names),
            )
            view.add_pod(tagged)
        if i % 7 == 5:
            view.remove_pod(f"{base.namespace}/db-{i - 2}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.identity", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the file to write the digests to")
    parser.add_argument("--tiny", action="store_true", help="two small clusters (a smoke test)")
    args = parser.parse_args(argv)
    lines = list(digests(TINY if args.tiny else CLUSTERS))
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} decisions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
