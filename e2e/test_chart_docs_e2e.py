"""The guides on a real cluster: every shell block marked `<!-- e2e -->` in docs/troubleshooting.md
and docs/operator-guide.md runs here as written, in order, with kubectl, helm and berth on the PATH and
the admin kubeconfig (the marker may name the exit status and a text the output holds); the user
guide's run against `make try`'s cluster (test_try_e2e.py). Every other kubectl and helm command in the docs
is checked against the binary's flags (`--help` after its arguments fails on an unknown flag or
subcommand); berth commands are checked by tests/test_docs.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import pod

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.test_docs import DOCS, GUIDES, ROOT, Block, blocks, commands, program, shell_blocks


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where a guide runs: empty but for the repository's charts/ and manifests/, which guides name."""
    for name in ("charts", "manifests"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.fixture
def nodes_restored(cluster) -> Iterator[None]:
    """Guides tag nodes and take the tags off again; whatever they leave is removed, so the shared nodes
    are as before for the tests that follow."""

    def berth_keys() -> dict[str, tuple[set[str], set[str]]]:
        items = cluster.cp.kubectl_json("get", "nodes")["items"]
        return {
            n["metadata"]["name"]: (
                {k for k in n["metadata"].get("labels", {}) if "berth.dev" in k},
                {k for k in n["metadata"].get("annotations", {}) if k.startswith("berth.dev/")},
            )
            for n in items
        }

    before = berth_keys()
    yield
    for node, (labels, notes) in berth_keys().items():
        for label in labels - before[node][0]:
            cluster.kubectl("label", "node", node, f"{label}-")
        for annotation in notes - before[node][1]:
            cluster.kubectl("annotate", "node", node, f"{annotation}-")


def guide_env(bin_dir: Path, kubeconfig: Path) -> dict[str, str]:
    """What a reader's shell has: kubectl, helm and berth on the PATH, KUBECONFIG set."""
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    return {**os.environ, "PATH": path, "KUBECONFIG": str(kubeconfig)}


def run_block(env: dict[str, str], block: Block, cwd: Path) -> str:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == block.exit_code, f"{block} exited {result.returncode}:\n{output}"
    if block.expect is not None:
        assert block.expect in output, f"{block}: no {block.expect!r} in:\n{output}"
    return output


def run_guide(env: dict[str, str], guide: Path, cwd: Path) -> dict[int, str]:
    """Run the guide's marked blocks in order; their output by line."""
    runnable = [b for b in blocks(guide) if b.lang == "sh" and b.marker is not None]
    assert runnable
    return {b.line: run_block(env, b, cwd) for b in runnable}


def cluster_env(cluster) -> dict[str, str]:
    return guide_env(cluster.cp.bin, cluster.cp.kubeconfig)


def _wide_nodes(output: str) -> dict[str, str]:
    """Pod -> node from `kubectl get pods -o wide` output."""
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("NAME") and "NODE" in line)
    column = lines[header].split().index("NODE")
    return {line.split()[0]: line.split()[column] for line in lines[header + 1 :] if line.strip()}


def test_the_troubleshooting_guide_runs_as_written(cluster, workdir, nodes_restored):
    outputs = run_guide(cluster_env(cluster), ROOT / "docs/troubleshooting.md", workdir)
    wide = _wide_nodes(next(o for o in outputs.values() if "search-index-1" in o and "NOMINATED" in o))
    assert wide["search-1"] == wide["search-index-1"], "search-1 went next to its neighbour"
    # Its neighbour deleted, the audit names search-1 on its node as refused at its next reschedule.
    search = cluster.get("pod", "search-1", "demo")["spec"]["nodeName"]
    audited = next(o for o in outputs.values() if "REFUSED ON RESCHEDULE" in o)
    assert f"demo/search-1 on {search}, refused by tags/require_with_tag" in audited


def test_the_operator_guide_runs_as_written(cluster, workdir, nodes_restored):
    # a pod that still uses the weighted affinity form, for the guide to find
    cluster.kubectl("create", "namespace", "legacy")
    cluster.apply(pod("weighted-1", "legacy", affinity={"cache": 10}))
    node = cluster.wait_placed("legacy", ["weighted-1"])["weighted-1"]
    outputs = run_guide(cluster_env(cluster), ROOT / "docs/operator-guide.md", workdir)
    found = next(o for o in outputs.values() if "DEPRECATED" in o)
    assert f"legacy/weighted-1 on {node}: weighted affinity " + '{"cache": 10} is deprecated' in found


def test_the_metrics_the_operator_guide_names_are_served(cluster):
    named = set(re.findall(r"`(berth_\w+)", (ROOT / "docs/operator-guide.md").read_text()))
    with urllib.request.urlopen(f"{cluster.extender_url}/metrics", timeout=5) as response:
        served = response.read().decode()
    # berth rebalance's counters are pushed by the command (--pushgateway), not served by the extender.
    from prometheus_client import generate_latest

    from berth.evict import EVICTIONS, REGISTRY

    EVICTIONS.labels(rule="r", outcome="evicted")  # a labelled counter is listed once it has a child
    pushed = generate_latest(REGISTRY).decode()
    assert len(named) >= 5
    for metric in named:
        where = pushed if metric.startswith("berth_rebalance_") else served
        assert re.search(rf"^{metric}(_bucket|_count|_sum)?[{{ ]", where, re.M), metric


def _checked(name: str) -> list[pytest.param]:
    return [
        pytest.param(words, id=f"{block}: {' '.join(words)[:70]}")
        for block in shell_blocks(DOCS)
        for words in commands(block)
        if program(words) == name
    ]


@pytest.mark.parametrize("words", _checked("kubectl"))
def test_every_kubectl_command_in_the_docs_has_known_flags(cluster, words):
    # berth installed: kubectl finds the kubectl-berth plugin on the PATH, which checks its own flags
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    result = subprocess.run(
        [str(cluster.cp.bin / "kubectl"), *words[1:], "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": path},
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("words", _checked("helm"))
def test_every_helm_command_in_the_docs_has_known_flags(cluster, words):
    result = subprocess.run(
        [str(cluster.cp.bin / "helm"), *words[1:], "--help"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr


def test_each_guide_is_checked(cluster):
    for guide in GUIDES:
        assert any(b.marker is not None for b in shell_blocks([guide])), guide
    assert json.dumps(_checked("helm"))  # the docs do name helm commands
