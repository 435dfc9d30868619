"""The `berth` command: one module per command (its parser and its run side by side, as kubectl's
package per verb), the options they share (options.py) and what they read (sources.py)."""

from berth.cli.options import EXIT_INVALID, EXIT_NO_FIT, EXIT_PLACED
from berth.cli.root import build_parser, main

__all__ = ["EXIT_INVALID", "EXIT_NO_FIT", "EXIT_PLACED", "build_parser", "main"]
