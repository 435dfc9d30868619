"""The soak benchmark (`python -m bench --only soak`), at a small size: every round binds its pods and
deletes them all, a restart of kube-apiserver included, and each round's figures are measured."""

from __future__ import annotations

from bench import soak


def test_the_soak_benchmark_runs_its_rounds_through_a_restart_and_measures_each() -> None:
    rows, compared = soak.run(soak.RESTART_EVERY, 30, 10, timeout=120)
    assert [r[0] for r in rows] == list(range(1, soak.RESTART_EVERY + 1))  # the last one after the restart
    assert rows[-1][1] == soak.RESTART_EVERY * (30 + soak.REFUSED)
    assert all(r[2] > 0 and r[3] > 0 and r[4] > 0 and r[5] > 0 for r in rows), rows
    assert [c[:2] for c in compared] == [
        ["berth serve", "MiB"],
        ["berth serve", "fds"],
        ["operator", "MiB"],
        ["operator", "fds"],
    ]
