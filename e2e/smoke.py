#!/usr/bin/env python3
"""Smoke check for the local control plane: a default kube-scheduler binds a pod.

    python3 e2e/smoke.py            # builds/uses the cached binaries
    BERTH_KEEP_LOGS=1 python3 e2e/smoke.py

Exit status 0 and a final "smoke: 1 passed, 0 failed" line on success.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from controlplane import ControlPlane

NODE = "smoke-node-1"
POD = "smoke-pod"
BIND_TIMEOUT = 30.0


def log(msg: str) -> None:
    print(f"[smoke {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run() -> None:
    t0 = time.monotonic()
    with ControlPlane() as cp:
        log(f"control plane up in {time.monotonic() - t0:.1f}s: {cp.server} (bin {cp.bin})")
        for name, ver in cp.versions().items():
            log(f"  {name}: {ver}")
        ver = json.loads(cp.kubectl("version", "-o", "json").stdout)
        log(f"  kubectl {ver['clientVersion']['gitVersion']}, server {ver['serverVersion']['gitVersion']}")

        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {},
        }
        cp.kubectl("apply", "-f", "-", input=json.dumps(node))
        resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        status = {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "fake node for the berth smoke check",
                        "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ],
            }
        }
        cp.kubectl("patch", "node", NODE, "--subresource=status", "--type=merge", "-p", json.dumps(status))
        # TaintNodesByCondition (admission) put node.kubernetes.io/not-ready:NoSchedule on
        # the new Node; without a node-lifecycle controller nobody removes it.
        cp.remove_not_ready_taint(NODE)
        got = cp.kubectl_json("get", "node", NODE)
        assert got["status"]["allocatable"]["pods"] == "110", got
        assert not got["spec"].get("taints"), got["spec"]
        log(
            f"node {NODE} allocatable={got['status']['allocatable']} "
            f"Ready={got['status']['conditions'][0]['status']} taints=none"
        )

        sched = cp.start_scheduler(ControlPlane.scheduler_config())
        log(f"kube-scheduler pid {sched.pid} ready (log {cp.logs}/kube-scheduler.log)")

        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": POD, "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ]
            },
        }
        cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
        t1 = time.monotonic()
        node_name = ""
        while time.monotonic() - t1 < BIND_TIMEOUT:
            node_name = cp.kubectl_json("get", "pod", POD).get("spec", {}).get("nodeName", "")
            if node_name:
                break
            time.sleep(0.2)
        if node_name != NODE:
            print(cp.kubectl("describe", "pod", POD, check=False).stdout)
            cp.keep_logs = True
            raise AssertionError(f"pod not bound to {NODE} within {BIND_TIMEOUT}s (nodeName={node_name!r})")
        log(f"pod {POD} bound to {node_name} after {time.monotonic() - t1:.1f}s")
        events = cp.kubectl(
            "get",
            "events",
            "--field-selector",
            f"involvedObject.name={POD}",
            "-o",
            "custom-columns=REASON:.reason,MESSAGE:.message",
            "--no-headers",
            check=False,
        ).stdout.strip()
        if events:
            log(f"events: {events}")
    log(f"teardown done; total {time.monotonic() - t0:.1f}s")


def main() -> int:
    try:
        run()
    except Exception as e:
        log(f"FAILED: {type(e).__name__}: {e}")
        print("smoke: 0 passed, 1 failed", flush=True)
        return 1
    print("smoke: 1 passed, 0 failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
