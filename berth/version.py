"""`berth version`: berth's version and the commit it was built from.

The commit comes from, in order: the BERTH_COMMIT environment variable (the image sets it from its
build argument of that name), `git rev-parse HEAD` when berth runs from a git checkout of itself (an
editable install, `python -m berth.cli` in the clone), else "unknown". Nothing is guessed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from berth import __version__

COMMIT_ENV = "BERTH_COMMIT"
UNKNOWN = "unknown"


def commit() -> str:
    given = os.environ.get(COMMIT_ENV, "").strip()
    if given:
        return given
    root = Path(__file__).resolve().parent.parent
    # Only berth's own checkout: an installed berth inside some other repository is not that commit.
    if not (root / ".git").exists() or not (root / "pyproject.toml").exists():
        return UNKNOWN
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    found = result.stdout.strip()
    return found if result.returncode == 0 and found else UNKNOWN


def version_info() -> dict[str, str]:
    return {"version": __version__, "commit": commit()}
