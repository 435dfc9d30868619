"""The benchmarks at their smallest size: they run, and every figure they print is a number.

No timing is asserted: the figures depend on the machine. bench/RESULTS.md holds the real run.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.scenarios import scenarios

ROOT = Path(__file__).resolve().parent.parent


def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every Markdown table under a `### title`, as rows of header -> cell."""
    tables: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        title, *lines = block.strip().splitlines()
        rows = [
            [c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")
        ]
        header, body = rows[0], rows[2:]
        tables[title] = [dict(zip(header, row, strict=True)) for row in body]
    return tables


def _number(cell: str) -> float:
    value = float(cell)
    assert math.isfinite(value), cell
    return value


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    work = tmp_path_factory.mktemp("bench")
    args = ["bench", "--size", "tiny", "--only", "engine,extender", "--json", str(work / "out.json")]
    out = _bench(args, work)
    return out, json.loads((work / "out.json").read_text())


def _bench(args: list[str], cache: Path) -> str:
    """`python -m ARGS` from the project's root with its own bench cache: what it printed (it must
    succeed)."""
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env={**os.environ, "BERTH_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_engine_benchmark_prints_a_rate_and_latencies_for_every_scenario_and_chain(smoke_run):
    out, _ = smoke_run
    rows = _tables(out)["Engine: decisions (one core, in-process)"]
    expected = {(s.name, chain) for s in scenarios() for chain in s.chains}
    assert {(r["scenario"], r["chain"]) for r in rows} == expected
    for row in rows:
        assert _number(row["decisions/s"]) > 0
        p50, p99, worst = (_number(row[k]) for k in ("p50 ms", "p99 ms", "max ms"))
        assert 0 < p50 <= p99 <= worst
        assert int(row["candidates"]) >= 1


def test_the_index_figures_give_build_times_and_memory_per_10k_pods(smoke_run):
    out, _ = smoke_run
    (row,) = _tables(out)["Cluster index: build time and memory"]
    assert (row["nodes"], row["pods"]) == ("20", "468")
    for key in ("parse s", "convert s", "index s", "load_snapshot s"):
        assert _number(row[key]) >= 0
    assert _number(row["index MiB per 10k pods"]) > 0


def test_the_extender_benchmark_compares_every_verb_with_the_floor(smoke_run):
    out, results = smoke_run
    rows = _tables(out)["Extender over HTTP: berth against the floor"]
    for chain in ("tags", "default"):
        verbs = {r["verb"] for r in rows if r["chain"] == chain}
        assert {"filter", "bind", "filter+prioritize+bind"} <= verbs
    for row in rows:
        for key in ("berth p50 ms", "berth p99 ms", "floor p50 ms", "floor p99 ms", "p99 ratio"):
            assert _number(row[key]) > 0
    assert len(results["extender"]) == len(rows)


def test_the_audit_benchmark_times_every_case_and_counts_what_it_audited(tmp_path):
    out = _bench(["bench", "--size", "tiny", "--only", "audit"], tmp_path)
    table = _tables(out)["berth audit: the whole process, snapshot load included"]
    rows = {r["case"]: r for r in table}
    assert set(rows) == {"cluster", "what-if one-per-host", "what-if every pod"}
    for row in rows.values():
        assert (row["nodes"], row["pods"]) == ("20", "468")
        assert _number(row["wall s"]) > 0
    # The synthetic pods carry tags only; the what-if policies govern the bench app, then every pod.
    assert int(rows["cluster"]["pods audited"]) == 0
    assert int(rows["what-if one-per-host"]["pods audited"]) == 4
    assert (
        int(rows["what-if every pod"]["pods audited"]) == 468
    )  # 400 in the namespaces, 4 of the bench app, 64 of bench-zone


def test_the_identity_check_writes_the_same_digests_twice_and_one_per_decision(tmp_path):
    from bench import identity

    out = tmp_path / "digests.txt"
    assert identity.main([str(out), "--tiny"]) == 0
    lines = out.read_text().splitlines()
    chains = sum(len(s.chains) for s in scenarios())
    assert len(lines) == len(identity.TINY) * chains * identity.BURST
    assert lines == list(identity.digests(identity.TINY))  # the same seeds decide the same way
    assert len({line.split()[-1] for line in lines}) > len(lines) // 2  # each decision its own digest


def test_the_pairing_times_both_trees_in_either_order_and_leaves_no_worktree(tmp_path):
    def worktrees() -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True, check=True
        ).stdout

    before = worktrees()
    out = _bench(["bench.pair", "HEAD", "--size", "tiny", "--decisions", "60", "--turn", "10"], tmp_path)
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| ")]
    assert [r[0].strip() for r in rows[1:]] == ["HEAD first", "this tree first"]
    for _, mine, theirs, ratio in rows[1:]:
        for quantiles in (mine, theirs):
            p10, p50, p90 = map(_number, quantiles.split("/"))
            assert 0 < p10 <= p50 <= p90
        assert _number(ratio) > 0
    assert worktrees() == before


def test_the_narrow_shape_puts_its_holders_apart_and_counts_a_pod_off_their_nodes():
    """The scale runs' narrow shape: `existing` holders spread evenly over the nodes, the new pods
    asking for them in each scheduler's words, and a new pod on a node without a holder counted."""
    from bench.e2e import GROUP_LABEL, HOLDERS, _existing, _pod, narrow_violations

    holders = [_existing(i, 5000, "ns", "berth-scheduler", "require_with_tag", 5) for i in range(5)]
    assert [h["spec"]["nodeName"] for h in holders] == [f"node-{i * 1000:04d}" for i in range(5)]
    assert all(json.loads(h["metadata"]["annotations"]["berth.dev/tags"]) == [HOLDERS] for h in holders)
    berths = _pod("p-00000", "ns", "berth-scheduler", "g0", "require_with_tag")
    assert json.loads(berths["metadata"]["annotations"]["berth.dev/affinity"]) == {
        "require_with_tag": [HOLDERS]
    }
    kubes = _pod("p-00001", "ns", "default-scheduler", "g1", "narrow-affinity")
    (term,) = kubes["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"] == {GROUP_LABEL: HOLDERS}
    berths["spec"]["nodeName"], kubes["spec"]["nodeName"] = "node-3000", "node-3001"
    assert narrow_violations([*holders, berths, kubes]) == 1


def test_a_scale_run_says_what_it_asked_of_the_api_server_per_pod():
    """The requests a run made, per pod placed, from kube-apiserver's counters before and after it:
    writes by verb and resource, watch events and their KB; lists and watches left out."""
    from bench import e2e

    before = e2e.request_counts(
        'apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="binding",verb="POST",version="v1"} 10\n'
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="namespace",subresource="",verb="LIST",version="v1"} 3\n'
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 40\n'
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 40960\n'
        'apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 0.5\n'
        'apiserver_request_duration_seconds_count{resource="pods",subresource="binding",verb="POST"} 10\n'
        'apiserver_request_duration_seconds_sum{resource="pods",subresource="status",verb="PATCH"} 9.0\n'
        "# HELP apiserver_request_total Counter\n"
    )
    after = e2e.request_counts(
        'apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="binding",verb="POST",version="v1"} 30\n'
        'apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="resource",subresource="status",verb="PATCH",version="v1"} 10\n'
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="namespace",subresource="",verb="LIST",version="v1"} 9\n'
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 120\n'
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 204800\n'
        'apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 1.5\n'
        'apiserver_request_duration_seconds_count{resource="pods",subresource="binding",verb="POST"} 30\n'
        'apiserver_request_duration_seconds_sum{resource="pods",subresource="status",verb="PATCH"} 99.0\n'
    )
    said = e2e.requests_per_pod(before, after, 20)
    assert said.split(", ") == [
        "watch KB pods 8.00",
        "watch events pods 4.00",
        "POST pods/binding 1.00",
        "PATCH pods/status 0.50",
    ]
    # the API server's own time for the run's 20 Bindings: 1.0 s, 50 ms each (other requests' left out)
    assert e2e.binding_ms(before, after) == pytest.approx(50.0)
    assert e2e.binding_ms(after, after) is None
    # the lists are counted per run, not per pod; no watch was ended
    assert e2e.lists_and_ended_watches(before, after) == "LIST pods 6"
    assert e2e.lists_and_ended_watches(after, after) == "none"


