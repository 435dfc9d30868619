"""End-to-end throughput on a local control plane (e2e/controlplane.py): pods bound per second by
kube-scheduler with berth as its extender, against kube-scheduler's built-in inter-pod affinity
expressing the same rule, on the same control plane in the same run.

| scenario | kube-scheduler, default profile | berth-scheduler + berth serve |
|---|---|---|
| baseline | plain pods | plain pods |
| spread | required pod anti-affinity to its group, per host | `require_without_tag` of its group's tag |
| pack | preferred pod affinity (weight 100) to its group, per host | `prefer_with_tag` of its group's tag |

Each group has half as many pods as there are nodes, so the spread always fits. For each run the
pods are created first with their scheduler stopped, then the scheduler is started and a watch
records when each pod is bound; throughput is (pods - 1) / (last binding - first binding), so the
scheduler's start-up is not counted. Both schedulers get the same client QPS (1000), so the API client
rate limit does not decide the result; kube-scheduler keeps its default percentageOfNodesToScore,
berth-scheduler its shipped 100. The pods of a run are deleted before the next one.

A scheduler is started once the processes have settled after the pods' creation (together under 5 %
of a core), and CPU is counted from then until the last pod is bound. Each run also reports
kube-scheduler's scheduling attempts per pod (`scheduler_schedule_attempts_total`, read from its
/metrics before it stops; 1.00 when every pod was placed at its first attempt), the scale runs the
milliseconds per pod its scheduling cycles spent finding a node (`scheduler_scheduling_algorithm_
duration_seconds`: the cycles run one pod at a time, so a run whose cycle ms/pod is near 1000 /
pods-per-second is bound by that latency, not by the CPU) and, for berth's runs,
berth serve's binds by outcome (`berth_binds_total`: confirmed/rechecked/refused/failed), so that a
run slowed by retried pods is told apart from one slowed by the machine.

The narrow shape (a rule few nodes meet) is measured from the pods' creation instead: the scheduler
is started as soon as they are created, and pods/s runs from the first creation to the last binding,
for kube-scheduler as for berth, because berth nominates such a pod on its arrival and that work must
fall inside the run it speeds up.

With `--e2e-floor` each scale size gets a last run on berth-scheduler's profile with `bench/floor` in
berth serve's place as the extender: in Go, it answers the first node asked about and posts the
Binding as kube-scheduler's own binder does, and does nothing else. Its ratio is what the extender
protocol alone leaves of kube's rate; the gap between it and berth's is berth's own cost.

`watch` (`python -m bench --only watch`) measures the one cost every placed pod brings to `berth serve`
whichever scheduler placed it: the watch event of its binding. Pods no scheduler takes are bound by
POSTed Bindings at a fixed rate, and each process's CPU per bound pod is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))

from controlplane import ControlPlane, free_port  # noqa: E402

from berth.extender.placer import BIND_OUTCOMES  # noqa: E402

HEADERS = ["scenario", "scheduler", "rule", "pods", "bound", "pods/s", "first to last s", "start to last s"]
CPU_HEADERS = [
    "scenario",
    "scheduler",
    "kube-scheduler",
    "berth serve",
    "kube-apiserver",
    "etcd",
    "total",
    "attempts/pod",
    "berth binds (confirmed/rechecked/refused/failed)",
]
# Under this key, scheduler_attempts gives the seconds kube-scheduler's cycles spent finding a node.
ALGORITHM = "algorithm seconds"
RATIO_HEADERS = ["scenario", "berth pods/s", "kube-scheduler pods/s", "ratio"]
GROUP_LABEL = "bench.berth.dev/group"
HOLDERS = "holders"  # the narrow shape's group: the few nodes the new pods must join
HANDED_OVER = "sample:handed_over"
CONCURRENCY = 32
QPS = "clientConnection:\n  kubeconfig: __KUBECONFIG__\n  qps: 1000\n  burst: 1000\n"


def _pod(name: str, namespace: str, scheduler: str, group: str, rule: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {GROUP_LABEL: group}}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "main",
                "image": "registry.example/none:1",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
    }
    term = {"labelSelector": {"matchLabels": {GROUP_LABEL: group}}, "topologyKey": "kubernetes.io/hostname"}
    if rule == "anti-affinity":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif rule == "affinity":
        preferred = [{"weight": 100, "podAffinityTerm": term}]
        spec["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    elif rule == "preferred-anti-affinity":  # scheduler_perf's SchedulingPreferredPodAntiAffinity
        preferred = [{"weight": 100, "podAffinityTerm": term}]
        spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    elif rule in ("require_without_tag", "prefer_with_tag"):
        meta["annotations"] = {
            "berth.dev/tags": json.dumps([group]),
            "berth.dev/affinity": json.dumps({rule: [group]}),
        }
    elif rule == "narrow-affinity":  # the narrow shape: next to a holder, in kube's words
        holders = {
            "labelSelector": {"matchLabels": {GROUP_LABEL: HOLDERS}},
            "topologyKey": "kubernetes.io/hostname",
        }
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [holders]}}
    elif rule == "require_with_tag":  # and in berth's
        meta["annotations"] = {"berth.dev/affinity": json.dumps({rule: [HOLDERS]})}
    elif rule == "holder":  # a holder carries the group in both words: its label and its tag
        meta["annotations"] = {"berth.dev/tags": json.dumps([HOLDERS])}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


SCENARIOS = ("baseline", "spread", "pack")
RUNS = (  # scenario, scheduler, rule
    ("baseline", "default-scheduler", "none"),
    ("baseline", "berth-scheduler", "none"),
    ("spread", "default-scheduler", "anti-affinity"),
    ("spread", "berth-scheduler", "require_without_tag"),
    ("pack", "default-scheduler", "affinity"),
    ("pack", "berth-scheduler", "prefer_with_tag"),
)


class Api:
    """The API server as admin, over a pool of keep-alive connections."""

    def __init__(self, cp: ControlPlane) -> None:
        assert cp.certs is not None and cp.server is not None
        certs = cp.certs
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        context.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
        self.client = httpx.AsyncClient(
            base_url=cp.server,
            verify=context,
            limits=httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY),
            timeout=60,
        )

    async def call(self, method: str, path: str, body: Any = None, *, patch: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json" if patch else "application/json"}
        response = await self.client.request(
            method, path, content=json.dumps(body) if body else None, headers=headers
        )
        if response.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    async def each(self, calls: list[tuple[str, str, Any, bool]]) -> None:
        """Many calls, CONCURRENCY at a time."""
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(call: tuple[str, str, Any, bool]) -> None:
            async with gate:
                await self.call(call[0], call[1], call[2], patch=call[3])

        await asyncio.gather(*(one(c) for c in calls))

    async def requests(self) -> dict[str, float]:
        """kube-apiserver's request_counts so far."""
        return request_counts((await self.client.get("/metrics")).text)

    async def close(self) -> None:
        await self.client.aclose()


