"""`make try`: berth on a real local cluster, as local processes, no Docker.

Builds (or reuses, ~/.cache/berth) a control plane from the Go module proxy, starts etcd,
kube-apiserver, kube-controller-manager, kwok with five nodes in three zones and the default
kube-scheduler, installs berth's chart (CRDs, RBAC, webhooks; its Deployments with no replica, annotated
with where berth runs instead) and runs its processes as the chart configures them: `berth serve`, `berth
operator` and a kube-scheduler named berth-scheduler (e2e/local_cluster.py, the e2e suite's own
cluster). It applies the user guide's first example (in namespace `try`, so that the guide itself runs
as written, in `shop`), prints how to point kubectl and berth at the cluster, and keeps running until
interrupted (Ctrl-C or SIGTERM); then it stops everything it started and removes its working directory.

    python e2e/try_cluster.py [--ready-file FILE]

`--ready-file` (or the environment variable BERTH_TRY_READY_FILE, for `make try`) writes the cluster's
environment (KUBECONFIG=..., PATH=...) to FILE once it is ready, for a script or a test to wait on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from controlplane import BUILD_SCRIPT, ControlPlane, find_bin_dir
from local_cluster import ROOT, chart_cluster

ZONE = "topology.kubernetes.io/zone"
NODES = [
    ("node-a1", "zone-a"),
    ("node-a2", "zone-a"),
    ("node-b1", "zone-b"),
    ("node-b2", "zone-b"),
    ("node-c1", "zone-c"),
]
# The user guide's first example (docs/user-guide.md, "a web server next to its cache"), in namespace try.
NAMESPACE = "try"
EXAMPLE = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "try"}},
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cache-1", "namespace": "try", "annotations": {"berth.dev/tags": '["cache"]'}},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [{"name": "cache", "image": "registry.k8s.io/pause:3.10"}],
        },
    },
]
WEB = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "try",
        "annotations": {
            "berth.dev/tags": '["web"]',
            "berth.dev/affinity": '{"prefer_with_tag": ["cache"], "require_without_tag": ["batch"]}',
        },
    },
    "spec": {
        "schedulerName": "berth-scheduler",
        "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}],
    },
}


class Stopped(Exception):
    """SIGTERM or SIGINT: stop everything."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def _binaries() -> Path:
    """The control plane's binaries, built from the Go module proxy on first use (about 7 minutes on 2
    cores) into ~/.cache/berth, then reused."""
    print(f"[try] the control plane's binaries ({BUILD_SCRIPT.name}: ~7 min the first time)", flush=True)
    return find_bin_dir()


def _apply_example(cp: ControlPlane) -> str:
    for obj in (*EXAMPLE, WEB):
        if obj is WEB:
            cp.kubectl(
                "wait", "-n", NAMESPACE, "--for=condition=PodScheduled", "pod/cache-1", "--timeout=60s"
            )
        cp.kubectl("apply", "-f", "-", input=json.dumps(obj))
    cp.kubectl("wait", "-n", NAMESPACE, "--for=condition=PodScheduled", "pod/web-1", "--timeout=60s")
    return cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide").stdout


def _gone(workdir: str, within: float = 10.0) -> None:
    """Until no process started from `workdir` runs: one stopped a moment ago may still be exiting
    (seen in CI); after `within` seconds, what is left is killed."""
    deadline = time.monotonic() + within
    while True:
        found = subprocess.run(["pgrep", "-f", workdir], capture_output=True, text=True, check=False)
        pids = [int(p) for p in found.stdout.split()]
        if not pids:
            return
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make try", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=os.environ.get("BERTH_TRY_READY_FILE") or None,
        help="write KUBECONFIG=... and PATH=... here once ready",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    started = time.monotonic()
    cp = ControlPlane(bin_dir=_binaries())
    try:
        cp.start()
        nodes = [(name, {ZONE: zone}) for name, zone in NODES]
        with chart_cluster(cp, nodes, kwok=True):
            # A cluster like any other: its default scheduler places the pods that do not ask for berth.
            cp.start_scheduler(ControlPlane.scheduler_config("default-scheduler"), name="kube-scheduler")
            pods = _apply_example(cp)
            assert cp.bin is not None and cp.kubeconfig is not None and cp.workdir is not None
            path = os.pathsep.join([str(Path(sys.executable).parent), str(cp.bin)])
            if args.ready_file:
                args.ready_file.write_text(f"KUBECONFIG={cp.kubeconfig}\nPATH={path}\n")
            print(
                f"""
berth is running on a local cluster ({time.monotonic() - started:.0f} s): 5 kwok nodes in 3 zones, the
default kube-scheduler, and berth-scheduler, berth serve and berth operator as local processes (logs in
{cp.logs}); the chart's Deployments are installed with no replica and say so (berth check).

The user guide's first example is placed, in namespace {NAMESPACE} (web-1 next to its cache):

{pods}
In another shell:

  export KUBECONFIG={cp.kubeconfig}
  export PATH={path}:$PATH     # berth, kubectl-berth, kubectl and helm

  berth check
  kubectl get nodes -L {ZONE}
  berth explain {NAMESPACE}/web-1 --live
  kubectl berth audit -A

then the user guide, docs/user-guide.md: its examples run here as written. Ctrl-C stops everything.
""",
                flush=True,
            )
            while True:
                time.sleep(3600)
    except Stopped as why:
        print(f"[try] {why}: stopping", flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        workdir = cp.workdir
        cp.stop()
        if workdir is not None:
            _gone(str(workdir))
        print("[try] stopped; nothing left running", flush=True)
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
