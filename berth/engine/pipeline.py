"""Pipeline: a chain of steps with the compiler of a pod's berth annotations for it, what decide() runs.

berth.configure builds one from an allocator configuration (or berth's default chain).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from berth.cluster.model import Pod
from berth.engine.chain import Member, describe, flatten
from berth.engine.step import Step


@dataclass(frozen=True)
class Pipeline:
    """A chain of steps and the function that compiles a pod's berth annotations for it."""

    chain: Member
    compile_pod: Callable[[Pod], Any]
    # Names the chain and the configuration it was built from (a placement record carries it).
    digest: str = ""

    def names(self) -> list[Any] | str:
        return describe(self.chain)

    @cached_property
    def step_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in flatten(self.chain))

    @cached_property
    def with_events(self) -> dict[str, Step]:
        """The steps that add events to a placed pod, by name."""
        return {s.name: s for s in flatten(self.chain) if type(s).event is not Step.event}
