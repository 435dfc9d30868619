"""Latency samples to the figures the benchmarks print, and the tables they print them in."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Latency:
    """Per-operation latencies in milliseconds, and how many operations ran in how long."""

    count: int
    seconds: float  # the time spent in the operations themselves
    p50: float
    p99: float
    max: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds else math.inf


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted samples, nearest rank."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency(samples_ns: Sequence[int]) -> Latency:
    ordered = sorted(samples_ns)
    ms = [s / 1e6 for s in ordered]
    return Latency(
        count=len(ms),
        seconds=sum(ordered) / 1e9,
        p50=percentile(ms, 50),
        p99=percentile(ms, 99),
        max=ms[-1] if ms else math.nan,
    )


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value >= 100:
            return f"{value:.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table under a `### title` line (RESULTS.md takes it as it is)."""
    lines = [f"### {title}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