def test_a_scale_run_counts_the_watches_the_api_server_ended_for_falling_behind():
    """A watcher that does not keep up (berth serve's, during a run) is ended by kube-apiserver and
    must catch up or list again: the run says how many, however few, beside the lists."""
    from bench import e2e

    page = (
        'apiserver_terminated_watchers_total{group="",resource="pods",version="v1"} %d\n'
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",'
        'scope="cluster",subresource="",verb="LIST",version="v1"} %d\n'
    )
    before, after = e2e.request_counts(page % (2, 1)), e2e.request_counts(page % (3, 3))
    assert e2e.lists_and_ended_watches(before, after) == "LIST pods 2, watches ended, too slow: pods 1"
    # said once, per run: not again among the per-pod figures
    assert "watches ended" not in e2e.requests_per_pod(before, after, 1)


def test_a_run_with_the_floor_compares_berth_with_the_floor_and_the_floor_with_kube():
    """With `--e2e-floor`, each size gets berth-scheduler's rate against the floor's and the floor's
    against kube-scheduler's default profile; a size run without the floor gets no such row."""
    from bench import e2e

    def row(nodes: int, scheduler: str, rate: float) -> list:
        return [nodes, 25000, 3000, scheduler, "none", 3000, rate, 0, 3.0, 2.0, 3.5, 0.7, 1.0, 4.0, "-"]

    rows = [
        row(5000, "default-scheduler", 380.0),
        row(5000, "berth-scheduler", 190.0),
        row(5000, e2e.FLOOR, 250.0),
        row(500, "default-scheduler", 400.0),
        row(500, "berth-scheduler", 300.0),
    ]
    assert e2e.floor_ratios(rows) == [[5000, 25000, 3000, 190.0, 250.0, 380.0, 0.76, 250.0 / 380.0]]
    assert len(e2e.FLOOR_HEADERS) == 8


