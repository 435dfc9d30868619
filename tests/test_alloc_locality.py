"""Locality hints and affinity rules: the seed's examples, strict and soft, and spreading by owner."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.configure import build_pipeline
from berth.engine import Kind, decide
from tests.alloc_helpers import candidates, chain, cn, feasible, reason_texts, trace, vm
from tests.builders import churn, place, to_pod, view

LOCALITY = chain("calculate-locality-hints", "hard-filter-locality-hints", "soft-filter-locality-hints")


def _seed_cluster():
    # The seed's example: near one instance, far from three. web-0 shares n1 with db-0.
    return [
        cn("n1"),
        cn("n2"),
        cn("n3"),
        cn("n4"),
        vm("web-0", node="n1"),
        vm("db-0", node="n1"),
        vm("db-1", node="n2"),
        vm("db-2", node="n3"),
    ]


def _locality(**locality):
    return vm("new", annotations={"berth.dev/locality": locality})


def test_far_takes_precedence_over_near_when_the_hints_are_not_strict():
    decision = place(_locality(near="web-0", far=["db-0", "db-1", "db-2"]), *_seed_cluster(), cfg=LOCALITY)
    assert decision.chosen == "n4"
    assert feasible(decision) == {"n1", "n2", "n3", "n4"}  # soft: only set aside
    assert str(decision.node("n1").reasons[0]) == (
        "set aside: alloc/soft-filter-locality-hints: locality: the node hosts a pod for "
        "far db-0 (inst!=db-0)"
    )


def test_with_strict_either_a_node_fulfils_every_hint_or_the_placement_fails():
    decision = place(
        _locality(near="web-0", far=["db-0", "db-1", "db-2"], strict=True), *_seed_cluster(), cfg=LOCALITY
    )
    assert decision.chosen is None and decision.error is not None and decision.error.code == 409
    assert reason_texts(decision)["n1"] == (
        "alloc/hard-filter-locality-hints: strict locality: the node hosts a pod for far db-0 (inst!=db-0)"
    )
    assert decision.node("n1").reasons[0].kind is Kind.EXHAUSTED  # evicting db-0 would free it
    assert decision.node("n4").reasons[0].kind is Kind.UNMET
    assert decision.error.message.startswith(
        "no node satisfies the strict locality far db-0 (inst!=db-0), far db-1 (inst!=db-1), "
        "far db-2 (inst!=db-2), near web-0 (inst==web-0)"
    )
    # Without db-0 among the far pods, web-0's node fulfils every hint.
    assert (
        place(_locality(near="web-0", far="db-2", strict=True), *_seed_cluster(), cfg=LOCALITY).chosen == "n1"
    )


def test_a_strict_near_needs_every_near_pod_on_the_same_node():
    cluster = [cn("n1"), cn("n2"), vm("a", node="n1"), vm("b", node="n2"), vm("c", node="n1")]
    assert place(_locality(near=["a", "c"], strict=True), *cluster, cfg=LOCALITY).chosen == "n1"
    assert place(_locality(near=["a", "b"], strict=True), *cluster, cfg=LOCALITY).chosen is None


def test_soft_near_keeps_the_nodes_hosting_a_near_pod_and_everything_when_none_does():
    cluster = [cn("n1"), cn("n2"), cn("n3"), vm("a", node="n1"), vm("b", node="n2")]
    assert candidates(place(_locality(near=["a", "b"]), *cluster, cfg=LOCALITY)) == {"n1", "n2"}
    assert candidates(place(_locality(near="missing"), *cluster, cfg=LOCALITY)) == {"n1", "n2", "n3"}


def test_soft_far_is_ignored_when_it_would_leave_no_node():
    cluster = [cn("n1"), cn("n2"), vm("a", node="n1"), vm("b", node="n2")]
    assert candidates(place(_locality(far=["a", "b"]), *cluster, cfg=LOCALITY)) == {"n1", "n2"}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param("web-0", "n1", id="a pod name in the pod's namespace"),
        pytest.param("default/web-0", "n1", id="namespace/name of the pod's own namespace"),
        pytest.param("6f1d2f0e-0000-4000-8000-000000000001", "n1", id="a full uid"),
        pytest.param("6f1d2f0e-0000-4000-8000-00000000000", "n1", id="a uid prefix"),
        pytest.param(
            "6f1d2f0e-0000-4000-8000-0000000000", None, id="a prefix matching two of the namespace is a 400"
        ),
    ],
)
def test_a_near_target_is_a_name_a_namespaced_name_a_uid_or_a_uid_prefix(target, expected):
    cluster = [
        cn("n1"),
        cn("n2"),
        cn("n3"),
        vm("web-0", node="n1", uid="6f1d2f0e-0000-4000-8000-000000000001"),
        vm("web-1", node="n3", uid="6f1d2f0e-0000-4000-8000-000000000011"),
        vm("web-0", namespace="shop", node="n2", uid="6f1d2f0e-0000-4000-8000-000000000002"),
    ]
    decision = place(_locality(near=target, strict=True), *cluster, cfg=LOCALITY)
    if expected is None:
        assert decision.error is not None and decision.error.code == 400
        assert decision.error.message.startswith(f'near target "{target}" matches 2 pods by uid prefix')
        assert "shop/" not in decision.error.message  # the other namespace's pods are never named
    else:
        assert decision.chosen == expected


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("shop/web-0", id="namespace/name of another namespace"),
        pytest.param("6f1d2f0e-0000-4000-8000-000000000002", id="the full uid of a pod of another namespace"),
        pytest.param("6f1d2f0e-0000-4000-8000-000000000002"[:20], id="a uid prefix of another namespace"),
    ],
)
def test_a_strict_near_naming_a_pod_of_another_namespace_is_as_if_that_pod_did_not_exist(target):
    cluster = [
        cn("n1"),
        cn("n2"),
        vm("web-0", namespace="shop", node="n2", uid="6f1d2f0e-0000-4000-8000-000000000002"),
    ]
    decision = place(_locality(near=target, strict=True), *cluster, cfg=LOCALITY)
    assert decision.error is not None and decision.error.code == 409
    assert reason_texts(decision)["n2"] == (
        f"alloc/hard-filter-locality-hints: strict locality: the node hosts no pod for near {target} "
        f"(inst=={target})"
    )
    # Soft far of the same pod sets nothing aside: it is not seen either.
    assert candidates(place(_locality(far=target), *cluster, cfg=LOCALITY)) == {"n1", "n2"}


def test_a_target_both_near_and_far_is_kept_away_from_as_far_takes_precedence():
    cluster = [cn("n1"), cn("n2"), vm("db-0", node="n1")]
    decision = place(_locality(near="db-0", far="db-0", strict=True), *cluster, cfg=LOCALITY)
    assert decision.chosen == "n2"
    assert reason_texts(decision)["n1"] == (
        "alloc/hard-filter-locality-hints: strict locality: the node hosts a pod for far db-0 (inst!=db-0)"
    )


def test_a_unique_uid_prefix_of_eight_characters_finds_the_pod():
    cluster = [cn("n1"), cn("n2"), vm("db", node="n2", uid="abcdef01-2345-6789-abcd-ef0123456789")]
    assert place(_locality(near="abcdef01", strict=True), *cluster, cfg=LOCALITY).chosen == "n2"


def _rules(*rules):
    return vm("new", annotations={"berth.dev/affinity-rules": list(rules)})


def _rule(key, operator, value, value_type="exact", soft=False):
    return {"key": key, "operator": operator, "value": value, "valueType": value_type, "isSoft": soft}


def test_the_seeds_affinity_example_near_a_database_and_away_from_disabled_pods():
    cluster = [
        cn("n1"),
        cn("n2"),
        cn("n3"),
        vm("database-1", node="n1"),
        vm("worker", node="n1", labels={"disabled": "yes"}),
        vm("database-2", node="n2"),
        vm("frontend", node="n3"),
        vm("database-3", namespace="other", node="n3"),
    ]
    new = _rules(_rule("container", "==", "database-*", "glob"), _rule("disabled", "!=", "yes"))
    decision = place(new, *cluster, cfg=LOCALITY)
    assert decision.chosen == "n2"
    assert reason_texts(decision) == {
        "n1": "alloc/hard-filter-locality-hints: strict locality: the node hosts a pod for disabled!=yes",
        # database-3 is in another namespace: affinity rules match the pod's own namespace.
        "n3": "alloc/hard-filter-locality-hints: strict locality: "
        "the node hosts no pod for container==database-*",
    }
    note = trace(decision, "alloc/calculate-locality-hints").note
    assert note == (
        "skipped: computes only, every node kept: disabled!=yes (strict, 1 node(s)); "
        "container==database-* (strict, 2 node(s))"
    )


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        pytest.param(_rule("instance", "==", "web-0"), {"n1"}, id="instance exact matches a pod name"),
        pytest.param(
            _rule("container", "==", "web-*", "glob"), {"n1", "n2"}, id="a glob matches the whole name"
        ),
        pytest.param(
            _rule("instance", "==", "/^web-[1-9]$/", "re"), {"n2"}, id="a regular expression between slashes"
        ),
        pytest.param(
            _rule("instance", "==", "eb-", "re"), {"n1", "n2"}, id="an unanchored regular expression"
        ),
        pytest.param(_rule("tier", "==", "front"), {"n1"}, id="another key matches a label exactly"),
        pytest.param(_rule("tier", "==", "f*", "glob"), {"n1"}, id="a label glob"),
        pytest.param(
            _rule("tier", "!=", "back|front", "re"), {"n3"}, id="a label regular expression with !="
        ),
        pytest.param(
            _rule("instance", "!=", "web-1"), {"n1", "n3"}, id="!= removes the nodes hosting the pod"
        ),
    ],
)
def test_affinity_rules_match_pod_names_or_labels_exactly_by_glob_or_by_regular_expression(rule, expected):
    cluster = [
        cn("n1"),
        cn("n2"),
        cn("n3"),
        vm("web-0", node="n1", labels={"tier": "front"}),
        vm("web-1", node="n2", labels={"tier": "back"}),
        vm("batch", node="n3"),
    ]
    assert feasible(place(_rules(rule), *cluster, cfg=LOCALITY)) == expected


def test_a_strict_rule_that_matches_no_pod_fails_the_placement_naming_the_rule():
    decision = place(_rules(_rule("container", "==", "database-*", "glob")), cn("n1"), cfg=LOCALITY)
    assert decision.error is not None and decision.error.code == 409
    assert decision.error.message.startswith("no node satisfies the strict locality container==database-*")


def test_a_soft_rule_sets_nodes_aside_only_while_others_remain():
    cluster = [cn("n1"), cn("n2"), vm("db", node="n1")]
    near = place(_rules(_rule("instance", "==", "db", soft=True)), *cluster, cfg=LOCALITY)
    assert candidates(near) == {"n1"} and feasible(near) == {"n1", "n2"}
    assert str(near.node("n2").reasons[0]) == (
        "set aside: alloc/soft-filter-locality-hints: locality: the node hosts no pod for instance==~db"
    )
    nowhere = place(_rules(_rule("instance", "==", "none", soft=True)), *cluster, cfg=LOCALITY)
    assert candidates(nowhere) == {"n1", "n2"}


def test_hard_and_soft_rules_each_keep_their_own_strictness_and_add_to_the_locality():
    cluster = [
        cn("n1"),
        cn("n2"),
        cn("n3"),
        vm("db", node="n1"),
        vm("cache", node="n2"),
        vm("web", node="n3"),
    ]
    new = vm(
        "new",
        annotations={
            "berth.dev/affinity-rules": [
                _rule("instance", "!=", "db"),
                _rule("instance", "==", "cache", soft=True),
            ],
            "berth.dev/locality": {"far": "web", "strict": True},
        },
    )
    decision = place(new, *cluster, cfg=LOCALITY)
    assert feasible(decision) == {"n2"}
    assert decision.chosen == "n2"


def test_the_pod_is_never_its_own_locality_target():
    cluster = [cn("n1"), cn("n2"), vm("new", node="n1", uid="11111111-aaaa")]
    again = vm(
        "new",
        node="n1",
        uid="11111111-aaaa",
        annotations={"berth.dev/locality": {"far": "new", "strict": True}},
    )
    assert feasible(place(again, *cluster, cfg=LOCALITY)) == {"n1", "n2"}


def test_without_hints_the_soft_filter_spreads_the_namespaces_pods():
    cluster = [cn("n1"), cn("n2"), cn("n3"), vm("a", node="n1"), vm("b", namespace="other", node="n2")]
    decision = place(vm("new"), *cluster, cfg=LOCALITY)
    assert candidates(decision) == {"n2", "n3"}
    assert str(decision.node("n1").reasons[0]) == (
        "set aside: alloc/soft-filter-locality-hints: spread by owner: the node already hosts pods of "
        "namespace default (pods=1)"
    )
    crowded = [cn("n1"), cn("n2"), vm("a", node="n1"), vm("b", node="n2")]
    assert candidates(place(vm("new"), *crowded, cfg=LOCALITY)) == {"n1", "n2"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 11), st.integers(0, 3), st.booleans(), st.booleans()),
        max_size=40,
    )
)
def test_the_spread_kept_pod_after_pod_is_the_spread_of_a_fresh_view(changes):
    """Pods land and leave between decisions over the same nodes (several on a node, some outside
    the nodes asked about, some of another namespace): each decision sets aside the nodes, with the
    reasons, and keeps the nodes that a fresh view of the same cluster gives."""
    names = [f"n{i}" for i in range(12)]
    asked = names[:10]  # n10 and n11 host pods too but are not asked about
    live = view(*(cn(n) for n in names))
    pipeline = build_pipeline(LOCALITY)

    def spread(v) -> tuple[str | None, set[str], list[tuple[str, str]]]:
        decision = decide(to_pod(vm("new", uid="u-new")), v, pipeline, candidates=asked, seed=3)
        aside = [
            (n, str(decision.node(n).reasons[0]))  # failures() shows a shared reason's values once
            for n, r in decision.failures().items()
            if r.step == "alloc/soft-filter-locality-hints"
        ]
        return decision.chosen, candidates(decision), sorted(aside)

    def web(i: int, which: int, other: bool, where: str) -> dict:
        namespace, name = ("other" if other else "default"), f"web-{which}-{i % 3}"
        return vm(name, namespace=namespace, node=where, uid=f"u-{namespace}-{name}")

    for placed in churn(live, changes, names, web):
        fresh = view(*(cn(n) for n in names), *placed)
        assert spread(live) == spread(fresh)


def test_more_owner_changes_than_are_mended_or_kept_give_the_spread_worked_out_again():
    names = [f"n{i}" for i in range(6)]
    live = view(*(cn(n) for n in names), vm("a", node="n0"))
    pipeline = build_pipeline(LOCALITY)

    def kept() -> set[str]:
        return candidates(decide(to_pod(vm("new", uid="u-new")), live, pipeline, candidates=names, seed=1))

    assert kept() == {"n1", "n2", "n3", "n4", "n5"}
    for i in range(1000):  # beyond what is mended and what the view keeps of the changes
        live.add_pod(to_pod(vm(f"p{i}", node="n1", uid=f"u-p{i}")))
        live.remove_pod(f"default/p{i}")
    live.add_pod(to_pod(vm("b", node="n2", uid="u-b")))
    assert live.owners_changed_since("default", 1) is None
    assert kept() == {"n1", "n3", "n4", "n5"}
    live.remove_pod("default/a")
    live.remove_pod("default/b")  # the namespace has no pod left
    assert kept() == set(names)


def test_only_strict_hints_need_no_spreading():
    cluster = [cn("n1"), cn("n2"), vm("a", node="n1"), vm("b", node="n2")]
    decision = place(_locality(far="b", strict=True), *cluster, cfg=LOCALITY)
    assert trace(decision, "alloc/soft-filter-locality-hints").note == (
        "skipped: only strict locality requested; no spreading needed"
    )
    assert decision.chosen == "n1"


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param(_rule("instance", "==", "web-0"), id="an instance name"),
        pytest.param(_rule("instance", "==", "6f1d2f0e-0000-4000-8000-000000000002"), id="an instance uid"),
        pytest.param(_rule("container", "==", "web-*", "glob"), id="a glob over names"),
        pytest.param(_rule("role", "==", "web"), id="a label"),
    ],
)
def test_a_strict_affinity_rule_sees_only_the_pods_of_the_pods_namespace(rule):
    cluster = [
        cn("n1"),
        cn("n2"),
        vm(
            "web-0",
            namespace="shop",
            node="n2",
            uid="6f1d2f0e-0000-4000-8000-000000000002",
            labels={"role": "web"},
        ),
    ]
    decision = place(_rules(rule), *cluster, cfg=LOCALITY)
    assert decision.error is not None and decision.error.code == 409
    # The same pod in the pod's own namespace satisfies it.
    cluster[2] = vm("web-0", node="n2", uid="6f1d2f0e-0000-4000-8000-000000000002", labels={"role": "web"})
    assert place(_rules(rule), *cluster, cfg=LOCALITY).chosen == "n2"
