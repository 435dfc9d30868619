"""The allocator's scorers and their weights: one test per scorer for what the seed states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berth.configure import build_pipeline
from berth.engine import decide
from tests.alloc_helpers import chain, cn, trace, vm
from tests.builders import place, to_pod, view


def _parts(decision, step):
    return {n.name: round(n.parts[step].weighted, 6) for n in decision.nodes if step in n.parts}


def _ram_nodes():
    return [cn("small", memory="4Gi"), cn("medium", memory="8Gi"), cn("large", memory="16Gi")]


def test_unreserved_ram_with_its_default_weight_of_2_favours_the_node_with_the_most_unreserved_memory():
    decision = place(vm("new"), *_ram_nodes(), cfg=chain("score-unreserved-ram"))
    assert decision.chosen == "large"
    assert _parts(decision, "alloc/score-unreserved-ram") == {"small": 0, "medium": 0.666667, "large": 2}


def test_a_negative_weight_reverses_the_order_without_lowering_any_score():
    cfg = chain("score-unreserved-ram", defaults={"weight_unreserved_ram": -2})
    decision = place(vm("new"), *_ram_nodes(), cfg=cfg)
    assert decision.chosen == "small"
    assert _parts(decision, "alloc/score-unreserved-ram") == {"small": 2, "medium": 1.333333, "large": 0}


def test_unreserved_ram_counts_the_limits_of_the_pods_already_there():
    cluster = [cn("a", memory="8Gi"), cn("b", memory="8Gi"), vm("big", node="a", memory="6Gi")]
    assert place(vm("new"), *cluster, cfg=chain("score-unreserved-ram")).chosen == "b"


def test_unreserved_disk_favours_the_node_with_the_most_unreserved_ephemeral_storage():
    nodes = [cn("small", disk="10Gi"), cn("large", disk="100Gi")]
    decision = place(vm("new"), *nodes, cfg=chain("score-unreserved-disk"))
    assert _parts(decision, "alloc/score-unreserved-disk") == {"small": 0, "large": 1}


def test_num_owner_zones_favours_the_node_with_fewer_pods_of_the_namespace():
    cluster = [
        cn("crowded"),
        cn("quiet"),
        vm("a", node="crowded"),
        vm("b", node="crowded"),
        vm("c", node="quiet"),
        vm("x", namespace="other", node="quiet"),
        vm("y", namespace="other", node="quiet"),
    ]
    cfg = chain("score-num-owner-zones", defaults={"weight_num_owner_zones": 1})
    decision = place(vm("new"), *cluster, cfg=cfg)
    assert _parts(decision, "alloc/score-num-owner-zones") == {"crowded": 0, "quiet": 1}


def test_num_owner_zones_is_off_with_its_default_weight_of_0():
    decision = place(vm("new"), cn("n1"), cn("n2"), cfg=chain("score-num-owner-zones"))
    assert trace(decision, "alloc/score-num-owner-zones").note == "skipped: weight_num_owner_zones is 0"


def test_current_platform_favours_newer_platforms():
    nodes = [cn("old", kubelet="v1.33.4"), cn("new", kubelet="v1.35.1"), cn("mid", kubelet="v1.34.0")]
    decision = place(vm("new"), *nodes, cfg=chain("score-current-platform"))
    parts = _parts(decision, "alloc/score-current-platform")
    assert parts["new"] == 1 and parts["old"] == 0 and 0 < parts["mid"] < 1


def test_next_reboot_favours_nodes_whose_reboot_is_further_away_and_most_those_without_one():
    now = datetime.now(UTC)

    def rebooting(name, days):
        return cn(name, annotations={"berth.dev/next-reboot": (now + timedelta(days=days)).isoformat()})

    nodes = [rebooting("soon", 2), rebooting("later", 180), cn("never"), rebooting("past", -3)]
    decision = place(vm("new"), *nodes, cfg=chain("score-next-reboot"))
    parts = _parts(decision, "alloc/score-next-reboot")
    assert parts["never"] == parts["past"] == 0.5
    assert parts["soon"] == 0
    assert 0 < parts["later"] < 0.5


def test_the_weeks_to_a_reboot_follow_the_clock_over_the_same_view(monkeypatch):
    import berth.vocab.alloc.scorers as scorers

    start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    clock = [start]

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return clock[0]

    monkeypatch.setattr(scorers, "datetime", Clock)
    nodes = [
        cn("soon", annotations={"berth.dev/next-reboot": (start + timedelta(days=8, hours=1)).isoformat()}),
        cn("later", annotations={"berth.dev/next-reboot": (start + timedelta(days=30)).isoformat()}),
        cn("never"),
    ]
    pipeline = build_pipeline(chain("score-next-reboot"))
    live = view(*nodes)

    def weeks(v) -> dict[str, float]:
        decision = decide(to_pod(vm("new")), v, pipeline, seed=1)
        return {n.name: n.parts["alloc/score-next-reboot"].raw for n in decision.nodes}

    seen = []
    for later in (
        timedelta(0),
        timedelta(hours=1),
        timedelta(days=1),
        timedelta(days=1, hours=2),
        timedelta(days=8, hours=1),
        timedelta(days=9),
        timedelta(days=2),
    ):
        clock[0] = start + later
        seen.append(weeks(live))
        assert seen[-1] == weeks(view(*nodes))  # what a fresh view says at that moment
    assert [w["soon"] for w in seen] == [1, 1, 1, 0, 52, 52, 0]  # the clock going back is followed too
    assert [w["later"] for w in seen] == [4, 4, 4, 4, 3, 3, 4]
    assert {w["never"] for w in seen} == {52}


def test_uniform_random_is_reproducible_with_the_seed_and_varies_across_seeds():
    nodes = [cn(f"n{i}") for i in range(5)]
    cfg = chain("score-uniform-random")
    first = _parts(place(vm("new"), *nodes, cfg=cfg, seed=7), "alloc/score-uniform-random")
    assert first == _parts(place(vm("new"), *nodes, cfg=cfg, seed=7), "alloc/score-uniform-random")
    assert max(first.values()) == 0.5
    chosen = {place(vm("new"), *nodes, cfg=cfg, seed=s).chosen for s in range(20)}
    assert len(chosen) > 1


@pytest.mark.parametrize(
    ("scorer", "key"),
    [
        ("score-unreserved-ram", "weight_unreserved_ram"),
        ("score-unreserved-disk", "weight_unreserved_disk"),
        ("score-current-platform", "weight_current_platform"),
        ("score-next-reboot", "weight_next_reboot"),
        ("score-uniform-random", "weight_uniform_random"),
    ],
)
def test_a_scorer_with_weight_0_is_skipped_saying_so(scorer, key):
    decision = place(vm("new"), cn("n1"), cn("n2"), cfg=chain(scorer, defaults={key: 0}))
    assert trace(decision, f"alloc/{scorer}").note == f"skipped: {key} is 0"


ALL_SCORERS = (
    "score-unreserved-ram",
    "score-unreserved-disk",
    "score-num-owner-zones",
    "score-current-platform",
    "score-next-reboot",
    "score-uniform-random",
)


def test_a_packages_min_ram_spread_packs_its_pods_and_sets_the_other_spreading_scorers_aside():
    cfg = chain(*ALL_SCORERS, packages={"pack": {"alloc_server_spread": "min-ram"}})
    decision = place(vm("new", annotations={"berth.dev/package": "pack"}), *_ram_nodes(), cfg=cfg)
    assert _parts(decision, "alloc/score-unreserved-ram")["small"] == 2
    assert decision.chosen == "small"
    for step in ("alloc/score-unreserved-disk", "alloc/score-uniform-random"):
        assert trace(decision, step).note == "skipped: package pack spreads with min-ram"
    # Pods of other packages, and without one, keep the configured weights.
    assert place(vm("new"), *_ram_nodes(), cfg=cfg).chosen == "large"


def test_a_packages_min_owner_spread_orders_by_the_owners_pods_with_the_configured_weight():
    cfg = chain(
        *ALL_SCORERS,
        defaults={"weight_num_owner_zones": 3},
        packages={"ha": {"alloc_server_spread": "min-owner"}},
    )
    cluster = [cn("big", memory="64Gi"), cn("small"), vm("a", node="big")]
    decision = place(vm("new", annotations={"berth.dev/package": "ha"}), *cluster, cfg=cfg)
    assert decision.chosen == "small"
    assert trace(decision, "alloc/score-unreserved-ram").note == "skipped: package ha spreads with min-owner"


def test_server_spread_in_the_defaults_changes_the_order_for_every_pod():
    cfg = chain(*ALL_SCORERS, defaults={"server_spread": "min-ram"})
    assert place(vm("new"), *_ram_nodes(), cfg=cfg).chosen == "small"


def test_pick_random_picks_a_node_at_random_reproducibly():
    nodes = [cn(f"n{i}") for i in range(4)]
    cfg = chain("hard-filter-setup", "pick-random")
    picks = [place(vm("new"), *nodes, cfg=cfg, seed=s).chosen for s in range(30)]
    assert picks == [place(vm("new"), *nodes, cfg=cfg, seed=s).chosen for s in range(30)]
    assert set(picks) == {"n0", "n1", "n2", "n3"}
