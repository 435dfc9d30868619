"""`kubectl berth ...`: berth as a kubectl plugin (the `kubectl-berth` command on the PATH).

kubectl hands a plugin every argument after its name, so kubectl's global flags come after `berth`:
`kubectl berth --context prod simulate --pod web.yaml` or `kubectl berth simulate --pod web.yaml -n shop`.
--kubeconfig, --context and -n/--namespace are taken wherever they stand; the commands that read a
cluster read the live one unless --cluster FILE is given.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from berth import cli

# The commands that read a cluster (--cluster FILE or --live): the plugin reads the live one.
LIVE_COMMANDS = ("simulate", "explain", "audit", "capacity", "rebalance")
USAGE = """usage: kubectl berth [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] COMMAND ...

berth's commands on the cluster of your kubeconfig (--cluster FILE reads a snapshot instead):
  simulate   where would this pod go, and why               reads only
  explain    why a pod is where it is, or why it is Pending   reads only
  audit      the running pods whose node breaks their rules   reads only
  capacity   how many more pods fit, or the room per node     reads only
  rebalance  move the pods whose node breaks their rules      a plan; with --apply it EVICTS pods
  check      whether berth works on the cluster              reads only (and one dry-run pod)
Each takes --help; any other berth command is passed on as `berth COMMAND`."""


def _globals() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("-n", "--namespace")
    return parser


def berth_argv(argv: Sequence[str]) -> list[str] | None:
    """The `berth` arguments for `kubectl berth ARGV`; None when there is no command (print the usage)."""
    flags, rest = _globals().parse_known_args(list(argv))
    if not rest or rest[0].startswith("-"):
        if rest and rest[0] in ("--version",):
            return rest
        return None
    command, *args = rest
    given = [
        arg
        for name, value in (("--kubeconfig", flags.kubeconfig), ("--context", flags.context))
        if value is not None
        for arg in (name, value)
    ]
    if flags.namespace is not None:
        given += ["--namespace", flags.namespace]
    if command in LIVE_COMMANDS and not any(
        a in ("--live", "--cluster") or a.startswith("--cluster=") for a in args
    ):
        given.append("--live")
    return [command, *given, *args]


def main(argv: Sequence[str] | None = None) -> int:
    args = berth_argv(sys.argv[1:] if argv is None else argv)
    if args is None:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kubectl berth | head` ends quietly
        print(USAGE)
        return 0
    return cli.main(args, prog="kubectl berth")


if __name__ == "__main__":
    sys.exit(main())
