"""The plain scale shape with the extender protocol's floor (`python -m bench ... --e2e-floor`): the floor
extender (bench/floor) is built, binds every pod berth-scheduler's profile gives it, and its run is
counted and compared as berth's is, with its own CPU where berth's runs count berth serve's."""

from __future__ import annotations

from bench import e2e


def test_the_floor_extender_binds_every_pod_of_its_run_and_gets_a_ratio() -> None:
    rows, ratios, _ = e2e.scale([(30, 60)], new=100, shape="plain", floor=True)
    by_run = {row[3]: row for row in rows}
    assert set(by_run) == {"default-scheduler", "berth-scheduler", e2e.FLOOR}
    assert [row[5] for row in rows] == [100, 100, 100], rows  # every new pod bound in every run
    floor = by_run[e2e.FLOOR]
    assert floor[9] > 0, floor  # the floor's own CPU, in the column berth serve's has in berth's run
    assert floor[14] == "-", floor  # no berth binds counted: berth serve was not asked
    compared = {row[3]: row[6] for row in ratios}
    assert compared.keys() == {"berth-scheduler", e2e.FLOOR} and compared[e2e.FLOOR] > 0, ratios
    # berth against the floor, and the floor against kube-scheduler, from the same rates
    (against,) = e2e.floor_ratios(rows)
    assert against[:6] == [
        30,
        60,
        100,
        by_run["berth-scheduler"][6],
        floor[6],
        by_run["default-scheduler"][6],
    ]
    assert against[6] == by_run["berth-scheduler"][6] / floor[6] and against[7] == compared[e2e.FLOOR]
