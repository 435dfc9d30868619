"""`berth version`: the version and the commit it was built from."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.options import (
    examples,
)
from berth.output import emit, render


def add_parser(sub: Any, prog: str) -> None:
    ver = sub.add_parser(
        "version",
        help="berth's version and the commit it was built from",
        description="Print berth's version and the git commit it was built from (the image's build "
        "argument BERTH_COMMIT, or the checkout berth runs from; unknown otherwise).",
        epilog=examples(prog, "version", "version -o json"),
    )
    ver.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    ver.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from berth.version import version_info

    info = version_info()
    emit(
        render(
            args,
            body=lambda: info,
            table=lambda wide, headers: f"berth {info['version']} (commit {info['commit']})",
            names=lambda: [],
        )
    )
    return 0
