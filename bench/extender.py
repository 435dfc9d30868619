"""The extender benchmark: kube-scheduler's three calls per pod, over HTTP on 127.0.0.1.

`berth serve --cluster <snapshot>` answers filter, prioritize and bind for a stream of new pods,
each body carrying every node name (nodeCacheCapable, percentageOfNodesToScore 100), the way
kube-scheduler calls it: prioritize gets the nodes filter kept (and is skipped when one is left),
bind the node prioritize ranked first. In the same run, interleaved pod by pod so both see the same
machine, the floor (bench.floor: the same server stack returning berth's own answer as fixed bytes)
gets the same bodies. Latencies are client-side, over one keep-alive connection per server.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.generate import node_name
from bench.scenarios import CHAINS, tag_affinity_pod
from bench.stats import latency

HEADERS = [
    "size",
    "nodes",
    "chain",
    "verb",
    "berth p50 ms",
    "berth p99 ms",
    "berth max ms",
    "floor p50 ms",
    "floor p99 ms",
    "floor max ms",
    "p99 ratio",
    "request KiB",
    "response KiB",
]
VERBS = ("filter", "prioritize", "bind")
WARMUP = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """(nanoseconds from sending the request to the last byte of the answer, the answer)."""
        start = time.perf_counter_ns()
        self.conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter_ns() - start
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:300]!r}")
        return elapsed, data

    def close(self) -> None:
        self.conn.close()


def wait_ready(port: int, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server on {port} not ready after {timeout}s: {log.read_text()[-2000:]}")


def start(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    wait_ready(port, proc, log)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Pod:
    """One pod's three calls: their bodies, built from berth's answers as kube-scheduler would."""

    def __init__(self, i: int, names: list[str]) -> None:
        self.obj = tag_affinity_pod(name=f"bench-{i:05d}", uid=f"00000000-0000-4000-9000-{i:012d}")
        self.names = names
        self.bodies: dict[str, bytes] = {}
        self.answers: dict[str, bytes] = {}

    def run(self, client: Client) -> dict[str, int]:
        """Call filter, then prioritize with the nodes kept, then bind with berth's first choice."""
        times: dict[str, int] = {}
        self.bodies["filter"] = orjson.dumps({"Pod": self.obj, "NodeNames": self.names})
        times["filter"], self.answers["filter"] = client.post("/filter", self.bodies["filter"])
        kept = orjson.loads(self.answers["filter"]).get("NodeNames") or []
        if not kept:
            raise RuntimeError(f"berth placed no node: {self.answers['filter'][:300]!r}")
        chosen = kept[0]
        if len(kept) > 1:  # with one node left the scheduler does not ask for priorities
            self.bodies["prioritize"] = orjson.dumps({"Pod": self.obj, "NodeNames": kept})
            times["prioritize"], self.answers["prioritize"] = client.post(
                "/prioritize", self.bodies["prioritize"]
            )
            priorities = orjson.loads(self.answers["prioritize"])
            chosen = max(priorities, key=lambda p: p["Score"])["Host"]
        meta = self.obj["metadata"]
        binding = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": chosen,
        }
        self.bodies["bind"] = orjson.dumps(binding)
        times["bind"], self.answers["bind"] = client.post("/bind", self.bodies["bind"])
        return times

    def replay(self, client: Client) -> dict[str, int]:
        """The same bodies, to the floor."""
        return {verb: client.post(f"/{verb}", body)[0] for verb, body in self.bodies.items()}


def run(path: Path, nodes: int, *, chain: str, pods: int, size: str) -> list[list[Any]]:
    names = [node_name(i) for i in range(nodes)]
    with tempfile.TemporaryDirectory(prefix="berth-bench-") as tmp:
        work = Path(tmp)
        argv = [sys.executable, "-m", "berth.cli", "serve", "--cluster", str(path), "--log-level", "warning"]
        if CHAINS[chain] is not None:
            config = work / "allocator.json"
            config.write_text(json.dumps({"allocationDescription": CHAINS[chain]}))
            argv += ["--config", str(config)]
        berth_port = free_port()
        berth = start([*argv, "--port", str(berth_port)], berth_port, work / "berth.log")
        floor = None
        try:
            client = Client(berth_port)
            warm = [Pod(i, names) for i in range(WARMUP)]
            for pod in warm:
                pod.run(client)
            responses = work / "responses.json"
            answers = {v: base64.b64encode(warm[0].answers.get(v, b"[]")).decode() for v in VERBS}
            responses.write_text(json.dumps(answers))
            floor_port = free_port()
            floor_argv = [
                sys.executable,
                "-m",
                "bench.floor",
                "--port",
                str(floor_port),
                "--responses",
                str(responses),
            ]
            floor = start(floor_argv, floor_port, work / "floor.log")
            floor_client = Client(floor_port)
            samples: dict[str, dict[str, list[int]]] = {"berth": {}, "floor": {}}
            sizes: dict[str, tuple[int, int]] = {}
            for i in range(WARMUP, WARMUP + pods):
                pod = Pod(i, names)
                for who, times in (("berth", pod.run(client)), ("floor", pod.replay(floor_client))):
                    for verb, ns in times.items():
                        samples[who].setdefault(verb, []).append(ns)
                    samples[who].setdefault("pod", []).append(sum(times.values()))
                for verb in pod.bodies:
                    sizes.setdefault(verb, (len(pod.bodies[verb]), len(pod.answers[verb])))
            client.close()
            floor_client.close()
        finally:
            stop(berth)
            if floor is not None:
                stop(floor)
    rows = []
    for verb in (*VERBS, "pod"):
        if verb not in samples["berth"]:
            continue
        b, f = latency(samples["berth"][verb]), latency(samples["floor"][verb])
        request, response = sizes.get(verb, (0, 0)) if verb != "pod" else (0, 0)
        label = "filter+prioritize+bind" if verb == "pod" else verb
        rows.append(
            [
                size,
                nodes,
                chain,
                label,
                b.p50,
                b.p99,
                b.max,
                f.p50,
                f.p99,
                f.max,
                b.p99 / f.p99,
                request / 1024,
                response / 1024,
            ]
        )
    return rows
