from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.cli import main
from berth.engine import Decision
from tests import builders
from tests.builders import k8s_list


@pytest.fixture
def place() -> Callable[..., Decision]:
    """tests.builders.place as a fixture: place(pod_obj, *cluster_objects, seed=0)."""
    return builders.place


@pytest.fixture
def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, Any]]:
    """Run `berth simulate` on objects written to files; returns (exit code, parsed JSON output)."""

    def _simulate(
        pods: dict[str, Any] | list[dict[str, Any]],
        *objects: dict[str, Any],
        seed: int = 0,
        extra: tuple = (),
    ) -> tuple[int, Any]:
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump(k8s_list(*objects)))
        pod_file = tmp_path / "pod.yaml"
        docs = pods if isinstance(pods, list) else [pods]
        pod_file.write_text(yaml.safe_dump_all(docs))
        code = main(
            [
                "simulate",
                "--cluster",
                str(cluster),
                "--pod",
                str(pod_file),
                "--seed",
                str(seed),
                "--output",
                "json",
                *extra,
            ]
        )
        out = capsys.readouterr().out
        return code, json.loads(out)

    return _simulate
