"""A pod with no rule, filtered and bound in process over kube-scheduler's sample: warm, and cold.

    python -m bench.sampled [--shape plain|preferred|service] [--nodes 5000] [--existing 25000]
                            [--pods 600] [--steps] [--watch] [--interleaved SHARE]
                            [--without STEP,STEP...]

On the control plane (`python -m bench --only e2e --e2e-shape plain`) `berth serve`'s filter of such a
pod costs about 2.2 ms of its thread's CPU at 5000 nodes (500 names a call), where the same call in a
loop costs 0.8. Between two pods kube-scheduler, kube-apiserver and etcd run on the same two cores and
evict berth's data from the caches: each dict probe per candidate, each Python object read, is then a
miss. Here the world of the plain shape (bench.e2e's nodes and running pods) is built in process and
berth's own filter and bind answer a stream of new pods, each asked about kube's sample of the nodes in
kube's rotation, in the order kube's parallel filter sends them (kube_asks: mostly one run of its
order, at times its workers' runs interleaved, as measured on the control plane), through the same
entry point as over HTTP (the request bytes in, the answer's out),
each timed until its answer is handed over to be written (what kube-scheduler's cycle waits for).
Each phase places `pods` pods: warm (one call after another), then cold (a buffer larger than the
last-level cache read before each call). The cold figures are within about 10 % of the control
plane's (bench/RESULTS.md), so they are what a change to the plain shape should move, in a minute
instead of ten. Each cold call is answered a second time, as cold, by the floor in process (an extender
in Python that decodes the call and answers the first node, as bench/floor does in Go): how fast this
machine's caches are refilled moves both alike (the same commit's cold filter measured 1.44 and 1.9 ms
on two days), so berth / floor is the figure to compare across machines. With --steps, the cold filter's
time by step of the chain. With --watch, the pod's three watch events as well (created, bound with the
placement record, started by its kubelet), each a line of the watch decoded and applied to `berth
serve`'s live cluster as the API server would store the pod: the rest of what every pod costs `berth
serve` (the control plane keeps both cores busy, so all of it counts, not only what kube-scheduler's
cycle waits for). `--shape preferred` gives every pod, running and new, scheduler_perf's preferred pod
anti-affinity to its group (the e2e benchmark's preferred shape, run there at 5000 nodes with 5000
running pods). `--shape service` is the plain shape with each group behind a Service, as a Deployment's
replicas usually are: kube's system default spreading then applies to every pod. `--without` takes the
named steps out of the chain (where an `or` is left with one member, that member stands alone): the
pods are placed by a shorter chain, so its figures are what sparing those steps' work, and only theirs,
could win at most (a plan that knew a pod's question needs none of them), not a chain to run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import importlib
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np
import orjson

from bench.e2e import GROUP_LABEL, NODE_RESOURCES, SCALE_GROUPS, _existing, _pod
from bench.stats import latency, table
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.live import LiveCluster
from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.configure import build_pipeline
from berth.engine import Step, chain
from berth.engine.chain import Member, Or, Pipe, flatten
from berth.engine.pipeline import Pipeline
from berth.extender import wire
from berth.extender.app import build_extender
from berth.extender.placer import Placer, Writes
from berth.extender.sample import feasible_nodes_to_find
from berth.extender.serve import GC_THRESHOLDS, SnapshotCluster, _no_binding

DECIDE = importlib.import_module("berth.engine.decide")  # the module: berth.engine's `decide` is the function
NAMESPACE = "sampled"
PROFILE = "berth-scheduler"
# Read before each cold call: more than any last-level cache this runs on is likely to hold.
EVICT_BYTES = 96 << 20
# bench.e2e's shapes whose every node is feasible, and the rule their pods carry.
SHAPES = {"plain": "none", "preferred": "preferred-anti-affinity", "service": "none"}
# Shapes whose groups each stand behind a Service (a Deployment's replicas usually do): kube's system
# default spreading, by hostname and zone over the Service's selector, then applies to every pod.
BEHIND_SERVICES = {"service"}
# The share of kube-scheduler's filter calls with its workers' runs interleaved, on the e2e control plane
# at 5000 nodes (317 of 1500 calls; the others one run of kube's order, 156 of them across its end).
INTERLEAVED = 0.21
HEADERS = ["shape", "nodes", "running", "names a call", "pods", "verb", "warm p50 ms", "warm p99 ms"]
HEADERS += ["cold p50 ms", "cold p99 ms", "cold / warm p50"]
STEP_HEADERS = ["step", "cold us a filter (mean)", "share"]
FLOOR_HEADERS = ["shape", "verb", "floor cold p50 ms", "floor cold p99 ms", "berth cold p50 ms"]
FLOOR_HEADERS += ["berth / floor"]


def world(nodes: int, existing: int, rule: str = "none", services: bool = False) -> ClusterView:
    """bench.e2e's world: nodes of 32 CPUs and 128 GiB, `existing` running pods in groups, each with
    `rule` toward its group; with `services`, a Service selecting each group."""
    resources = NODE_RESOURCES
    states = []
    for i in range(nodes):
        name = f"node-{i:04d}"
        obj = {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
        obj["status"] = {"capacity": resources, "allocatable": resources}
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        states.append(node_from_k8s(obj))
    pods = []
    for i in range(existing):
        body = _existing(i, nodes, NAMESPACE, PROFILE, rule, existing)
        body["metadata"]["uid"] = f"running-{i:08d}"
        body["status"] = {"phase": "Running"}
        pods.append(pod_from_k8s(body))
    view = ClusterView(states, pods)
    if services:
        for group in range(SCALE_GROUPS):
            selector = {GROUP_LABEL: f"g{group}"}
            meta = {"name": f"g{group}", "namespace": NAMESPACE}
            view.upsert_workload({"kind": "Service", "metadata": meta, "spec": {"selector": selector}})
    return view


def kube_order(view: ClusterView, seed: int = 7) -> list[str]:
    """The nodes in the order kube-scheduler's snapshot lists them: the order they were created in,
    which on a control plane that made them concurrently is no order by name."""
    names = view.node_names()
    random.Random(seed).shuffle(names)
    return names


def kube_asks(
    order: list[str],
    start: int,
    want: int,
    rng: random.Random,
    cores: int = 2,
    interleaved: float = INTERLEAVED,
) -> list[str]:
    """The names kube-scheduler's filter call sends when every node fits, in the order it sends them:
    its parallel filter (algorithm.go findNodesThatPassFilters) hands out chunks of the nodes from
    `start` in its order (min(sqrt(n), n / 16 + 1) nodes a chunk, to 16 workers) and writes each
    feasible node at the next place of the list as its check finishes, until `want` fit. On the e2e
    control plane most calls are one worker's run of kube's order (bench/HISTORY.md, "kube's order of
    the nodes, learned"): here a call is that with the odds measured there (`interleaved` of the
    calls are not: INTERLEAVED by default), otherwise
    `cores` workers' runs interleaved as they happen to finish."""
    n = len(order)
    if rng.random() >= interleaved:
        return [order[(start + k) % n] for k in range(want)]
    chunk = max(1, min(math.isqrt(n), n // 16 + 1))
    handed = 0  # chunks handed out so far
    running: list[list[int]] = []  # each running worker's nodes still to check (offsets from start)
    asked: list[str] = []
    while len(asked) < want:
        while len(running) < cores and handed * chunk < n:
            running.append(list(range(min(n, (handed + 1) * chunk) - 1, handed * chunk - 1, -1)))
            handed += 1
        worker = running[rng.randrange(len(running))]
        asked.append(order[(start + worker.pop()) % n])
        if not worker:
            running.remove(worker)
    return asked


async def _no_events(pod: Pod, events: list) -> None:
    return None


class _Watched(LiveCluster):
    """`berth serve`'s live cluster over a world built in process, its watch fed by hand."""

    def __init__(self, view: ClusterView) -> None:
        super().__init__(client=None)  # type: ignore[arg-type]  # nothing is asked of an API server
        self.view = view

    def ready(self) -> bool:
        return True

    def lag_seconds(self) -> float:
        return 0.0


def stored(body: dict[str, Any], uid: str, version: int) -> dict[str, Any]:
    """A new pod as kube-apiserver stores it and its watch sends it: identity, the defaults its
    admission adds, the two tolerations of DefaultTolerationSeconds, a Pending status."""
    meta, spec = body["metadata"], body["spec"]
    meta.update(uid=uid, resourceVersion=str(version), creationTimestamp="2026-12-06T10:00:00Z")
    for container in spec["containers"]:
        container.update(
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
            imagePullPolicy="IfNotPresent",
        )
    spec.update(
        restartPolicy="Always",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        priority=0,
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        # The pod's own tolerations, then the two DefaultTolerationSeconds adds.
        tolerations=[*spec.get("tolerations", ()), *map(_not_ready_for, ("not-ready", "unreachable"))],
    )
    body["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return body


def _not_ready_for(why: str) -> dict[str, Any]:
    key = f"node.kubernetes.io/{why}"
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


def bound(obj: dict[str, Any], node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """The pod as the watch shows it once the Binding is stored (its annotations copied onto it)."""
    out = orjson.loads(orjson.dumps(obj))
    meta = out["metadata"]
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
    meta.setdefault("annotations", {}).update(annotations)
    out["spec"]["nodeName"] = node
    out["status"]["conditions"] = [_condition("PodScheduled")]
    return out


def started(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as the watch shows it once its kubelet has started it."""
    out = orjson.loads(orjson.dumps(obj))
    meta = out["metadata"]
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
    image = out["spec"]["containers"][0]["image"]
    out["status"].update(
        phase="Running",
        hostIP="10.0.0.1",
        podIP="10.1.0.5",
        podIPs=[{"ip": "10.1.0.5"}],
        startTime="2026-12-06T10:00:02Z",
        conditions=[_condition(t) for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        containerStatuses=[
            {
                "name": "main",
                "state": {"running": {"startedAt": "2026-12-06T10:00:02Z"}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": "",
                "started": True,
            }
        ],
    )
    return out


def _condition(kind: str) -> dict[str, Any]:
    at = "2026-12-06T10:00:01Z"
    return {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}


class Evictor:
    def __init__(self, size: int = EVICT_BYTES) -> None:
        self.buffer = np.ones(size // 8)

    def __call__(self) -> None:
        self.buffer.sum()


def without_steps(pipeline: Pipeline, names: set[str]) -> Pipeline:
    """The pipeline with the named steps taken out of its chain; ValueError naming any it lacks."""
    missing = names - {s.name for s in flatten(pipeline.chain)}
    if missing:
        raise ValueError(f"not a step of the chain: {', '.join(sorted(missing))}")

    def less(member: Member) -> Member | None:
        if isinstance(member, Pipe | Or):
            members = tuple(m for m in map(less, member.members) if m is not None)
            if not members:
                return None
            return members[0] if len(members) == 1 and isinstance(member, Or) else type(member)(members)
        return None if member.name in names else member

    chain = less(pipeline.chain)
    if chain is None:
        raise ValueError("no step of the chain would be left")
    return dataclasses.replace(pipeline, chain=chain)


def run(
    nodes: int,
    existing: int,
    pods: int,
    shape: str = "plain",
    watch: bool = False,
    without: frozenset[str] | set[str] = frozenset(),
    interleaved: float = INTERLEAVED,
) -> tuple[list[list[Any]], list[list[Any]], Counter[str], list[int]]:
    """The table's rows, the floor's rows, the cold filters' time by step, and each cold filter's
    nanoseconds; `without`: steps taken out of the chain (without_steps); `interleaved`: the share of
    filter calls whose names come from kube's workers interleaved (kube_asks)."""
    rule = SHAPES[shape]
    view = world(nodes, existing, rule, services=shape in BEHIND_SERVICES)
    order = kube_order(view)
    sample = feasible_nodes_to_find(0, nodes)
    cluster = _Watched(view) if watch else SnapshotCluster(view)
    records: dict[str, dict[str, str]] = {}  # pod uid -> the annotations its Binding carried

    async def binder(pod: Pod, node: str, annotations: dict[str, str]) -> None:
        records[pod.uid] = annotations

    rules = build_pipeline(None, kube_filters=False)
    app = build_extender(
        cluster,
        rules=without_steps(rules, without) if without else rules,
        with_kube=build_pipeline(None, kube_filters=True),
        writes=Writes(bind=binder if watch else _no_binding, record=_no_events),
        kube_sample={PROFILE: 0},
    )
    verbs = app.verbs
    # As `berth serve` does: the world is long-lived, out of every later collection.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    evict = Evictor()
    start = 0
    draws = random.Random(11)  # which of kube's filter workers finishes a node first
    times: dict[tuple[str, str], list[int]] = {}

    async def ask(verb: str, request: dict[str, Any], phase: str, pod: str) -> dict[str, Any]:
        encoded = orjson.dumps(request)
        if phase == "cold":
            evict()
        began = time.perf_counter_ns()
        answered: list[int] = []
        # Timed until the answer is handed over, as the hot protocol writes it: what kube-scheduler's
        # cycle waits for (the bookkeeping after it, Placer.bookkeep, is not).
        status, answer = await verbs.answer(verb, encoded, lambda *_: answered.append(time.perf_counter_ns()))
        times.setdefault((phase, verb), []).append(answered[0] - began)
        if watch and verb == "filter":  # the bookkeeping is berth serve's work too
            times.setdefault((phase, SETTLED), []).append(time.perf_counter_ns() - answered[0])
        reply = orjson.loads(answer)
        if status != 200 or reply.get("Error"):
            raise RuntimeError(f"{verb} of {pod}: {status} {answer[:300]!r}")
        if phase == "cold":  # the floor answers the same call, as cold
            evict()
            began = time.perf_counter_ns()
            floor_answer(verb, encoded)
            times.setdefault((FLOOR, verb), []).append(time.perf_counter_ns() - began)
        return reply

    def event(verb: str, obj: dict[str, Any], phase: str) -> None:
        """A line of the pods' watch, decoded and applied as berth serve's watch does, timed."""
        line = orjson.dumps({"type": "ADDED" if verb == CREATED else "MODIFIED", "object": obj})
        if phase == "cold":
            evict()
        began = time.perf_counter_ns()
        cluster._apply_pod(orjson.loads(line)["object"])  # type: ignore[union-attr]
        times.setdefault((phase, verb), []).append(time.perf_counter_ns() - began)

    async def place(i: int, phase: str) -> None:
        nonlocal start
        body = _pod(f"p-{i:05d}", NAMESPACE, PROFILE, f"g{i % SCALE_GROUPS}", rule)
        meta = body["metadata"]
        if watch:
            event(CREATED, stored(body, f"new-{i:08d}", 3 * i + 100000), phase)
        else:
            meta["uid"] = f"new-{i:08d}"
            meta["resourceVersion"] = str(100000 + i)
            # berth serve's watch converted the pod when it was created, long before kube-scheduler
            # asks about it: the filter takes that record for the same resourceVersion
            # (convert.VersionMemo).
            pod_from_k8s(body, record=False, memo=True)
        names = kube_asks(order, start, sample, draws, interleaved=interleaved)
        start = (start + sample) % len(order)  # every node feasible: kube's next sample starts after
        kept = (await ask("filter", {"Pod": body, "NodeNames": names}, phase, meta["name"]))["NodeNames"]
        if not kept or len(kept) != 1:
            raise RuntimeError(f"{meta['name']} was not placed: {kept!r}")
        bind = {"PodName": meta["name"], "PodNamespace": NAMESPACE, "PodUID": meta["uid"], "Node": kept[0]}
        await ask("bind", bind, phase, meta["name"])
        if watch:
            shown = bound(body, kept[0], records.pop(meta["uid"]))
            event(BOUND, shown, phase)
            event(STARTED, started(shown), phase)

    async def phases() -> Counter[str]:
        for i in range(pods):
            await place(i, "warm")
        with steps_timed() as spent:
            for i in range(pods, 2 * pods):
                await place(i, "cold")
        return spent

    spent = asyncio.run(phases())
    if watch:  # each pod's parts, summed pod by pod (every part is timed once a pod, in order)
        for phase in ("warm", "cold"):
            parts = [times[(phase, verb)] for verb in ("filter", SETTLED, "bind", CREATED, BOUND, STARTED)]
            times[(phase, WHOLE)] = [sum(each) for each in zip(*parts, strict=True)]
    floors = []
    for verb in ("filter", "bind"):
        floor, cold = latency(times[(FLOOR, verb)]), latency(times[("cold", verb)])
        floors.append([shape, verb, floor.p50, floor.p99, cold.p50, cold.p50 / floor.p50])
    rows = []
    for verb in ("filter", "bind", *((SETTLED, CREATED, BOUND, STARTED, WHOLE) if watch else ())):
        warm, cold = latency(times[("warm", verb)]), latency(times[("cold", verb)])
        rows.append(
            [
                shape,
                nodes,
                existing,
                sample,
                pods,
                verb,
                warm.p50,
                warm.p99,
                cold.p50,
                cold.p99,
                cold.p50 / warm.p50,
            ]
        )
    return rows, floors, spent, times[("cold", "filter")]


_FLOOR_DECODERS = {
    "filter": msgspec.json.Decoder(wire.ExtenderArgs),
    "bind": msgspec.json.Decoder(wire.ExtenderBindingArgs),
}


def floor_answer(verb: str, body: bytes) -> bytes:
    """The in-process floor: what an extender in Python that does no work of its own pays for a
    call (bench/floor's in Go, with the caches as cold as berth's): the call decoded, filter
    answered with the first node asked about, bind with no error (no Binding written)."""
    args = _FLOOR_DECODERS[verb].decode(body)
    if verb == "filter":
        names = args.candidate_names()
        return wire.ENCODER.encode(wire.ExtenderFilterResult(node_names=names[:1]))
    return wire.ENCODER.encode(wire.ExtenderBindingResult())


FLOOR = "floor"
FLOOR_TITLE = (
    "The floor in process: the same calls decoded and answered by an extender that does nothing, cold"
)
CREATED, BOUND, STARTED = "watch: created", "watch: bound", "watch: started"
SETTLED = "filter: after the answer"  # Placer.bookkeep: the reservation, the decision's summary
WHOLE = "the pod, all of the above"
CANDIDATES = "(the candidates made from the names)"
REST = "(the rest: the request read, the totals and the tie, the answer)"


@contextmanager
def steps_timed() -> Iterator[Counter[str]]:
    """The nanoseconds each step of the chain takes, summed by step name, and those of making the
    candidates from the names asked about (the names' slots found in Placer.nodes_asked, the candidate set
    in the engine), while the block runs."""
    run_step, candidates, asked = chain._run_step, DECIDE._candidates, Placer.nodes_asked
    spent: Counter[str] = Counter()

    def timed_run(step: Step, *args: Any) -> Any:
        began = time.perf_counter_ns()
        try:
            return run_step(step, *args)
        finally:
            spent[step.name] += time.perf_counter_ns() - began

    def timed_candidates(*args: Any) -> Any:
        began = time.perf_counter_ns()
        try:
            return candidates(*args)
        finally:
            spent[CANDIDATES] += time.perf_counter_ns() - began

    def timed_asked(placer: Placer, args: Any) -> Any:
        began = time.perf_counter_ns()
        try:
            return asked(placer, args)
        finally:
            spent[CANDIDATES] += time.perf_counter_ns() - began

    chain._run_step, DECIDE._candidates, Placer.nodes_asked = timed_run, timed_candidates, timed_asked
    try:
        yield spent
    finally:
        chain._run_step, DECIDE._candidates, Placer.nodes_asked = run_step, candidates, asked


def step_rows(spent: Counter[str], filters_ns: list[int], top: int = 12) -> list[list[Any]]:
    """The mean cold filter's microseconds by step (the `top` most costly, then the others summed),
    the candidates and the rest, each with its share of the filter."""
    whole = sum(filters_ns)
    steps = [(n, ns) for n, ns in spent.most_common() if n != CANDIDATES]
    parts = [*steps[:top], (f"(the other {len(steps[top:])} steps)", sum(ns for _, ns in steps[top:]))]
    parts.append((CANDIDATES, spent[CANDIDATES]))
    parts.append((REST, whole - sum(spent.values())))
    return [[name, ns / len(filters_ns) / 1e3, ns / whole] for name, ns in parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sampled", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), default="plain", help="the pods' rule (bench.e2e's shape)"
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--existing", type=int, default=25000, help="running pods")
    parser.add_argument("--pods", type=int, default=600, help="new pods in each phase, warm and cold")
    parser.add_argument("--steps", action="store_true", help="the cold filter's time by step")
    parser.add_argument(
        "--watch", action="store_true", help="the pod's watch events too: created, bound, started"
    )
    parser.add_argument(
        "--interleaved",
        type=float,
        default=INTERLEAVED,
        metavar="SHARE",
        help="the share of filter calls with kube's workers interleaved, from 0 to 1 (a scale run prints "
        "its own: berth_filter_node_names_total, decoded against recalled)",
    )
    parser.add_argument(
        "--without",
        default="",
        metavar="STEP,STEP...",
        help="these steps taken out of the chain: what sparing their work could win at most",
    )
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.existing < 0 or args.pods < 1:
        parser.error("--nodes and --pods must be at least 1, --existing at least 0")
    if not 0 <= args.interleaved <= 1:
        parser.error("--interleaved: a share from 0 to 1")
    without = {name.strip() for name in args.without.split(",") if name.strip()}
    try:
        without_steps(build_pipeline(None, kube_filters=False), without)
    except ValueError as exc:
        parser.error(f"--without: {exc}")
    began = time.perf_counter()
    rows, floors, spent, filters = run(
        args.nodes,
        args.existing,
        args.pods,
        args.shape,
        watch=args.watch,
        without=without,
        interleaved=args.interleaved,
    )
    if without:
        print(f"The chain without {len(without)} of its steps: {', '.join(sorted(without))}\n")
    print(table("Kube's sample in process: a new pod, warm and cold", HEADERS, rows))
    print(table(FLOOR_TITLE, FLOOR_HEADERS, floors))
    if args.steps:
        print(table("Where the cold filter's time goes", STEP_HEADERS, step_rows(spent, filters)))
    print(f"total {time.perf_counter() - began:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
