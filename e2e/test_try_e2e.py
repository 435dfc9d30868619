"""`make try` as a newcomer runs it: the command from the README, on this machine's control plane.

It comes up with five kwok nodes in three zones and berth's processes, prints how to reach the cluster,
has placed the user guide's first example; every shell block of docs/user-guide.md marked `<!-- e2e -->`
then runs against it as written; SIGTERM stops everything it started and removes its working directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_chart_docs_e2e import guide_env, run_guide

ROOT = Path(__file__).resolve().parent.parent
READY_WITHIN = 600  # seconds; the control plane is built before CI runs the e2e tests


class Try:
    def __init__(self, proc: subprocess.Popen, env: dict[str, str], log: Path) -> None:
        self.proc, self.env, self.log = proc, env, log

    def run(self, *argv: str, input: str | None = None) -> subprocess.CompletedProcess:
        """A command on the cluster as a user runs it from the printed environment; it must succeed."""
        done = subprocess.run(argv, env=self.env, input=input, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        return done

    def kubectl_json(self, *args: str) -> dict[str, Any]:
        out = subprocess.run(
            ["kubectl", *args, "-o", "json"], env=self.env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)

    @property
    def workdir(self) -> Path:
        return Path(self.env["KUBECONFIG"]).parent


@pytest.fixture(scope="module")
def tried(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Try]:
    here = tmp_path_factory.mktemp("try")
    ready, log = here / "ready.env", here / "make-try.log"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "try"],
        cwd=ROOT,
        env={**os.environ, "BERTH_TRY_READY_FILE": str(ready)},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the SIGTERM a user's Ctrl-C would send
    )
    try:
        deadline = time.monotonic() + READY_WITHIN
        while not ready.exists():
            assert proc.poll() is None, f"make try exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"make try not ready:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        values = dict(line.split("=", 1) for line in ready.read_text().splitlines())
        env = guide_env(Path(values["PATH"].split(os.pathsep)[-1]), Path(values["KUBECONFIG"]))
        yield Try(proc, env, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_make_try_prints_how_to_reach_the_cluster_and_has_placed_the_first_example(tried: Try) -> None:
    out = tried.log.read_text()
    assert f"export KUBECONFIG={tried.env['KUBECONFIG']}" in out
    assert "5 kwok nodes in 3 zones" in out
    nodes = tried.kubectl_json("get", "nodes")["items"]
    zones = {n["metadata"]["labels"].get("topology.kubernetes.io/zone") for n in nodes}
    assert len(nodes) == 5 and zones == {"zone-a", "zone-b", "zone-c"}
    pods = {p["metadata"]["name"]: p for p in tried.kubectl_json("get", "pods", "-n", "try")["items"]}
    assert pods["web-1"]["spec"]["nodeName"] == pods["cache-1"]["spec"]["nodeName"]
    assert "berth.dev/placement" in pods["web-1"]["metadata"]["annotations"]


def test_it_is_a_cluster_like_any_other_and_berth_check_passes_on_it(tried: Try) -> None:
    # A pod that does not ask for berth is placed by the default scheduler.
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain-1", "namespace": "try"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    tried.run("kubectl", "apply", "-f", "-", input=json.dumps(plain))
    tried.run("kubectl", "wait", "-n", "try", "--for=condition=PodScheduled", "pod/plain-1", "--timeout=60s")
    # No pod of the chart waits for a kubelet: its Deployments have no replica and say where berth runs.
    assert tried.kubectl_json("get", "pods", "-n", "berth-system")["items"] == []
    checked = tried.run("berth", "check", "-o", "json")
    found = json.loads(checked.stdout)
    assert found["ok"], found
    scheduler = next(c for c in found["checks"] if c["check"] == "scheduler")
    assert "local processes" in scheduler["message"]


def test_the_user_guide_runs_as_written_against_it(tried: Try, tmp_path: Path) -> None:
    for name in ("charts", "manifests"):  # what the guide names, as in a clone
        (tmp_path / name).symlink_to(ROOT / name)
    outputs = run_guide(tried.env, ROOT / "docs/user-guide.md", tmp_path)
    placed = {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in tried.kubectl_json("get", "pods", "-n", "shop")["items"]
    }
    assert placed["web-1"] == placed["cache-1"], "web-1 prefers the cache's node"
    assert placed["app-1"] == placed["db-1"], "app-1 is strictly near db-1"
    assert len({placed["api-1"], placed["api-2"], placed["api-3"]}) == 3, "one API server per node"
    trainer = next(o for o in outputs.values() if "trainer-1" in o and "placed on" in o)
    assert placed["trainer-1"] in trainer


def test_sigterm_stops_everything_and_leaves_nothing_behind(tried: Try) -> None:
    workdir = tried.workdir
    assert workdir.exists()
    os.killpg(tried.proc.pid, signal.SIGTERM)
    # make waits for its recipe to finish, then dies of the signal itself
    assert tried.proc.wait(timeout=90) in (0, -signal.SIGTERM), tried.log.read_text()[-3000:]
    assert "[try] stopped; nothing left running" in tried.log.read_text()
    assert not workdir.exists()
    left = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"processes of {workdir} still running: {left.stdout}"