def request_counts(page: str) -> dict[str, float]:
    """From kube-apiserver's /metrics: its requests by verb and resource (`apiserver_request_total`,
    every code summed), and the watch events it sent by kind with their size in KB: what a run asked of
    the API server."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            labels = sample.labels
            resource = labels.get("resource") or labels.get("kind", "?")
            if sample.name == "apiserver_request_total":
                sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
                key, amount = f"{labels.get('verb')} {resource}{sub}", sample.value
            elif sample.name == "apiserver_watch_events_total":
                key, amount = f"watch events {resource}", sample.value
            elif sample.name == "apiserver_watch_events_sizes_sum":
                key, amount = f"watch KB {resource}", sample.value / 1024
            elif sample.name == "apiserver_terminated_watchers_total":
                key, amount = f"{ENDED_WATCHES} {resource}", sample.value
            elif (
                sample.name in (BINDING_SECONDS, BINDING_COUNT)
                and labels.get("verb") == "POST"
                and labels.get("subresource") == "binding"
            ):
                key, amount = sample.name, sample.value
            else:
                continue
            counts[key] = counts.get(key, 0.0) + amount
    return counts


# kube-apiserver's own time for the Bindings (its request latency histogram): the bind's answer waits
# for it, whoever posts the Binding.
BINDING_SECONDS = "apiserver_request_duration_seconds_sum"
BINDING_COUNT = "apiserver_request_duration_seconds_count"


def binding_ms(before: dict[str, float], after: dict[str, float]) -> float | None:
    """kube-apiserver's mean time for a Binding between two readings of request_counts; None when no
    Binding was posted."""
    count = after.get(BINDING_COUNT, 0.0) - before.get(BINDING_COUNT, 0.0)
    if count <= 0:
        return None
    return (after.get(BINDING_SECONDS, 0.0) - before.get(BINDING_SECONDS, 0.0)) / count * 1000


# kube-apiserver's count of the watches it ended because the watcher did not keep up
# (`apiserver_terminated_watchers_total`): each is a watcher that must catch up, or list everything again.
ENDED_WATCHES = "watches ended, too slow:"


def lists_and_ended_watches(before: dict[str, float], after: dict[str, float]) -> str:
    """What a run cost in whole lists and watches the API server gave up on, counted per run (a pod's
    share of one would hide it): a watcher that falls behind during a run, `berth serve`'s included,
    shows here as an ended watch and, if it has to list again, as a LIST."""
    rows = []
    for key, value in sorted(after.items()):
        if key.startswith(("LIST ", ENDED_WATCHES)) and value - before.get(key, 0.0) >= 1:
            rows.append(f"{key} {value - before.get(key, 0.0):.0f}")
    return ", ".join(rows) or "none"


def requests_per_pod(before: dict[str, float], after: dict[str, float], pods: int) -> str:
    """What a run asked of the API server per pod placed, the largest first (LIST and WATCH left out
    but for the watch events sent)."""
    rows = []
    for key, value in after.items():
        per_pod = (value - before.get(key, 0.0)) / max(1, pods)
        if per_pod >= 0.01 and not key.startswith(("LIST", "WATCH", "apiserver_", ENDED_WATCHES)):
            rows.append((per_pod, key))
    return ", ".join(f"{key} {value:.2f}" for value, key in sorted(rows, reverse=True))


# What every node of the e2e benchmark's cluster has (bench.sampled builds the same nodes in process).
NODE_RESOURCES = {"cpu": "32", "memory": "128Gi", "pods": "110"}


async def create_nodes(api: Api, count: int) -> None:
    names = [f"node-{i:04d}" for i in range(count)]
    resources = NODE_RESOURCES
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "fake node (berth bench)",
    }
    await api.each(
        [
            (
                "POST",
                "/api/v1/nodes",
                {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}},
                False,
            )
            for n in names
        ]
    )
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}}
    await api.each([("PATCH", f"/api/v1/nodes/{n}/status", status, True) for n in names])
    # TaintNodesByCondition added node.kubernetes.io/not-ready at create; no controller removes it here.
    await api.each([("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, True) for n in names])


async def watch_bindings(
    api: Api, namespace: str, count: int, since: str, deadline: float, *, prefix: str = ""
) -> dict[str, float]:
    """Pod name (of the pods named `prefix`...) -> when it was first seen bound, until `count` are bound
    or the deadline passes."""
    bound: dict[str, float] = {}
    params = {"watch": "1", "resourceVersion": since, "timeoutSeconds": "600"}
    while len(bound) < count and time.monotonic() < deadline:
        try:
            async with api.client.stream(
                "GET", f"/api/v1/namespaces/{namespace}/pods", params=params, timeout=None
            ) as response:
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    name = (obj.get("metadata") or {}).get("name")
                    params["resourceVersion"] = (obj.get("metadata") or {}).get("resourceVersion", since)
                    if (
                        name
                        and name.startswith(prefix)
                        and (obj.get("spec") or {}).get("nodeName")
                        and name not in bound
                    ):
                        bound[name] = time.monotonic()
                        if len(bound) >= count:
                            break
                    if time.monotonic() >= deadline:
                        break
        except (httpx.HTTPError, json.JSONDecodeError):
            await asyncio.sleep(0.2)
    return bound


async def scheduled(
    api: Api,
    start_scheduler: Any,
    scheduler: str,
    namespace: str,
    count: int,
    timeout: float,
    processes: dict[str, int],
    *,
    prefix: str = "",
    create: Callable[[], Awaitable[None]] | None = None,
) -> tuple[list[float], dict[str, float], float, float, dict[str, float]]:
    """Once the processes have settled after the pods' creation, start the scheduler over them and
    stop it once `count` of them (named `prefix`...) are bound: when each was bound, the CPU seconds
    each process used meanwhile (kube-scheduler's includes its start-up), pods/s from the first
    binding to the last, that span, and kube-scheduler's attempts (scheduler_attempts). With `create`,
    the pods are created by it inside the measured span, the scheduler started as soon as they are:
    pods/s then runs from the first pod's creation to the last binding, and what any process does on
    the pods' arrival is counted."""
    await wait_idle(processes)
    listed = await api.call("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
    since = listed["metadata"]["resourceVersion"]
    deadline = time.monotonic() + timeout
    watcher = asyncio.create_task(watch_bindings(api, namespace, count, since, deadline, prefix=prefix))
    before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    created = time.monotonic()
    if create is not None:
        await create()
    made = time.monotonic()
    proc = await asyncio.to_thread(start_scheduler, scheduler)
    up = time.monotonic()
    try:
        bound = await watcher
        used = {name: cpu_seconds(pid) - before[name] for name, pid in processes.items()}
        used["kube-scheduler"] = cpu_seconds(proc.pid)
        attempts = await asyncio.to_thread(scheduler_attempts, proc)
    finally:
        await asyncio.to_thread(_stop, proc)
    times = sorted(bound.values())
    if create is not None and times:
        first_to_last = times[-1] - created
        print(
            f"[bench] created in {made - created:.1f} s, scheduler up {up - created:.1f} s, first bound "
            f"{times[0] - created:.1f} s, last {first_to_last:.1f} s",
            file=sys.stderr,
        )
        return times, used, len(times) / first_to_last, first_to_last, attempts
    first_to_last = times[-1] - times[0] if len(times) > 1 else math.nan
    rate = (len(times) - 1) / first_to_last if len(times) > 1 and first_to_last > 0 else math.nan
    return times, used, rate, first_to_last, attempts


async def wait_idle(processes: dict[str, int], *, idle: float = 0.05, within: float = 60.0) -> None:
    """Wait until the processes together use less than `idle` of a core over half a second: berth
    serve's watch may still be taking in thousands of pods just created, and that work belongs to
    neither scheduler's run."""
    start = time.monotonic()
    last = sum(cpu_seconds(pid) for pid in processes.values())
    while time.monotonic() - start < within:
        await asyncio.sleep(0.5)
        now = sum(cpu_seconds(pid) for pid in processes.values())
        if now - last < idle * 0.5:
            break
        last = now


def _scrape(url: str, prefix: str, context: ssl.SSLContext | None = None) -> dict[str, float]:
    """The samples of a Prometheus text page whose name starts with `prefix`, by their full name with
    labels (empty when the page cannot be read)."""
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            lines = response.read().decode().splitlines()
    except OSError:
        return {}
    return {
        name: float(value)
        for line in lines
        if line.startswith(prefix)
        for name, _, value in [line.rpartition(" ")]
    }


def scheduler_attempts(proc: subprocess.Popen) -> dict[str, float]:
    """kube-scheduler's scheduling attempts so far by result (scheduled, unschedulable, error), and
    under ALGORITHM the time its scheduling cycles spent finding a node (its own filters and
    the extender's filter included), from its /metrics on the secure port it was started with."""
    port = next((a.split("=", 1)[1] for a in proc.args if a.startswith("--secure-port=")), "0")
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    samples = _scrape(f"https://127.0.0.1:{port}/metrics", "scheduler_s", insecure)
    out: dict[str, float] = {}
    for name, value in samples.items():
        if name.startswith("scheduler_schedule_attempts_total{"):
            result = name.split('result="', 1)[1].split('"', 1)[0] if 'result="' in name else "?"
            out[result] = out.get(result, 0.0) + value
    algorithm = samples.get("scheduler_scheduling_algorithm_duration_seconds_sum")
    if out and algorithm is not None:
        out[ALGORITHM] = algorithm
    return out


def _per_pod(attempts: dict[str, float], pods: int) -> float:
    """kube-scheduler's scheduling attempts per pod (1 when every pod was placed at its first)."""
    tries = sum(v for k, v in attempts.items() if k != ALGORITHM)
    return tries / pods if tries else math.nan


def _cycle_ms(attempts: dict[str, float], pods: int) -> float:
    """Milliseconds per pod that kube-scheduler's scheduling cycles spent finding a node. The cycles
    run one pod at a time, so when this is near 1000 / pods-per-second the run is bound by the cycle's
    latency, not by the CPU."""
    return attempts[ALGORITHM] / pods * 1000 if ALGORITHM in attempts else math.nan


async def one_run(
    api: Api,
    start_scheduler: Any,
    run: tuple[str, str, str],
    index: int,
    nodes: int,
    pods: int,
    timeout: float,
    processes: dict[str, int],
    counts: Callable[[], dict[str, float]],
) -> tuple[list[Any], list[Any]]:
    scenario, scheduler, rule = run
    namespace = f"bench-{index}-{scenario}"
    await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    group_size = max(1, nodes // 2)
    groups = math.ceil(pods / group_size)
    bodies = [_pod(f"p-{i:05d}", namespace, scheduler, f"g{i % groups}", rule) for i in range(pods)]
    await api.each([("POST", f"/api/v1/namespaces/{namespace}/pods", b, False) for b in bodies])
    started = time.monotonic()
    binds_before = await asyncio.to_thread(counts)
    times, used, rate, first_to_last, attempts = await scheduled(
        api, start_scheduler, scheduler, namespace, pods, timeout, processes
    )
    binds = _binds(scheduler, binds_before, await asyncio.to_thread(counts))
    start_to_last = times[-1] - started if times else math.nan
    await api.call(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", {"gracePeriodSeconds": 0}
    )
    print(
        f"[bench] e2e {scenario} {scheduler}: {len(times)}/{pods} bound, {rate:.1f} pods/s", file=sys.stderr
    )
    per_pod = [used[k] / pods * 1000 for k in ("kube-scheduler", "berth serve", "kube-apiserver", "etcd")]
    row = [scenario, scheduler, rule, pods, len(times), rate, first_to_last, start_to_last]
    return row, [scenario, scheduler, *per_pod, sum(per_pod), _per_pod(attempts, pods), binds]


def _binds(scheduler: str, before: dict[str, float], after: dict[str, float]) -> str:
    """berth serve's binds during a berth-scheduler run by outcome, as confirmed/rechecked/refused/failed,
    and the pods it handed over past kube's sample (berth_sample_total{outcome="handed_over"})."""
    if not scheduler.startswith("berth-scheduler"):
        return "-"
    binds = "/".join(f"{after.get(o, 0) - before.get(o, 0):.0f}" for o in BIND_OUTCOMES)
    return f"{binds}, {after.get(HANDED_OVER, 0) - before.get(HANDED_OVER, 0):.0f} handed over"


ANSWER_SECONDS = "berth_extender_request_seconds_"


def answer_times(samples: dict[str, float]) -> dict[str, float]:
    """berth serve's time answering each verb so far and how many it answered, as
    `answer:<verb>:sum` and `answer:<verb>:count`, and its histogram as `answer:<verb>:le:<bound>`
    (cumulative counts), from berth_extender_request_seconds's samples (their labels read by
    prometheus_client's parser)."""
    page = "".join(f"{name} {value}\n" for name, value in samples.items())
    out = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            part, labels = sample.name.removeprefix(ANSWER_SECONDS), sample.labels
            verb = labels.get("verb")
            if part in ("sum", "count") and verb:
                out[f"answer:{verb}:{part}"] = sample.value
            elif part == "bucket" and verb and "le" in labels:
                out[f"answer:{verb}:le:{labels['le']}"] = sample.value
    return out


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of a histogram's observations, as Prometheus' histogram_quantile reads it:
    `buckets` are (upper bound, cumulative count) in order, the last +Inf; linear within the bucket
    the rank falls in (from 0 for the first), the last finite bound when it falls in +Inf. None
    without observations."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return lower


def answers(before: dict[str, float], after: dict[str, float]) -> str:
    """How long berth serve took to answer filter and bind during the run, ms from the request read to
    the answer made (berth_extender_request_seconds): the mean, and p50 and p99 read from the
    histogram's buckets as histogram_quantile reads them. The part of kube-scheduler's cycle spent in
    berth's filter, on cores the other processes share."""
    parts = []
    for verb in ("filter", "bind"):
        count = after.get(f"answer:{verb}:count", 0) - before.get(f"answer:{verb}:count", 0)
        if count:
            seconds = after.get(f"answer:{verb}:sum", 0) - before.get(f"answer:{verb}:sum", 0)
            prefix = f"answer:{verb}:le:"
            bounds = sorted((float(k.removeprefix(prefix)), k) for k in after if k.startswith(prefix))
            buckets = [(bound, after[k] - before.get(k, 0)) for bound, k in bounds]
            p50, p99 = quantile(0.5, buckets), quantile(0.99, buckets)
            spread = (
                f" (p50 {p50 * 1000:.2f}, p99 {p99 * 1000:.2f})"
                if p50 is not None and p99 is not None
                else ""
            )
            parts.append(f"{verb} {seconds / count * 1000:.2f}{spread}")
    return "berth answered (mean ms): " + (", ".join(parts) or "-")


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used so far (0 once it has gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pid_of(marker: str) -> int:
    """The process whose command line holds `marker` (a flag naming this control plane's directory)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    return int(entry.name)
            except OSError:
                continue
    return 0


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def build_floor() -> Path:
    """The floor extender's binary, built from bench/floor into the cache on first use (a new build
    whenever its source changes)."""
    sources = [*sorted(FLOOR_SOURCE.glob("*.go")), FLOOR_SOURCE / "go.mod", FLOOR_SOURCE / "go.sum"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in sources)).hexdigest()[:12]
    cache = Path(os.environ.get("BERTH_CACHE") or Path.home() / ".cache" / "berth")
    binary = cache / "floor" / f"extender-floor-{digest}"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        built = binary.with_suffix(".partial")
        subprocess.run(["go", "build", "-o", str(built), "."], cwd=FLOOR_SOURCE, check=True)
        built.rename(binary)
    return binary


def _kube_sample() -> str:
    """berth serve --kube-sample as the chart renders it from the shipped scheduler configuration."""
    config = yaml.safe_load((ROOT / "manifests/scheduler/scheduler-config.yaml").read_text())
    top = config.get("percentageOfNodesToScore", 0)
    return ",".join(
        f"{p['schedulerName']}={p.get('percentageOfNodesToScore', top)}" for p in config["profiles"]
    )


def _berth_scheduler_config(extender_port: int) -> str:
    config = yaml.safe_load((ROOT / "manifests/scheduler/scheduler-config.yaml").read_text())
    config["leaderElection"] = {"leaderElect": False}
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{extender_port}"
    return yaml.safe_dump(config) + QPS


def _wait_extender(port: int, proc: subprocess.Popen, nodes: int, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"berth serve exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                if f"berth_cache_nodes {float(nodes)}" in response.read().decode():
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"berth serve did not see {nodes} nodes: {log.read_text()[-2000:]}")


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the floor extender exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the floor extender is not listening on {port}")


class Harness:
    """A control plane of its own, `berth serve` watching it, and both schedulers' configurations."""

    def __init__(self, *, floor: bool = False) -> None:
        floor_binary = build_floor() if floor else None
        self.cp = ControlPlane()
        self.cp.start()
        self.extender: subprocess.Popen | None = None
        self.floor: subprocess.Popen | None = None
        try:
            assert self.cp.logs is not None
            self.version = self.cp.versions().get("kube-scheduler", "?")
            self.port = free_port()
            self.log = self.cp.logs / "berth-extender.log"
            argv = [sys.executable, "-m", "berth.cli", "serve", "--kubeconfig", str(self.cp.kubeconfig)]
            argv += ["--kube-sample", _kube_sample()]
            self.extender = subprocess.Popen(
                [*argv, "--port", str(self.port), "--log-level", "warning"],
                stdout=self.log.open("w"),
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            if floor_binary is not None:
                self.floor_port = free_port()
                address = f"127.0.0.1:{self.floor_port}"
                self.floor = subprocess.Popen(
                    [str(floor_binary), "--kubeconfig", str(self.cp.kubeconfig), "--addr", address],
                    stdout=(self.cp.logs / "extender-floor.log").open("w"),
                    stderr=subprocess.STDOUT,
                )
        except BaseException:
            self.stop()
            raise
        self.configs = {
            "default-scheduler": ControlPlane.scheduler_config("default-scheduler", extra_yaml=QPS),
            "berth-scheduler": _berth_scheduler_config(self.port),
            # the same kube-scheduler configuration: the opt-in profile that asks about every node
            "berth-scheduler-exhaustive": _berth_scheduler_config(self.port),
        }
        if self.floor is not None:
            self.configs[FLOOR] = _berth_scheduler_config(self.floor_port)

    def start_scheduler(self, name: str) -> subprocess.Popen:
        return self.cp.start_scheduler(self.configs[name], name=name, verbosity=1)

    def names_read(self) -> str:
        """How berth serve read the filter calls' node names (from the bytes or decoded) and their pods
        (the watch's record of the same version, or decoded), from /metrics."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        parts = []
        for what, prefix in (
            ("node names", "berth_filter_node_names_total{"),
            ("pods", "berth_filter_pods_total{"),
        ):
            counts = _scrape(url, prefix)
            parts.append(f"{what} " + (", ".join(f"{name} {value}" for name, value in counts.items()) or "-"))
        return "; ".join(parts)

    def binds(self) -> dict[str, float]:
        """berth serve's binds so far by outcome (confirmed, rechecked, refused, failed)."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        samples = _scrape(url, "berth_binds_total{")
        out = {name.split('"')[1]: value for name, value in samples.items()}
        for name, value in _scrape(url, "berth_sample_total{").items():
            out[f"sample:{name.split(chr(34))[1]}"] = value
        out.update(answer_times(_scrape(url, ANSWER_SECONDS)))
        return out

    async def prepare(self, api: Api, nodes: int) -> dict[str, int]:
        """Create the nodes, wait until berth sees them all; the pids whose CPU a run counts."""
        await create_nodes(api, nodes)
        assert self.extender is not None and self.cp.workdir is not None
        await asyncio.to_thread(_wait_extender, self.port, self.extender, nodes, self.log)
        if self.floor is not None:
            await asyncio.to_thread(_wait_listening, self.floor_port, self.floor)
        return {
            "berth serve": self.extender.pid,
            "kube-apiserver": _pid_of(f"--cert-dir={self.cp.workdir / 'apiserver-certs'}"),
            "etcd": _pid_of(f"--data-dir={self.cp.workdir / 'etcd-data'}"),
        }

    def stop(self) -> None:
        for extender in (self.extender, self.floor):
            if extender is not None:
                _stop(extender)
        self.cp.stop()

    def run(self, nodes: int, work: Any) -> Any:
        """Create the nodes, then `await work(api, processes)` with an admin client; the harness is
        stopped afterwards whatever happens."""

        async def main() -> Any:
            api = Api(self.cp)
            try:
                return await work(api, await self.prepare(api, nodes))
            finally:
                await api.close()

        try:
            return asyncio.run(main())
        finally:
            self.stop()


def run(
    *, nodes: int, pods: int, scenarios: tuple[str, ...] = SCENARIOS, timeout: float = 900
) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]], str]:
    harness = Harness()
    runs = [r for r in RUNS if r[0] in scenarios]

    async def work(api: Api, processes: dict[str, int]) -> list[Any]:
        return [
            await one_run(api, harness.start_scheduler, r, i, nodes, pods, timeout, processes, harness.binds)
            for i, r in enumerate(runs)
        ]

    results = harness.run(nodes, work)
    rows = [row for row, _ in results]
    cpu = [used for _, used in results]
    rates = {(r[0], r[1]): r[5] for r in rows}
    ratios = []
    for scenario in scenarios:
        berth, kube = rates[(scenario, "berth-scheduler")], rates[(scenario, "default-scheduler")]
        ratios.append([scenario, berth, kube, berth / kube if kube else math.nan])
    return rows, ratios, cpu, f"kube-scheduler {harness.version}"


# -- scale: new pods among many pods already bound ---------------------------------------------------
SCALE_HEADERS = [
    "nodes",
    "existing",
    "new",
    "scheduler",
    "rule",
    "bound",
    "pods/s",
    "violations",
    "kube-scheduler ms/pod",
    "berth serve ms/pod",
    "kube-apiserver ms/pod",
    "etcd ms/pod",
    "attempts/pod",
    "cycle ms/pod",
    "berth binds (confirmed/rechecked/refused/failed)",
]
SCALE_RATIO_HEADERS = [
    "nodes",
    "existing",
    "new",
    "profile",
    "berth pods/s",
    "kube-scheduler pods/s",
    "ratio",
]
# With the floor (`--e2e-floor`): berth-scheduler's rate against the floor's, the same pods on the same
# profile; and the floor's against kube-scheduler's default profile, the most any extender gets there.
FLOOR_HEADERS = [
    "nodes",
    "existing",
    "new",
    "berth pods/s",
    "floor pods/s",
    "kube-scheduler pods/s",
    "berth / floor",
    "floor / kube-scheduler",
]
SCALE_GROUPS = 50
# The scale shapes: the runs of each, the built-in rule's first. `plain`: no rule. `spread`: each new
# pod must avoid the nodes of its group (kube's required anti-affinity against berth's
# require_without_tag); `preferred`: each prefers to avoid them (scheduler_perf's
# SchedulingPreferredPodAntiAffinity), the same kube term for both schedulers, which berth-scheduler
# scores inside berth's decision (kube/preferences).
SCALE_SHAPES = {
    # scheduler_perf's SchedulingBasic: pods with no rule at all (violations are not counted)
    "plain": (("default-scheduler", "none"), ("berth-scheduler", "none")),
    "spread": (("default-scheduler", "anti-affinity"), ("berth-scheduler", "require_without_tag")),
    "preferred": (
        ("default-scheduler", "preferred-anti-affinity"),
        ("berth-scheduler", "preferred-anti-affinity"),
    ),
    # A rule few nodes meet: each new pod must join a holder, held on `existing` nodes (kube's required
    # pod affinity against require_with_tag), on berth's shipped profile and on the exhaustive one.
    "narrow": (
        ("default-scheduler", "narrow-affinity"),
        ("berth-scheduler", "require_with_tag"),
        ("berth-scheduler-exhaustive", "require_with_tag"),
    ),
}
NARROW_RULES = ("narrow-affinity", "require_with_tag")
# The extender protocol's floor (bench/floor, `--e2e-floor`): berth-scheduler's profile with an extender
# in Go that answers the first node asked about and posts the Binding, doing nothing else. Its pods are
# berth-scheduler's; its run counts the floor's CPU where berth's runs count berth serve's.
FLOOR = "extender-floor"
FLOOR_SOURCE = ROOT / "bench" / "floor"
POD_SLOTS = 110  # the bench nodes' allocatable pods
SCALE_RUNS = SCALE_SHAPES["spread"]


def _existing(i: int, nodes: int, namespace: str, scheduler: str, rule: str, count: int) -> dict[str, Any]:
    """Existing pod i, bound at creation (nodeName) to a node no other pod of its group holds: group
    g's pods sit on a run of consecutive nodes starting at g x nodes / groups. In the narrow shape, the
    `count` holders, spread evenly over the nodes."""
    if rule in NARROW_RULES:
        body = _pod(f"e-{i:06d}", namespace, scheduler, HOLDERS, "holder")
        body["spec"]["nodeName"] = f"node-{i * nodes // count:04d}"
        return body
    group = i % SCALE_GROUPS
    within = i // SCALE_GROUPS
    node = (group * nodes // SCALE_GROUPS + within) % nodes
    body = _pod(f"e-{i:06d}", namespace, scheduler, f"g{group}", rule)
    body["spec"]["nodeName"] = f"node-{node:04d}"
    return body


async def _count(api: Api, namespace: str) -> int:
    """Pods left in the namespace (a paged list; the API server counts remaining items)."""
    page = await api.call("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
    left = (page.get("metadata") or {}).get("remainingItemCount") or 0
    return len(page.get("items") or []) + left


def narrow_violations(pods: list[dict[str, Any]]) -> int:
    """New pods bound to a node no holder is on."""
    held = {p["spec"].get("nodeName") for p in pods if p["metadata"]["name"].startswith("e-")}
    return sum(
        1
        for p in pods
        if p["metadata"]["name"].startswith("p-") and (p.get("spec") or {}).get("nodeName") not in held
    )


def violations(pods: list[dict[str, Any]]) -> int:
    """New pods that share a node with another pod of their group (existing or new)."""
    holders: dict[tuple[str, str], int] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            key = (node, p["metadata"]["labels"][GROUP_LABEL])
            holders[key] = holders.get(key, 0) + 1
    return sum(
        1
        for p in pods
        if p["metadata"]["name"].startswith("p-")
        and (node := (p.get("spec") or {}).get("nodeName"))
        and holders[(node, p["metadata"]["labels"][GROUP_LABEL])] > 1
    )


async def scale_run(
    api: Api,
    start_scheduler: Any,
    run: tuple[str, str],
    *,
    nodes: int,
    existing: int,
    new: int,
    timeout: float,
    processes: dict[str, int],
    counts: Callable[[], dict[str, float]],
) -> list[Any]:
    """One scheduler's run; `counts` reads berth serve's bind outcomes so far."""
    scheduler, rule = run
    profile = "berth-scheduler" if scheduler == FLOOR else scheduler  # the pods' schedulerName
    namespace = f"scale-{nodes}-{existing}-{scheduler}"
    await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    path = f"/api/v1/namespaces/{namespace}/pods"
    # The pods already there carry the rule in the words of the scheduler under test only, so neither
    # scheduler pays for the other's rule.
    await api.each(
        [
            ("POST", path, _existing(i, nodes, namespace, profile, rule, existing), False)
            for i in range(existing)
        ]
    )
    narrow = rule in NARROW_RULES
    if narrow:  # as many as the holders' nodes have room for
        new = min(new, existing * (POD_SLOTS - 1))
    # New pods: the same groups, each must avoid the nodes of its own group.
    bodies = [_pod(f"p-{i:05d}", namespace, profile, f"g{i % SCALE_GROUPS}", rule) for i in range(new)]

    async def create() -> None:
        await api.each([("POST", path, b, False) for b in bodies])

    # The narrow shape's run counts from the pods' creation: berth nominates such a pod on its arrival
    # (berth.extender.sample), work that must fall inside the run it speeds up.
    if not narrow:
        await create()
    binds_before = await asyncio.to_thread(counts)
    asked_before = await api.requests()
    times, used, rate, _, attempts = await scheduled(
        api,
        start_scheduler,
        scheduler,
        namespace,
        new,
        timeout,
        processes,
        prefix="p-",
        create=create if narrow else None,
    )
    asked_after = await api.requests()
    asked = requests_per_pod(asked_before, asked_after, new)
    whole = lists_and_ended_watches(asked_before, asked_after)
    binding_mean = binding_ms(asked_before, asked_after)
    binding = "-" if binding_mean is None else f"{binding_mean:.2f}"
    counted_after = await asyncio.to_thread(counts)
    binds = _binds(scheduler, binds_before, counted_after)
    answered = answers(binds_before, counted_after)
    pods: list[dict[str, Any]] = []
    params: dict[str, str] = {"limit": "5000"}
    while True:
        page = await api.call("GET", f"{path}?" + "&".join(f"{k}={v}" for k, v in params.items()))
        pods += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
        params["continue"] = token
    # (no rule: sharing a node breaks nothing)
    counted = {**dict.fromkeys(NARROW_RULES, narrow_violations), "none": lambda _: 0}.get(rule, violations)
    broken = counted(pods)
    # A group at a time: one request for tens of thousands of pods outlasts the API server's timeout.
    await api.each(
        [
            (
                "DELETE",
                f"{path}?labelSelector={GROUP_LABEL}%3D{group}&gracePeriodSeconds=0",
                {"gracePeriodSeconds": 0},
                False,
            )
            for group in [*(f"g{g}" for g in range(SCALE_GROUPS)), HOLDERS]
        ]
    )
    while await _count(api, namespace):
        await asyncio.sleep(1)
    print(
        f"[bench] scale {nodes}/{existing}/{new} {scheduler}: {len(times)}/{new} bound, {rate:.1f} pods/s, "
        f"{broken} violations, attempts {attempts}, berth binds {binds}; {answered}; "
        f"the API server's Binding (mean ms): {binding}; per pod: {asked}; lists and ended watches: {whole}",
        file=sys.stderr,
        flush=True,
    )
    per_pod = [used[k] / new * 1000 for k in ("kube-scheduler", "berth serve", "kube-apiserver", "etcd")]
    tries, cycle = _per_pod(attempts, new), _cycle_ms(attempts, new)
    return [nodes, existing, new, scheduler, rule, len(times), rate, broken, *per_pod, tries, cycle, binds]


def scale(
    sizes: list[tuple[int, int]],
    *,
    new: int = 1000,
    timeout: float = 1200,
    shape: str = "spread",
    floor: bool = False,
) -> tuple[list[list[Any]], list[list[Any]], str]:
    """For each (nodes, existing): a control plane of its own, the built-in rule's run first, then
    berth's, each with `new` pods to place among `existing` pods already bound; with `floor`, last the
    floor extender's run (bench/floor) on berth-scheduler's profile."""
    rows: list[list[Any]] = []
    version = "?"
    runs = SCALE_SHAPES[shape] + (((FLOOR, "none"),) if floor else ())
    for nodes, existing in sizes:
        size_rows, version = _scale_size(nodes, existing, new, timeout, runs, floor=floor)
        rows += size_rows
    ratios = []
    for (nodes, existing), runs_of_size in _by_size(rows).items():
        kube = _rate(runs_of_size, "default-scheduler")
        for name in ("berth-scheduler", "berth-scheduler-exhaustive", FLOOR):
            if name in runs_of_size:
                placed, berth = runs_of_size[name][2], runs_of_size[name][6]
                ratios.append(
                    [nodes, existing, placed, name, berth, kube, berth / kube if kube else math.nan]
                )
    return rows, ratios, f"kube-scheduler {version}"


def _by_size(rows: list[list[Any]]) -> dict[tuple[int, int], dict[str, list[Any]]]:
    """The scale rows by (nodes, existing), each size's by scheduler (the run's name)."""
    out: dict[tuple[int, int], dict[str, list[Any]]] = {}
    for row in rows:
        out.setdefault((row[0], row[1]), {})[row[3]] = row
    return out


def _rate(runs_of_size: dict[str, list[Any]], scheduler: str) -> float:
    """The pods/s of one size's run by `scheduler`, nan when it did not run."""
    return runs_of_size[scheduler][6] if scheduler in runs_of_size else math.nan


def floor_ratios(rows: list[list[Any]]) -> list[list[Any]]:
    """For each size run with the floor: berth-scheduler's rate against the floor's (what berth's work
    costs over an extender that does none) and the floor's against kube-scheduler's default profile
    (what the extender protocol itself leaves on this machine)."""
    out = []
    for (nodes, existing), runs_of_size in _by_size(rows).items():
        if FLOOR not in runs_of_size or "berth-scheduler" not in runs_of_size:
            continue
        placed = runs_of_size[FLOOR][2]
        berth, floor, kube = (
            _rate(runs_of_size, name) for name in ("berth-scheduler", FLOOR, "default-scheduler")
        )
        out.append(
            [
                nodes,
                existing,
                placed,
                berth,
                floor,
                kube,
                berth / floor if floor else math.nan,
                floor / kube if kube else math.nan,
            ]
        )
    return out


def _scale_size(
    nodes: int,
    existing: int,
    new: int,
    timeout: float,
    runs: tuple[tuple[str, str], ...] = SCALE_RUNS,
    *,
    floor: bool = False,
) -> tuple[list[list[Any]], str]:
    harness = Harness(floor=floor)

    async def work(api: Api, processes: dict[str, int]) -> list[list[Any]]:
        sizes = {"nodes": nodes, "existing": existing, "new": new, "timeout": timeout}
        rows = []
        for run in runs:
            counted = processes
            if run[0] == FLOOR:  # the extender whose CPU the run counts is the floor
                assert harness.floor is not None
                counted = {**processes, "berth serve": harness.floor.pid}
            rows.append(
                await scale_run(
                    api, harness.start_scheduler, run, processes=counted, counts=harness.binds, **sizes
                )
            )
        print(f"[bench] scale {nodes}/{existing}: {harness.names_read()}", file=sys.stderr, flush=True)
        return rows

    return harness.run(nodes, work), harness.version


# -- the watch alone: berth serve's CPU per pod bound by someone else ---------------------------------
WATCH_HEADERS = [
    "nodes",
    "pods bound",
    "bindings/s asked",
    "bindings/s",
    "berth serve ms/pod",
    "kube-apiserver ms/pod",
    "etcd ms/pod",
]
WATCH_NAMESPACE = "watch"


async def watch_run(api: Api, processes: dict[str, int], *, nodes: int, pods: int, rate: float) -> list[Any]:
    """`pods` pods that no scheduler takes, then bound one by one by POSTing their Bindings at `rate`
    per second: what each process's CPU pays per bound pod. No scheduler runs, so `berth serve` pays
    only for the watch event each binding brings (and its share of the idle loop)."""
    path = f"/api/v1/namespaces/{WATCH_NAMESPACE}/pods"
    with contextlib.suppress(RuntimeError):  # already there from an earlier rate
        await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": WATCH_NAMESPACE}})
    prefix = f"w{int(rate)}"
    creates = [
        (
            "POST",
            path,
            _pod(f"{prefix}-{i:05d}", WATCH_NAMESPACE, "no-scheduler", f"g{i % 50}", "none"),
            False,
        )
        for i in range(pods)
    ]
    await api.each(creates)
    await wait_idle(processes)
    before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    started = time.monotonic()
    for i in range(pods):
        name = f"{prefix}-{i:05d}"
        target = {"kind": "Node", "name": f"node-{(i * 7) % nodes:04d}"}
        await api.call("POST", f"{path}/{name}/binding", {"metadata": {"name": name}, "target": target})
        ahead = started + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)
    took = time.monotonic() - started
    await asyncio.sleep(1.0)  # the last events reach berth serve
    used = {name: (cpu_seconds(pid) - before[name]) / pods * 1000 for name, pid in processes.items()}
    return [nodes, pods, rate, pods / took, used["berth serve"], used["kube-apiserver"], used["etcd"]]


def watch(*, nodes: int, pods: int, rates: tuple[float, ...]) -> tuple[list[list[Any]], str]:
    harness = Harness()

    async def work(api: Api, processes: dict[str, int]) -> list[list[Any]]:
        return [await watch_run(api, processes, nodes=nodes, pods=pods, rate=rate) for rate in rates]

    return harness.run(nodes, work), f"kube-apiserver {harness.version}"
