"""What is generated from the chart, and the check that it is up to date.

    python charts/render_chart.py            # rewrite the generated files
    python charts/render_chart.py --check    # exit 1 naming each file that is out of date

Generated from charts/berth:
- manifests/install.yaml: the chart rendered with its default values into namespace berth-system on a
  cluster with cert-manager (helm template), for users without Helm;
- manifests/scheduler/scheduler-config.yaml: the scheduler configuration of the chart's ConfigMap, rendered
  into namespace kube-system (the lease's namespace), for a kube-scheduler run outside the chart;
- the values table of charts/berth/README.md, from the "# --" comments of values.yaml.

helm is $BERTH_HELM, else the one e2e/build-controlplane.sh builds into its cache.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts/berth"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"
INSTALL = ROOT / "manifests/install.yaml"
SCHEDULER_CONFIG = ROOT / "manifests/scheduler/scheduler-config.yaml"
RELEASE = "berth"
NAMESPACE = "berth-system"
# The chart rendered for kubectl users: cert-manager issues the webhook certificate (a certificate Helm
# generated would be the same for every user of the file).
# Its kube-scheduler is the version the end-to-end suite runs: Helm's own default would stand for the
# cluster's (the chart's default tag), and there is no cluster when rendering a file.
KUBE_VERSION = "v1.36.3"
INSTALL_ARGS = (
    *("--namespace", NAMESPACE),
    *("--api-versions", "cert-manager.io/v1"),
    *("--kube-version", KUBE_VERSION),
)
TABLE_START, TABLE_END = "<!-- values-table:start -->", "<!-- values-table:end -->"
GENERATED = "Generated from charts/berth by `python charts/render_chart.py`: edit the chart, not this file."


def helm_binary() -> str:
    if os.environ.get("BERTH_HELM"):
        return os.environ["BERTH_HELM"]
    sys.path.insert(0, str(ROOT / "e2e"))
    from controlplane import find_bin_dir

    return str(find_bin_dir() / "helm")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([helm_binary(), *args], capture_output=True, text=True, check=check)


def render(*args: str, release: str = RELEASE, crds: bool = False) -> str:
    """`helm template` of the chart, for the Kubernetes version the end-to-end suite runs unless the
    arguments name one (without a cluster, the chart refuses to guess it); CalledProcessError carries
    helm's stderr."""
    extra = ["--include-crds"] if crds else []
    if not any(a == "--kube-version" or a.startswith("--kube-version=") for a in args):
        extra += ["--kube-version", KUBE_VERSION]
    return helm("template", release, str(CHART), *extra, *args).stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def install_yaml() -> str:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    return (
        "# berth for kubectl: the chart charts/berth with its default values, in namespace berth-system.\n"
        "# Needs cert-manager (the webhook's certificate) and the CRDs of manifests/crds/ applied first:\n"
        "#   kubectl apply --server-side -f manifests/crds/\n"
        "#   kubectl apply --server-side -f manifests/install.yaml\n"
        f"# {GENERATED}\n"
        "---\n" + yaml.safe_dump(namespace, sort_keys=False) + render(*INSTALL_ARGS)
    )


def scheduler_config() -> str:
    text = render("--namespace", "kube-system", "--show-only", "templates/scheduler/configmap.yaml")
    config_map = next(d for d in documents(text) if d["metadata"]["name"].endswith("-scheduler-config"))
    return f"# {GENERATED}\n" + config_map["data"]["config.yaml"]


# -- the values table --------------------------------------------------------------------------------
def documented_values() -> list[tuple[str, Any, str]]:
    """(dotted key, default, description) for every key of values.yaml with a "# --" comment above it."""
    defaults = yaml.safe_load(VALUES.read_text())
    rows: list[tuple[str, Any, str]] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    comment: list[str] = []
    for line in VALUES.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            comment = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if comment:
                comment.append(stripped[1:].strip())
            continue
        match = re.match(r"^( *)([A-Za-z0-9_.-]+):", line)
        if not match or stripped.startswith("-"):
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [k for _, k in stack] + [key]
        stack.append((indent, key))
        if comment:
            value: Any = defaults
            for part in path:
                value = value[part]
            rows.append((".".join(path), value, " ".join(comment)))
            comment = []
    return rows


def undocumented_values() -> list[str]:
    """Keys of values.yaml that neither carry a "# --" comment nor sit inside a documented key."""
    documented = {key for key, _, _ in documented_values()}
    missing: list[str] = []

    def walk(value: Any, path: list[str]) -> None:
        dotted = ".".join(path)
        if path and dotted in documented:
            return
        if isinstance(value, dict) and value:
            for key, child in value.items():
                walk(child, [*path, key])
        elif path:
            missing.append(dotted)

    walk(yaml.safe_load(VALUES.read_text()), [])
    return missing


def values_table() -> str:
    lines = ["| key | default | description |", "|---|---|---|"]
    for key, default, description in documented_values():
        shown = json.dumps(default, separators=(", ", ": ")).replace("|", "\\|")
        text = description.replace("|", "\\|")
        lines.append(f"| `{key}` | `{shown}` | {text} |")
    return "\n".join(lines)


def readme() -> str:
    text = README.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[:start] + "\n" + values_table() + "\n" + text[end:]


GENERATED_FILES = {INSTALL: install_yaml, SCHEDULER_CONFIG: scheduler_config, README: readme}


def stale() -> list[Path]:
    return [path for path, make in GENERATED_FILES.items() if path.read_text() != make()]


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        out_of_date = stale()
        for path in out_of_date:
            print(f"{path.relative_to(ROOT)} is out of date: run python charts/render_chart.py")
        return 1 if out_of_date else 0
    for path, make in GENERATED_FILES.items():
        path.write_text(make())
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
