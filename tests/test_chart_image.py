"""The Dockerfile, linted with hadolint and read for what the chart relies on: a non-root user, the `berth`
entrypoint, berth installed from its wheel. e2e/test_image_e2e.py builds it (buildah) and runs it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_finds_nothing_in_the_dockerfile():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_is_built_in_two_stages_from_python_3_11_slim_by_default():
    steps = instructions()
    assert steps[0] == ("ARG", "BASE=python:3.11-slim")
    froms = [args for word, args in steps if word == "FROM"]
    assert froms == ["${BASE} AS build", "${BASE}"]
    assert "COPY --from=build /opt/berth /opt/berth" in [
        f"COPY {a}" for w, a in instructions() if w == "COPY"
    ]


def test_berth_is_installed_from_its_wheel_with_the_pinned_dependencies():
    runs = " ".join(args for word, args in instructions() if word == "RUN")
    # the pinned dependencies of pyproject.toml, then berth's wheel alone, then a check that they agree
    assert "tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']" in runs
    assert "pip install -r /tmp/requirements.txt" in runs
    assert "pip wheel --no-deps --wheel-dir /wheels ." in runs
    assert "/opt/berth/bin/pip install --no-deps /wheels/berth-*.whl" in runs
    assert "/opt/berth/bin/pip check" in runs
    project = (ROOT / "pyproject.toml").read_text()
    dependencies = re.search(r"^dependencies = \[(.*?)^\]", project, re.S | re.M).group(1)
    pins = re.findall(r'"([^"]+)"', dependencies)
    assert pins and all("==" in pin for pin in pins)


def test_the_image_runs_berth_as_the_non_root_user_the_chart_expects():
    steps = instructions()
    users = [args for word, args in steps if word == "USER"]
    chart = yaml.safe_load((ROOT / "charts/berth/values.yaml").read_text())["podSecurityContext"]
    assert users == [f"{chart['runAsUser']}:{chart['runAsGroup']}"]
    assert ("ENTRYPOINT", '["berth"]') in steps


def test_the_build_context_holds_only_what_the_build_copies():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore
    assert {line for line in ignore if line.startswith("!")} == {"!pyproject.toml", "!README.md", "!berth/"}
