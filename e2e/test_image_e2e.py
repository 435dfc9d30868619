"""The image, built from the Dockerfile and run as the chart runs it.

e2e/build-image.sh builds the Dockerfile with buildah (daemonless: chroot isolation, vfs storage) on a
Debian bookworm base made with debootstrap, since python:3.11-slim cannot be pulled here. The image's
root filesystem is then mounted, and its entrypoint started in it with chroot as the chart's pod would
start it: the image's user (65532), environment and entrypoint, the chart's extender arguments, a
read-only root with /tmp writable, the allocator ConfigMap at /etc/berth and the scheduler
ServiceAccount's token where a pod has it, with KUBERNETES_SERVICE_HOST/PORT pointing at the e2e API
server (in-cluster credentials). A second kube-scheduler, with the chart's scheduler configuration,
uses that extender.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import CHART_NAMESPACE, ROOT, Cluster, chart_args, pod, wait_http
from controlplane import free_port
from stack import until

import berth

BUILD = ROOT / "e2e/build-image.sh"
SCHEDULER = "berth-image-scheduler"
MOUNTS = r"""
R=$1; SA=$2; CFG=$3; shift 3
mount --bind "$R" "$R"; mount -o remount,bind,ro "$R"
mount --rbind /dev "$R/dev"; mount -t proc proc "$R/proc"; mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
mount --bind -o ro "$SA" "$R/run/secrets/kubernetes.io/serviceaccount"
mount --bind -o ro "$CFG" "$R/etc/berth"
exec chroot --userspec="$USERSPEC" "$R" /usr/bin/env -i "$@"
"""


@dataclass
class Image:
    name: str
    buildah: list[str]
    rootfs: Path
    config: dict
    build_seconds: float

    def run(
        self,
        args: list[str],
        env: dict[str, str],
        sa: Path,
        config: Path,
        *,
        command: list[str] | None = None,
        **kw,
    ) -> subprocess.Popen | subprocess.CompletedProcess:
        """The image's entrypoint (or `command`, as a probe's) with `args`, as its user, in a mount
        namespace of its own: the root read-only, /tmp a tmpfs, `sa` at the service account path and
        `config` at /etc/berth."""
        image_env = dict(e.split("=", 1) for e in self.config.get("Env") or [])
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--fork",
            "--kill-child=SIGTERM",
            "sh",
            "-euc",
            MOUNTS,
            "sh",
            str(self.rootfs),
            str(sa),
            str(config),
            *(f"{k}={v}" for k, v in {**image_env, **env}.items()),
            *(command or self.config["Entrypoint"]),
            *args,
        ]
        full = {"USERSPEC": self.config["User"], "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if kw.pop("background", False):
            # A session of its own: the entrypoint runs as another user, which clears unshare's
            # parent-death signal, so it is stopped through its process group (stop()).
            return subprocess.Popen(argv, env=full, start_new_session=True, **kw)
        return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    started = time.monotonic()
    built = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    out = dict(line.split("=", 1) for line in built.stdout.splitlines() if "=" in line)
    name = out["IMAGE"]
    seconds = time.monotonic() - started
    buildah = ["buildah", "--root", out["BUILDAH_ROOT"], "--runroot", out["BUILDAH_RUNROOT"]]
    buildah += ["--storage-driver", out["BUILDAH_DRIVER"]]
    inspect = json.loads(subprocess.check_output([*buildah, "inspect", "--type", "image", name]))
    container = subprocess.check_output([*buildah, "from", "--quiet", name], text=True).strip()
    try:
        rootfs = Path(subprocess.check_output([*buildah, "mount", container], text=True).strip())
        # Mount points the pod would have: the service account's token directory and the ConfigMap's.
        (rootfs / "run/secrets/kubernetes.io/serviceaccount").mkdir(parents=True, exist_ok=True)
        (rootfs / "etc/berth").mkdir(parents=True, exist_ok=True)
        yield Image(name, buildah, rootfs, inspect["OCIv1"]["config"], seconds)
    finally:
        subprocess.run([*buildah, "umount", container], capture_output=True)
        subprocess.run([*buildah, "rm", container], capture_output=True)


def test_the_image_runs_berth_as_the_charts_non_root_user(image, tmp_path):
    chart = yaml.safe_load((ROOT / "charts/berth/values.yaml").read_text())["podSecurityContext"]
    assert image.config["User"] == f"{chart['runAsUser']}:{chart['runAsGroup']}"
    assert image.config["Entrypoint"] == ["berth"]
    version = image.run(["--version"], {}, tmp_path, tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"berth {berth.__version__}"
    # Under the chart's readOnlyRootFilesystem only /tmp is writable; berth needs nothing else.
    write = "open('/opt/berth/x', 'w')"
    refused = image.run(["-c", write], {}, tmp_path, tmp_path, command=["python"])
    assert refused.returncode == 1 and "Read-only file system" in refused.stderr
    assert (
        image.run(
            ["-c", write.replace("/opt/berth", "/tmp")], {}, tmp_path, tmp_path, command=["python"]
        ).returncode
        == 0
    )


def test_the_image_is_its_base_and_a_virtualenv_of_modest_size(image):
    sizes = subprocess.check_output([*image.buildah, "images", "--format", "{{.Name}}:{{.Tag}} {{.Size}}"])
    found = dict(line.split(" ", 1) for line in sizes.decode().splitlines())
    size = _megabytes(found[image.name])
    base = _megabytes(next(v for k, v in found.items() if k.startswith("localhost/berth-base:")))
    print(f"image {image.name}: {size:.0f} MB, base {base:.0f} MB; build step {image.build_seconds:.0f} s")
    # The virtualenv: berth and its pinned dependencies, of which the kubernetes package (the kubeconfig
    # loader) is about 130 MB and numpy (the engine's arrays, with its OpenBLAS) about 75 MB; no pip
    # cache, no build tree. 359 MB when this bound was set.
    assert size - base < 400, f"berth's virtualenv adds {size - base:.0f} MB to the base"
    venv = image.rootfs / "opt/berth"
    assert (venv / "bin/berth").exists() and not (image.rootfs / "src").exists()
    assert not (image.rootfs / "root/.cache/pip").exists() or not any(
        (image.rootfs / "root/.cache/pip").iterdir()
    )


def _megabytes(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)\s*([kMG]?B)", text.strip()).groups()
    return float(number) * {"B": 1e-6, "kB": 1e-3, "MB": 1, "GB": 1e3}[unit]


def test_the_extender_of_the_image_places_pods_under_a_real_scheduler(image, cluster: Cluster, namespace):
    cp, chart = cluster.cp, cluster.chart
    assert cp.workdir and cp.certs
    # What the scheduler pod gets: its ServiceAccount's token, the CA and namespace, readable by 65532.
    sa = cp.workdir / "image-serviceaccount"
    sa.mkdir(exist_ok=True)
    account = chart.service_account("-scheduler")
    token = cp.kubectl("create", "token", account, "-n", CHART_NAMESPACE, "--duration=1h").stdout.strip()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes((cp.certs / "ca.crt").read_bytes())
    (sa / "namespace").write_text(CHART_NAMESPACE)
    config = cp.workdir / "image-allocator"
    config.mkdir(exist_ok=True)
    (config / "allocator.yaml").write_text(chart.named("ConfigMap", "-allocator")["data"]["allocator.yaml"])
    for path in [sa, config, *sa.iterdir(), *config.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    port, metrics_port = free_port(), free_port()
    args = chart_args(
        chart.container("-scheduler", "extender"), {"--port": str(port), "--metrics-port": str(metrics_port)}
    )
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cp.apiserver_port)}
    log = cp.workdir / "logs/berth-image-extender.log"
    with log.open("w") as out:
        proc = image.run(args, env, sa, config, background=True, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", proc, log)
        # The chart's readiness probe, as the kubelet runs it: HTTPS on the metrics port, unverified, no
        # token (the image made its own certificate in its read-only root's /tmp).
        probe = chart.container("-scheduler", "extender")["readinessProbe"]["httpGet"]
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        url = f"https://127.0.0.1:{metrics_port}{probe['path']}"
        with urllib.request.urlopen(url, timeout=5, context=insecure) as ready:
            assert ready.status == 200
        scheduler = chart.scheduler_config()
        scheduler["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{port}"
        scheduler["profiles"][0]["schedulerName"] = SCHEDULER
        scheduler["leaderElection"] = {"leaderElect": False}
        scheduler["clientConnection"] = {"kubeconfig": str(cluster.kubeconfigs["scheduler"])}
        cp.start_scheduler(yaml.safe_dump(scheduler), name=SCHEDULER)

        db = pod("db-0", namespace, tags=["db"])
        db["spec"]["nodeName"] = "node-11"
        cluster.apply(db)
        cluster.apply(pod("app", namespace, affinity={"require_with_tag": ["db"]}, scheduler=SCHEDULER))
        assert cluster.wait_placed(namespace, ["app"]) == {"app": "node-11"}
        # the extender's record of the placement, written with the binding (node-11 is the only node the
        # constraint allows)
        record = json.loads(
            cluster.get("pod", "app", namespace)["metadata"]["annotations"]["berth.dev/placement"]
        )
        assert record["node"] == "node-11" and record["noChoice"] is True
        scheduled = cluster.wait_event(namespace, "app", lambda e: e["reason"] == "Scheduled")
        assert scheduled["source"] == SCHEDULER
        # Only the image's extender serves this scheduler, and it is still up.
        assert proc.poll() is None, log.read_text()[-2000:]
    finally:
        stop(proc)
        cp.kill(SCHEDULER)


def stop(proc: subprocess.Popen) -> None:
    """Stop a background image process and everything it started (its process group)."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue

    # the group outlives its leader while the entrypoint winds down: wait until it is gone
    def gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    until(f"the image's processes (group {proc.pid}) stopped", gone, timeout=10, every=0.1)