def test_the_mend_benchmark_finds_a_burst_where_each_mend_answers(tmp_path):
    from bench.mends import mending_steps

    out = _bench(["bench.mends", "--size", "tiny", "--decisions", "12", "--rounds", "1"], tmp_path)
    rows = _tables(out)["Each mend against its answer worked out afresh"]
    steps = {cls.name for cls in mending_steps()}
    assert steps == {r["step"] for r in rows} and len(steps) == 3
    for row in rows:
        for cell in list(row.values())[3:]:
            _number(cell.split(" (")[0])
    # A mend timed in no burst where it answers would say nothing of what it saves.
    for step in steps:
        assert max(float(r["mended answers per burst"]) for r in rows if r["step"] == step) > 0, step


@pytest.mark.parametrize("shape", ["plain", "preferred", "service"])
def test_the_sampled_benchmark_places_every_pod_warm_and_cold_and_says_where_the_filter_spends(
    tmp_path, shape
):
    """bench.sampled: berth's filter and bind over kube's sample of a cluster built in process, each
    pod placed (it stops otherwise), the cold phase's filter broken down into its parts, and the same
    calls answered by the floor in process."""
    from bench import sampled

    out = _bench(
        ["bench.sampled", "--shape", shape, "--nodes", "300", "--existing", "600", "--pods", "20", "--steps"],
        tmp_path,
    )
    tables = _tables(out)
    rows = {r["verb"]: r for r in tables["Kube's sample in process: a new pod, warm and cold"]}
    assert set(rows) == {"filter", "bind"}
    for row in rows.values():
        # kube's numFeasibleNodesToFind at 300 nodes: (50 - 300 / 125) % of them
        assert (row["shape"], row["nodes"], row["running"], row["names a call"], row["pods"]) == (
            shape,
            "300",
            "600",
            "144",
            "20",
        )
        for phase in ("warm", "cold"):
            assert 0 < _number(row[f"{phase} p50 ms"]) <= _number(row[f"{phase} p99 ms"])
    floors = {r["verb"]: r for r in tables[sampled.FLOOR_TITLE]}
    assert set(floors) == {"filter", "bind"}
    for verb, floor in floors.items():
        # the floor answers the same calls, doing less than berth with each
        assert 0 < _number(floor["floor cold p50 ms"]) <= _number(floor["floor cold p99 ms"])
        assert _number(floor["berth cold p50 ms"]) == _number(rows[verb]["cold p50 ms"])
        assert _number(floor["berth / floor"]) > 1
    parts = {r["step"]: r for r in tables["Where the cold filter's time goes"]}
    assert {"kube/default-score", "(the candidates made from the names)"} <= set(parts)
    if shape == "preferred":  # its pods are scored for their pod anti-affinity, and that is timed
        assert "kube/preferences" in parts
    assert sum(_number(r["share"]) for r in parts.values()) == pytest.approx(1, abs=0.08)  # 2 decimals each
    assert all(_number(r["cold us a filter (mean)"]) >= 0 for r in parts.values())


