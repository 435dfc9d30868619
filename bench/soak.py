"""berth for months, in minutes: pods created, bound and deleted in rounds, memory and descriptors per round.

    python -m bench.soak [--rounds 100] [--pods 1000] [--nodes 100]
    python -m bench --only soak        the same (quick: 10 rounds of 200 pods)

On the e2e control plane, berth's stack as e2e/stack.py runs it (berth serve, berth operator,
berth-scheduler). Each round creates `pods` pods, a third with tags and tag affinity, a third governed
by a MAX_N_PER_HOST policy, a third plain, plus REFUSED pods whose rule no node meets (refused, retried
by kube-scheduler, written an event each); changes the policy (its max moves, so the operator retries
the pods it concerns); waits until every pod that can be bound is; then deletes them all. Every
RESTART_EVERY rounds kube-apiserver is restarted, so every watch of berth's ends and is resumed or
relisted. Each round prints the resident memory and the open file descriptors of berth serve and of the
operator; the table's last column compares the mean of the last fifth of the rounds with the middle
fifth's (berth holds nothing per pod that is gone when both stay within 10 %).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))

from controlplane import ControlPlane  # noqa: E402
from stack import Stack  # noqa: E402

from bench.e2e import Api  # noqa: E402

NAMESPACE = "soak"
POLICY_LABEL = "bench.berth.dev/policy"
REFUSED = 20  # pods a round whose rule no node meets
RESTART_EVERY = 10  # rounds between two restarts of kube-apiserver
HEADERS = ["round", "pods so far", "berth serve MiB", "berth serve fds", "operator MiB", "operator fds"]
SUMMARY_HEADERS = ["process", "figure", "middle rounds (mean)", "last rounds (mean)", "last / middle"]


def memory_and_fds(pid: int) -> tuple[float, int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def pod(name: str, shape: int, scheduler: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": f"app-{shape}"}}
    if shape == 0:
        meta["annotations"] = {
            "berth.dev/tags": json.dumps(["soak"]),
            "berth.dev/affinity": json.dumps({"prefer_with_tag": ["soak"]}),
        }
    elif shape == 1:
        meta["labels"][POLICY_LABEL] = "max-n"
    elif shape == 3:  # refused: no pod of the namespace carries this tag
        meta["annotations"] = {"berth.dev/affinity": json.dumps({"require_with_tag": ["nowhere"]})}
    container = {"name": "main", "image": "registry.example/app:1.0"}
    container["resources"] = {"requests": {"cpu": "1m", "memory": "1Mi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": scheduler, "containers": [container]},
    }


def policy(max_per_node: int) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "max-n", "namespace": NAMESPACE},
        "spec": {
            "policy": {"type": "MAX_N_PER_HOST", "max": max_per_node},
            "selector": {"matchLabels": {POLICY_LABEL: "max-n"}},
        },
    }


async def one_round(cp: ControlPlane, scheduler: str, index: int, pods: int, timeout: float) -> None:
    api = Api(cp)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    try:
        bodies = [pod(f"r{index}-p{i:05d}", i % 3, scheduler) for i in range(pods)]
        bodies += [pod(f"r{index}-refused-{i:03d}", 3, scheduler) for i in range(REFUSED)]
        await api.each([("POST", path, b, False) for b in bodies])
        await asyncio.to_thread(cp.kubectl, "apply", "-f", "-", input=json.dumps(policy(20 + index % 10)))
        deadline = time.monotonic() + timeout
        while True:
            listed = await api.call("GET", f"{path}?fieldSelector=spec.nodeName%21%3D")
            bound = len(listed.get("items") or [])
            if bound >= pods:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"round {index}: {bound} of {pods} pods bound in {timeout:.0f} s")
            await asyncio.sleep(1)
        await api.call("DELETE", f"{path}?gracePeriodSeconds=0", {"gracePeriodSeconds": 0})
        while (await api.call("GET", f"{path}?limit=1")).get("items"):
            await asyncio.sleep(0.5)
    finally:
        await api.close()


def run(rounds: int, pods: int, nodes: int, timeout: float = 600) -> tuple[list[list[Any]], list[list[Any]]]:
    rows: list[list[Any]] = []
    with ControlPlane() as cp:
        cp.create_nodes([f"node-{i:04d}" for i in range(nodes)], pods="250")
        cp.kubectl("create", "namespace", NAMESPACE)
        stack = Stack(cp).start()
        assert stack.extender.proc is not None and stack.operator.proc is not None
        serve, operator = stack.extender.proc.pid, stack.operator.proc.pid
        for index in range(1, rounds + 1):
            if index % RESTART_EVERY == 0:
                cp.kill("kube-apiserver")  # every watch of berth's ends: resumed, or relisted on 410
                cp.revive("kube-apiserver")
                stack.wait_extender(timeout=120)
            asyncio.run(one_round(cp, stack.scheduler_name, index, pods, timeout))
            serve_mib, serve_fds = memory_and_fds(serve)
            operator_mib, operator_fds = memory_and_fds(operator)
            rows.append([index, index * (pods + REFUSED), serve_mib, serve_fds, operator_mib, operator_fds])
            print(
                f"[bench] soak round {index}: " + ", ".join(map(str, rows[-1])), file=sys.stderr, flush=True
            )
        stack.stop()
    return rows, summary(rows)


def summary(rows: list[list[Any]]) -> list[list[Any]]:
    """The last fifth of the rounds against the middle fifth, per process and figure."""
    fifth = max(1, len(rows) // 5)
    start = (len(rows) - fifth) // 2
    middle, last = rows[start : start + fifth], rows[-fifth:]
    out = []
    for column, (process, figure) in zip(
        (2, 3, 4, 5),
        (("berth serve", "MiB"), ("berth serve", "fds"), ("operator", "MiB"), ("operator", "fds")),
        strict=True,
    ):
        before = sum(r[column] for r in middle) / len(middle)
        after = sum(r[column] for r in last) / len(last)
        out.append([process, figure, before, after, after / before if before else float("nan")])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args(argv)
    from bench.stats import table

    rows, compared = run(args.rounds, args.pods, args.nodes)
    print(table("berth's memory and descriptors, round by round", HEADERS, rows))
    print(table("The last rounds against the middle ones", SUMMARY_HEADERS, compared))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
