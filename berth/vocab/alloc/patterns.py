"""Patterns in affinity rules: globs and regular expressions, both run by RE2.

RE2 matches in time linear in the input and never backtracks, so a pattern from a pod annotation cannot
stall the scheduler. Limits keep one pattern cheap to compile: its length, RE2's memory budget and the
size of the compiled program. A glob knows one wildcard, `*` (any run of characters, as sdc-designation's
"web*"); every other character is literal, and the glob must match the whole value.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import re2

MAX_PATTERN = 512
MAX_PROGRAM = 4000
MAX_MEMORY = 1 << 20


class PatternError(ValueError):
    """A pattern that does not compile or breaks a limit; the message names the rule."""


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.log_errors = False
    return options


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re2._Regexp:
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"invalid regular expression: {detail}") from exc
    if compiled.programsize > MAX_PROGRAM:
        raise PatternError(
            f"the regular expression is too large (program size {compiled.programsize}, limit {MAX_PROGRAM})"
        )
    return compiled


def _check_length(value: str) -> None:
    if len(value) > MAX_PATTERN:
        raise PatternError(f"the pattern is longer than {MAX_PATTERN} characters")


def regex(value: str) -> Callable[[str], bool]:
    """sdc-designation writes a regular expression between slashes ("/web/"); the slashes are optional. It
    matches anywhere in the value unless anchored."""
    _check_length(value)
    body = value[1:-1] if len(value) >= 2 and value.startswith("/") and value.endswith("/") else value
    compiled = _compile(body)
    return lambda text: compiled.search(text) is not None


def glob(value: str) -> Callable[[str], bool]:
    """`*` matches any run of characters; the glob must match the whole value."""
    _check_length(value)
    if "*" not in value:
        return lambda text: text == value
    body = ".*".join(re2.escape(part) for part in value.split("*"))
    compiled = _compile(f"(?s)^{body}$")
    return lambda text: compiled.search(text) is not None


def exact(value: str) -> Callable[[str], bool]:
    return lambda text: text == value
