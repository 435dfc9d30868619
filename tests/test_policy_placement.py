"""Placement policies deciding where pods go: every type, COMPOSITE, the automatic NO_TAG and the
per app name and version scope."""

from __future__ import annotations

import pytest

from berth.engine import Kind, Reason
from tests.builders import node, place, pod
from tests.policy_builders import app, placement_policy, reasons

STEP = "policy/placement-policy"


def _web(name: str = "new", **kwargs):
    return pod(name, labels=app("web"), **kwargs)


def test_any_keeps_general_nodes_and_skips_a_specialised_one_naming_the_automatic_no_tag():
    decision = place(
        _web(), node("n1"), node("gpu-1", tags=("gpu",)), placement_policy("anywhere", {"type": "ANY"})
    )
    assert decision.chosen == "n1"
    assert reasons(decision) == {
        "n1": None,
        "gpu-1": Reason(
            STEP,
            Kind.UNMET,
            "PlacementPolicy default/anywhere: NO_TAG (added to ANY): the node is specialised: it carries "
            "tags besides its hostname",
            {"tags": ["gpu"]},
        ),
    }


def test_one_per_host_removes_the_node_already_running_the_app_as_exhausted():
    decision = place(
        _web(),
        node("n1"),
        node("n2"),
        pod("web-0", node="n1", labels=app("web")),
        placement_policy("one-per-host", {"type": "ONE_PER_HOST"}),
    )
    assert decision.chosen == "n2"
    assert reasons(decision)["n1"] == Reason(
        STEP,
        Kind.EXHAUSTED,
        "PlacementPolicy default/one-per-host: ONE_PER_HOST: a pod of app web version 1.0 is already on "
        "the node",
        {"pods": 1},
    )


@pytest.mark.parametrize(
    ("neighbour", "counts"),
    [
        pytest.param(
            pod("w", node="n1", labels=app("web", "1.0")), True, id="the same app and version counts"
        ),
        pytest.param(
            pod("w", node="n1", labels=app("web", "2.0")),
            False,
            id="another version of the app does not count",
        ),
        pytest.param(pod("w", node="n1", labels=app("api", "1.0")), False, id="another app does not count"),
        pytest.param(
            pod("w", node="n1", namespace="other", labels=app("web", "1.0")),
            False,
            id="the same app in another namespace does not count",
        ),
        pytest.param(pod("w", node="n1"), False, id="a pod without app labels does not count"),
    ],
)
def test_one_per_host_counts_only_pods_of_the_same_namespace_app_name_and_version(neighbour, counts):
    decision = place(_web(), node("n1"), neighbour, placement_policy("one", {"type": "ONE_PER_HOST"}))
    assert (decision.chosen is None) is counts


