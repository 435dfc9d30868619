"""berth's exceptions.

    BerthError
    ├── SpecError                 400-like: what a user wrote is invalid
    │   ├── InvalidAnnotation     a berth.dev/* annotation on a pod is malformed
    │   ├── InvalidPolicy         a PlacementPolicy is malformed
    │   ├── InvalidConfig         the allocator configuration is malformed
    │   └── RuleCompileError      a regular expression or CEL rule does not compile
    ├── SnapshotError             a cluster snapshot file cannot be read
    │   └── InputError            a file (or stdin) is not UTF-8/UTF-16 text of YAML or JSON objects
    └── (ApiError, berth.cluster.kubeapi: the API server refused or could not be reached)

A node that a rule rejects is a `berth.engine.Reason`, and a pod no node fits is a Decision with a 409
error, never an exception.
"""

from __future__ import annotations

from typing import Any, Self


class BerthError(Exception):
    """Base class of every error berth raises on purpose."""

    code: int = 500

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context


class SpecError(BerthError):
    """A specification a user wrote is invalid (HTTP 400)."""

    code = 400

    def __init__(self, message: str, *, field: str, errors: list[str] | None = None) -> None:
        super().__init__(message, field=field)
        self.field = field
        # Every problem found, not just the first: `berth validate` prints them all.
        self.errors = errors if errors is not None else [message]

    @classmethod
    def from_problems(cls, problems: list[str], *, field: str | None = None) -> Self:
        """The error of every problem found, each a line that starts with its field: one problem is
        the message; more are "N problems: first; second; ...". The field is `field`, else the
        first problem's."""
        message = problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems)
        return cls(
            message, field=field if field is not None else problems[0].split(":", 1)[0], errors=problems
        )


class InvalidAnnotation(SpecError):
    """A berth.dev/* annotation on a pod is malformed."""


class InvalidPolicy(SpecError):
    """A PlacementPolicy is malformed."""


class InvalidConfig(SpecError):
    """The allocator configuration is malformed."""


class RuleCompileError(SpecError):
    """A regular expression or CEL rule does not compile or breaks a limit."""


class SnapshotError(BerthError):
    """A cluster snapshot file cannot be read or holds an unusable object."""

    code = 400

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(f"{source}: {message}", source=source)
        self.source = source


class InputError(SnapshotError):
    """A file or standard input that is not text berth reads (UTF-8, or UTF-16 with its byte order
    mark) of YAML or JSON objects, or cannot be read at all; the message names it, in one line."""
