"""The options and parser pieces the commands share: the cluster source, the kubeconfig, the exit
codes, the help's examples."""

from __future__ import annotations

import argparse
from typing import Any

EXIT_PLACED, EXIT_NO_FIT, EXIT_INVALID = 0, 1, 2
CONFIG_HELP = "allocator configuration (allocationDescription, defaults, packages); see docs/allocator.md"


def add_kubeconfig_args(
    parser: argparse.ArgumentParser, *, namespace: bool = False, live: bool = False
) -> None:
    """--kubeconfig FILE and --context NAME (and -n/--namespace NAME), taken as kubectl takes them: the
    file, else $KUBECONFIG's files merged, else ~/.kube/config, else the pod's service account."""
    where = "with --live: " if live else ""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{where}the kubeconfig (default: $KUBECONFIG, merged; ~/.kube/config; in a pod, its "
        "service account)",
    )
    parser.add_argument("--context", metavar="NAME", help=f"{where}the kubeconfig context (default: current)")
    if namespace:
        parser.add_argument(
            "-n",
            "--namespace",
            metavar="NAME",
            help="namespace of names and pods that have none (default: the context's namespace with --live, "
            "else default)",
        )


def add_cluster_source(
    parser: argparse.ArgumentParser, *, namespace: bool = True, all_namespaces: bool = False
) -> None:
    """--cluster FILE or --live [--kubeconfig FILE --context NAME]: where the offline commands read the
    cluster."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster", metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml (- reads stdin)"
    )
    source.add_argument(
        "--live", action="store_true", help="read the cluster through the kubeconfig, change nothing"
    )
    add_kubeconfig_args(parser, namespace=namespace, live=True)
    if all_namespaces:
        parser.add_argument(
            "-A", "--all-namespaces", action="store_true", help="find NAME in whichever namespace has it"
        )


class Formatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; the examples epilog as written, one command a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own error, shown with its own usage
    (argparse would pass it up to `berth`, whose usage says nothing of the subcommand's options)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def examples(prog: str, *commands: str) -> str:
    return "examples:\n" + "\n".join(
        f"  {c}" if c.startswith("kubectl ") else f"  {prog} {c}" for c in commands
    )


def count(text: str) -> int:
    """A whole number of 0 or more, as an option's value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


# The options several commands take, declared once; a command says what they mean for it in `help`.
WHAT_IF_CONFIG = CONFIG_HELP + "; the what-if of another one"
POD_HELP = "a Pod, or a workload with a pod template (- reads stdin)"


def add_config(parser: argparse.ArgumentParser, help: str = CONFIG_HELP) -> None:
    """--config FILE: an allocator configuration."""
    parser.add_argument("--config", metavar="FILE", help=help)


def add_policy(parser: argparse.ArgumentParser, help: str) -> None:
    """--policy FILE, repeatable: PlacementPolicies for a what-if."""
    parser.add_argument("--policy", action="append", metavar="FILE", help=help)


def add_pod(parser: argparse.ArgumentParser, *, required: bool = True, help: str = POD_HELP) -> None:
    """--pod FILE: the pod (or workload) a command places."""
    parser.add_argument("--pod", required=required, metavar="FILE", help=help)