def test_two_versions_of_an_app_share_a_node_under_one_per_host():
    decision = place(
        pod("web-v2", labels=app("web", "2.0")),
        node("n1"),
        pod("web-v1", node="n1", labels=app("web", "1.0")),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    assert decision.chosen == "n1"


def test_a_pod_already_placed_is_not_its_own_neighbour_under_one_per_host():
    placed = pod("web-0", node="n1", labels=app("web"), uid="u-1")
    again = pod("web-0", labels=app("web"), uid="u-1")
    decision = place(again, node("n1"), placed, placement_policy("one", {"type": "ONE_PER_HOST"}))
    assert decision.chosen == "n1"


@pytest.mark.parametrize(
    ("already", "accepted"),
    [
        pytest.param(0, True, id="an empty node is accepted"),
        pytest.param(2, True, id="a node below max is accepted"),
        pytest.param(3, False, id="a node at max is removed"),
        pytest.param(4, False, id="a node above max is removed"),
    ],
)
def test_max_n_per_host_accepts_a_node_while_it_holds_fewer_than_max_pods_of_the_app(already, accepted):
    running = [pod(f"web-{i}", node="n1", labels=app("web")) for i in range(already)]
    decision = place(
        _web(), node("n1"), *running, placement_policy("three", {"type": "MAX_N_PER_HOST", "max": 3})
    )
    assert (decision.chosen == "n1") is accepted
    if not accepted:
        assert reasons(decision)["n1"] == Reason(
            STEP,
            Kind.EXHAUSTED,
            "PlacementPolicy default/three: MAX_N_PER_HOST: the node already holds the maximum of 3 pod(s) "
            "of app web version 1.0",
            {"pods": already},
        )


def test_match_tag_keeps_only_nodes_carrying_the_tag_and_may_use_specialised_ones():
    decision = place(
        _web(),
        node("n1"),
        node("gpu-1", tags=("gpu",)),
        node("gpu-2", tags=("gpu", "ssd")),
        placement_policy("gpu", {"type": "MATCH_TAG", "tag": "gpu"}),
    )
    assert {n.name for n in decision.nodes if n.feasible} == {"gpu-1", "gpu-2"}
    assert reasons(decision)["n1"] == Reason(
        STEP,
        Kind.UNMET,
        "PlacementPolicy default/gpu: MATCH_TAG: the node does not carry tag 'gpu'",
        {"tags": ["n1"]},
    )


def test_match_tag_on_a_hostname_pins_the_pod_to_that_node():
    decision = place(
        _web(),
        node("n1"),
        node("n2"),
        node("n3"),
        placement_policy("pin", {"type": "MATCH_TAG", "tag": "n2"}),
    )
    assert [n.name for n in decision.nodes if n.feasible] == ["n2"]


def test_no_tag_ignores_the_hostname_but_any_tag_label_makes_a_node_specialised():
    general = node("general", labels={"zone": "eu-1"})
    empty_valued = node("marked", labels={"tag.berth.dev/batch": ""})
    tagged = node("tagged", tags=("ssd",))
    decision = place(_web(), general, empty_valued, tagged, placement_policy("plain", {"type": "NO_TAG"}))
    assert [n.name for n in decision.nodes if n.feasible] == ["general"]
    assert reasons(decision)["marked"].message == (
        "PlacementPolicy default/plain: NO_TAG: the node is specialised: it carries tags besides its hostname"
    )


@pytest.mark.parametrize(
    ("policy", "feasible"),
    [
        pytest.param({"type": "ANY"}, {"general"}, id="ANY skips specialised nodes"),
        pytest.param({"type": "ONE_PER_HOST"}, {"general"}, id="ONE_PER_HOST skips specialised nodes"),
        pytest.param(
            {"type": "MAX_N_PER_HOST", "max": 2}, {"general"}, id="MAX_N_PER_HOST skips specialised nodes"
        ),
        pytest.param(
            {"type": "COMPOSITE", "policies": [{"type": "ONE_PER_HOST"}, {"type": "ANY"}]},
            {"general"},
            id="a COMPOSITE of ONE_PER_HOST and ANY skips specialised nodes",
        ),
        pytest.param(
            {
                "type": "COMPOSITE",
                "combiner": "OR",
                "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "x"}],
            },
            {"general", "ssd-1"},
            id="a COMPOSITE holding MATCH_TAG gets no NO_TAG so its OR reaches specialised nodes",
        ),
        pytest.param(
            {"type": "RULE_BASED", "rule": "true"},
            {"general", "ssd-1"},
            id="RULE_BASED gets no NO_TAG",
        ),
        pytest.param({"type": "MATCH_TAG", "tag": "ssd"}, {"ssd-1"}, id="MATCH_TAG reaches the tagged node"),
    ],
)
def test_the_automatic_no_tag_applies_to_every_policy_without_match_tag_or_rule_based(policy, feasible):
    decision = place(_web(), node("general"), node("ssd-1", tags=("ssd",)), placement_policy("p", policy))
    assert {n.name for n in decision.nodes if n.feasible} == feasible


def test_composite_and_requires_every_policy_and_reports_the_unmet_one_over_the_exhausted_one():
    policy = {
        "type": "COMPOSITE",
        "combiner": "AND",
        "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "ssd"}],
    }
    decision = place(
        _web(),
        node("plain"),
        node("ssd-busy", tags=("ssd",)),
        node("ssd-free", tags=("ssd",)),
        pod("web-0", node="plain", labels=app("web")),
        pod("web-1", node="ssd-busy", labels=app("web")),
        placement_policy("search", policy),
    )
    assert decision.chosen == "ssd-free"
    found = reasons(decision)
    # On "plain" both fail: the tag (no eviction can help) is the reason given.
    assert found["plain"] == Reason(
        STEP,
        Kind.UNMET,
        "PlacementPolicy default/search: MATCH_TAG: the node does not carry tag 'ssd'",
        {"tags": ["plain"]},
    )
    assert found["ssd-busy"].kind is Kind.EXHAUSTED
    assert "ONE_PER_HOST" in found["ssd-busy"].message


@pytest.mark.parametrize("combiner", [None, "AND"], ids=["a null combiner is AND", "AND is AND"])
def test_composite_without_a_combiner_requires_every_policy(combiner):
    policy = {
        "type": "COMPOSITE",
        "policies": [{"type": "MATCH_TAG", "tag": "a"}, {"type": "MATCH_TAG", "tag": "b"}],
    }
    if combiner:
        policy["combiner"] = combiner
    decision = place(
        _web(), node("a", tags=("a",)), node("ab", tags=("a", "b")), placement_policy("p", policy)
    )
    assert [n.name for n in decision.nodes if n.feasible] == ["ab"]


def test_composite_or_accepts_a_node_one_policy_accepts_and_lists_every_failure_otherwise():
    policy = {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [{"type": "MATCH_TAG", "tag": "gpu"}, {"type": "ONE_PER_HOST"}],
    }
    decision = place(
        _web(),
        node("gpu-1", tags=("gpu",)),
        node("busy"),
        node("free"),
        pod("web-0", node="gpu-1", labels=app("web")),
        pod("web-1", node="busy", labels=app("web")),
        placement_policy("either", policy),
    )
    assert {n.name for n in decision.nodes if n.feasible} == {"gpu-1", "free"}
    assert reasons(decision)["busy"] == Reason(
        STEP,
        Kind.EXHAUSTED,
        "PlacementPolicy default/either: COMPOSITE OR: no policy of the OR holds (MATCH_TAG: the node does "
        "not carry tag 'gpu'; ONE_PER_HOST: a pod of app web version 1.0 is already on the node)",
        {"tags": ["busy"], "pods": 1},
    )


def test_composite_or_whose_policies_all_fail_for_good_is_unmet():
    policy = {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [{"type": "MATCH_TAG", "tag": "a"}, {"type": "MATCH_TAG", "tag": "b"}],
    }
    decision = place(_web(), node("n1"), placement_policy("ab", policy))
    assert reasons(decision)["n1"].kind is Kind.UNMET


def test_nested_composites_combine_as_written():
    # (tag a AND at most one web per node) OR tag b
    policy = {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [
            {
                "type": "COMPOSITE",
                "policies": [{"type": "MATCH_TAG", "tag": "a"}, {"type": "MAX_N_PER_HOST", "max": 1}],
            },
            {"type": "MATCH_TAG", "tag": "b"},
        ],
    }
    decision = place(
        _web(),
        node("a-free", tags=("a",)),
        node("a-busy", tags=("a",)),
        node("b-busy", tags=("b",)),
        node("plain"),
        pod("web-0", node="a-busy", labels=app("web")),
        pod("web-1", node="b-busy", labels=app("web")),
        placement_policy("nested", policy),
    )
    assert {n.name for n in decision.nodes if n.feasible} == {"a-free", "b-busy"}


def test_no_fit_is_a_409_naming_the_policy_not_a_full_cluster():
    decision = place(
        _web(),
        node("n1"),
        pod("web-0", node="n1", labels=app("web")),
        placement_policy("one-per-host", {"type": "ONE_PER_HOST"}, namespace="default"),
    )
    assert decision.error is not None
    assert decision.error.code == 409
    assert decision.error.message == (
        "no node satisfies the PlacementPolicy default/one-per-host (ONE_PER_HOST); 0/1 nodes are available: "
        "1 policy/placement-policy: PlacementPolicy default/one-per-host: ONE_PER_HOST: a pod of app web "
        "version 1.0 is already on the node."
    )


def test_a_pod_without_a_version_label_is_counted_with_the_other_unversioned_pods_of_its_app():
    decision = place(
        pod("new", labels=app("web", None)),
        node("n1"),
        node("n2"),
        pod("web-0", node="n1", labels=app("web", None)),
        pod("web-v1", node="n2", labels=app("web", "1.0")),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    assert decision.chosen == "n2"
    assert reasons(decision)["n1"].message == (
        "PlacementPolicy default/one: ONE_PER_HOST: a pod of app web without a version label is already on "
        "the node"
    )


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param({"type": "ONE_PER_HOST"}, id="ONE_PER_HOST"),
        pytest.param({"type": "MAX_N_PER_HOST", "max": 2}, id="MAX_N_PER_HOST"),
        pytest.param(
            {"type": "RULE_BASED", "rule": "ctx.session.count < 3"}, id="a rule reading ctx.session"
        ),
    ],
)
def test_a_policy_that_counts_per_app_refuses_a_pod_without_an_app_name_label_as_invalid(policy):
    decision = place(pod("anon"), node("n1"), placement_policy("counting", policy))
    assert decision.chosen is None
    assert decision.error is not None and decision.error.code == 400
    assert "PlacementPolicy default/counting" in decision.error.message
    assert "the pod has no label app.kubernetes.io/name" in decision.error.message


def test_a_pod_without_an_app_label_may_use_policies_that_do_not_count():
    decision = place(pod("anon"), node("n1"), placement_policy("general", {"type": "ANY"}))
    assert decision.chosen == "n1"


def test_a_placed_pod_gets_an_event_naming_its_policy_and_how_many_nodes_it_accepted():
    decision = place(
        _web(),
        node("n1"),
        node("n2"),
        node("n3"),
        pod("web-0", node="n1", labels=app("web")),
        placement_policy("one", {"type": "ONE_PER_HOST"}),
    )
    events = {e.reason: e.message for e in decision.events}
    assert (
        events["PlacementPolicy"]
        == "governed by PlacementPolicy default/one (ONE_PER_HOST): 2 of 3 nodes accepted"
    )


def test_a_pod_no_policy_governs_skips_the_step_and_may_use_specialised_nodes():
    decision = place(pod("free"), node("gpu-1", tags=("gpu",)))
    assert decision.chosen == "gpu-1"
    trace = next(t for t in decision.steps if t.step == STEP)
    assert trace.note == "skipped: no PlacementPolicy governs the pod"