def test_the_sampled_benchmark_without_some_steps_places_every_pod_by_the_rest_of_the_chain(tmp_path):
    """bench.sampled --without: the named steps leave the chain (an `or` left with one member keeps
    that member), every pod is still placed, and none of them is timed; a name the chain lacks is
    refused with its name."""
    from bench import sampled
    from berth.configure import build_pipeline
    from berth.engine.chain import Or, flatten

    gone = ["alloc/hard-filter-large-servers", "alloc/score-next-reboot", "tags/require_with_tag"]
    small = ["--nodes", "300", "--existing", "600", "--pods", "20"]
    out = _bench(["bench.sampled", *small, "--steps", "--without", ",".join(gone)], tmp_path)
    assert f"The chain without 3 of its steps: {', '.join(sorted(gone))}" in out
    tables = _tables(out)
    rows = tables["Kube's sample in process: a new pod, warm and cold"]
    assert {r["verb"] for r in rows} == {"filter", "bind"}
    timed = {r["step"] for r in tables["Where the cold filter's time goes"]}
    assert not timed & set(gone) and "kube/default-score" in timed

    pipeline = build_pipeline(None, kube_filters=False)
    shorter = sampled.without_steps(pipeline, set(gone))
    names = [s.name for s in flatten(shorter.chain)]
    assert names == [n for n in pipeline.step_names if n not in gone]
    # The reserve's `or` lost its first member: the identity stands in its place, not an `or` of one.
    assert not any(isinstance(m, Or) and len(m.members) < 2 for m in shorter.chain.members)
    with pytest.raises(ValueError, match="not a step of the chain: alloc/no-such-step"):
        sampled.without_steps(pipeline, {"alloc/no-such-step", "alloc/score-next-reboot"})
    with pytest.raises(ValueError, match="no step of the chain would be left"):
        sampled.without_steps(pipeline, set(pipeline.step_names))


