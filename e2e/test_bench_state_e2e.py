"""berth's stack started on a filled cluster (`python -m bench --only state`), at a small size: every
figure is measured, every policy counts its governed pods, the new pods are bound one per node, and the
standby takes over from a killed leader."""

from __future__ import annotations

from bench import state_e2e


def test_the_state_benchmark_starts_berth_on_a_filled_cluster_and_binds_the_burst_one_per_node() -> None:
    row = dict(zip(state_e2e.HEADERS, state_e2e.run(60, 600, 30, timeout=300), strict=True))
    assert row["nodes"] == 60 and row["pods"] == 600 and row["new pods"] == 30
    assert row["nodes with two"] == 0, row  # ONE_PER_HOST held for the whole burst
    for figure in ("kube-scheduler RSS MiB", "berth serve peak MiB", "operator peak MiB", "bound s"):
        assert row[figure] > 0, row
    # the operator counted after it served its webhooks, berth serve was ready before either
    assert 0 < row["operator webhooks s"] <= row["operator counted s"], row
    # the standby took over from a killed leader by its fence, and bound a pod after the Lease lapsed
    assert row["caught up s"] < row["failover s"] < 60, row
    # and back to a replica without a fence pod, which listed the cluster again on taking over
    assert 0 < row["listed s"] < row["failover listing s"] < 60, row