def test_the_sampled_benchmark_asks_with_kubes_workers_interleaved_at_the_share_given():
    """bench.sampled --interleaved: at 0 every filter call is one run of kube's order from where the
    last stopped; at 1 every call interleaves two workers' runs (its names are not one run, yet the same
    nodes as kube's chunks from there); outside 0..1 it is refused."""
    import random

    from bench import sampled

    order = [f"node-{i:04d}" for i in range(2000)]
    rng = random.Random(3)
    for start in (0, 700, 1900):
        assert sampled.kube_asks(order, start, 400, rng, interleaved=0.0) == [
            order[(start + k) % 2000] for k in range(400)
        ]
        asked = sampled.kube_asks(order, start, 400, rng, interleaved=1.0)
        assert len(set(asked)) == 400 and asked != [order[(start + k) % 2000] for k in range(400)]
        assert {order.index(n) for n in asked} <= {(start + k) % 2000 for k in range(2 * 400)}
    result = subprocess.run(
        [sys.executable, "-m", "bench.sampled", "--interleaved", "1.5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "--interleaved: a share from 0 to 1" in result.stderr


def test_the_sampled_benchmark_with_the_watch_counts_every_part_of_a_pod(tmp_path):
    """bench.sampled --watch: besides filter and bind, the bookkeeping after the filter's answer and
    the pod's three watch events, each timed, and each pod's parts summed."""
    out = _bench(
        ["bench.sampled", "--nodes", "300", "--existing", "600", "--pods", "20", "--watch"], tmp_path
    )
    rows = {r["verb"]: r for r in _tables(out)["Kube's sample in process: a new pod, warm and cold"]}
    parts = ["filter", "bind", "filter: after the answer", "watch: created", "watch: bound", "watch: started"]
    assert set(rows) == {*parts, "the pod, all of the above"}
    for phase in ("warm", "cold"):
        for row in rows.values():
            assert 0 < _number(row[f"{phase} p50 ms"]) <= _number(row[f"{phase} p99 ms"])
        whole = _number(rows["the pod, all of the above"][f"{phase} p50 ms"])
        assert whole > max(_number(rows[p][f"{phase} p50 ms"]) for p in parts)  # each part > 0


def test_a_scale_run_says_how_long_berth_took_to_answer_filter_and_bind():
    """The mean answer per verb over a run, from berth serve's own latency histogram before and
    after it; a run where berth was not asked (kube's own) says so."""
    from prometheus_client import generate_latest

    from bench import e2e
    from berth.cluster.view import ClusterView
    from berth.configure import build_pipeline
    from berth.extender.app import build_extender
    from berth.extender.placer import Writes
    from berth.extender.serve import SnapshotCluster, _no_binding

    async def _no_events(pod, events) -> None:
        return None

    app = build_extender(
        SnapshotCluster(ClusterView()),
        rules=build_pipeline(None, kube_filters=False),
        with_kube=build_pipeline(None, kube_filters=True),
        writes=Writes(bind=_no_binding, record=_no_events),
    )
    metrics = app.app.state.metrics

    def counts() -> dict[str, float]:
        text = generate_latest(metrics.registry).decode()
        samples = {
            name: float(value)
            for line in text.splitlines()
            if line.startswith(e2e.ANSWER_SECONDS)
            for name, _, value in [line.rpartition(" ")]
        }
        return e2e.answer_times(samples)

    metrics.latency.labels("filter").observe(0.5)
    before = counts()
    assert e2e.answers(before, counts()) == "berth answered (mean ms): -"
    # 100 filters: 60 in (1, 1.5] ms, 39 in (1.5, 2], one of 0.4 s; the one before the run is not counted
    for seconds in [0.0012] * 60 + [0.0018] * 39 + [0.4]:
        metrics.latency.labels("filter").observe(seconds)
    metrics.latency.labels("bind").observe(0.004)
    # p50: the 50th of 100 falls 50/60 of the way through (1, 1.5]; p99: the 99th ends (1.5, 2]; the
    # one bind at the top of (3, 4]
    assert e2e.answers(before, counts()) == (
        "berth answered (mean ms): filter 5.42 (p50 1.42, p99 2.00), bind 4.00 (p50 3.50, p99 3.99)"
    )


def test_a_quantile_is_read_from_buckets_as_histogram_quantile_reads_it():
    from bench.e2e import quantile

    inf = float("inf")
    assert quantile(0.5, []) is None and quantile(0.5, [(1.0, 0), (inf, 0)]) is None
    assert quantile(0.5, [(1.0, 4), (2.0, 8), (inf, 8)]) == 1.0  # the 4th ends the first bucket
    assert quantile(0.75, [(1.0, 4), (2.0, 8), (inf, 8)]) == 1.5  # halfway through the second
    assert quantile(0.25, [(1.0, 4), (2.0, 8), (inf, 8)]) == 0.5  # the first from 0
    assert quantile(0.99, [(1.0, 4), (2.0, 8), (inf, 10)]) == 2.0  # past the last bound: that bound


def test_the_state_benchmark_lists_every_object_and_says_what_it_cost(tmp_path):
    """bench.state: the live cache lists a generated cluster page by page; the table says how long it
    took and the memory it held, per 10,000 pods too."""
    out = _bench(["bench.state", "--nodes", "40", "--pods", "1200"], tmp_path)
    (row,) = _tables(out)["The live cache listing a cluster, in process"]
    assert row["nodes"] == "40" and row["pods"] == "1200"
    assert _number(row["ready (s)"]) > 0 and _number(row["JSON listed (MiB)"]) > 0
    assert _number(row["listed again (s)"]) > 0
    assert _number(row["RSS before (MiB)"]) <= _number(row["after"]) <= _number(row["peak"])
