"""Which PlacementPolicies govern a pod: selectors, the berth.dev/placement-policy annotation, several
policies at once, and policies that are not Ready (fail closed)."""

from __future__ import annotations

import pytest

from berth.cluster.convert import node_from_k8s
from berth.configure import default_pipeline
from berth.engine import Kind, Reason, decide
from tests.builders import node, place, pod, to_pod, view
from tests.policy_builders import app, placement_policy, reasons

STEP = "policy/placement-policy"
PIN_N2 = {"type": "MATCH_TAG", "tag": "n2"}


def _nodes():
    return node("n1"), node("n2")


@pytest.mark.parametrize(
    ("selector", "governed"),
    [
        pytest.param(
            {"matchLabels": {"tier": "front"}}, True, id="matchLabels equal to the pod's labels select it"
        ),
        pytest.param({"matchLabels": {"tier": "back"}}, False, id="matchLabels with another value do not"),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]},
            True,
            id="In with the pod's value selects it",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]},
            False,
            id="NotIn with the pod's value does not",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]},
            True,
            id="NotIn on a label the pod lacks selects it",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            True,
            id="Exists on its label selects it",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            False,
            id="DoesNotExist on its label does not",
        ),
        pytest.param(
            {"matchLabels": {"tier": "front"}, "matchExpressions": [{"key": "zone", "operator": "Exists"}]},
            False,
            id="every term must hold",
        ),
        pytest.param({}, True, id="an empty selector selects every pod of the namespace"),
        pytest.param(None, False, id="no selector selects no pod by labels"),
    ],
)
def test_a_policy_governs_the_pods_its_label_selector_matches(selector, governed):
    decision = place(
        pod("new", labels=app("web", tier="front")),
        *_nodes(),
        placement_policy("pin", PIN_N2, selector=selector),
    )
    feasible = {n.name for n in decision.nodes if n.feasible}
    assert feasible == ({"n2"} if governed else {"n1", "n2"})


def test_a_policy_governs_only_pods_of_its_own_namespace():
    decision = place(
        pod("new", namespace="shop", labels=app("web")),
        *_nodes(),
        placement_policy("pin", PIN_N2, namespace="other"),
    )
    assert {n.name for n in decision.nodes if n.feasible} == {"n1", "n2"}


def test_every_policy_whose_selector_matches_must_hold():
    decision = place(
        pod("new", labels=app("web")),
        node("n1", tags=("gpu",)),
        node("n2", tags=("gpu",)),
        node("n3"),
        pod("web-0", node="n1", labels=app("web")),
        placement_policy("gpu", {"type": "MATCH_TAG", "tag": "gpu"}),
        placement_policy(
            "spread",
            {
                "type": "COMPOSITE",
                "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "gpu"}],
            },
        ),
    )
    assert decision.chosen == "n2"
    found = reasons(decision)
    assert found["n1"].message.startswith("PlacementPolicy default/spread: ONE_PER_HOST")
    assert found["n3"].message.startswith("PlacementPolicy default/gpu: MATCH_TAG")


def test_the_409_names_every_policy_that_removed_nodes():
    decision = place(
        pod("new", labels=app("web")),
        node("n1", tags=("gpu",)),
        node("n2"),
        pod("web-0", node="n1", labels=app("web")),
        placement_policy("gpu", {"type": "MATCH_TAG", "tag": "gpu"}),
        placement_policy(
            "spread",
            {
                "type": "COMPOSITE",
                "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "gpu"}],
            },
        ),
    )
    assert decision.error is not None and decision.error.code == 409
    assert decision.error.message.startswith(
        "no node satisfies the PlacementPolicy default/gpu (MATCH_TAG); "
        "the PlacementPolicy default/spread (COMPOSITE)"
    )


def test_the_annotation_names_the_one_policy_that_governs_the_pod_whatever_the_selectors_say():
    new = pod("new", labels=app("web"), annotations={"berth.dev/placement-policy": "pin-n1"})
    decision = place(
        new,
        *_nodes(),
        placement_policy("pin-n2", PIN_N2),
        placement_policy("pin-n1", {"type": "MATCH_TAG", "tag": "n1"}, selector=None),
    )
    assert decision.chosen == "n1"


def test_an_annotation_naming_a_policy_that_does_not_exist_refuses_every_node_naming_it():
    new = pod("new", namespace="shop", labels=app("web"), annotations={"berth.dev/placement-policy": "gone"})
    decision = place(new, *_nodes(), placement_policy("gone", {"type": "ANY"}, namespace="other"))
    missing = Reason(
        STEP,
        Kind.UNMET,
        "PlacementPolicy shop/gone named by annotation berth.dev/placement-policy does not exist in "
        "namespace shop",
    )
    assert reasons(decision) == {"n1": missing, "n2": missing}
    assert decision.error is not None and decision.error.code == 409
    assert decision.error.message.startswith(
        "no node satisfies the PlacementPolicy shop/gone (it does not exist);"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("", "no value specified", id="an empty name"),
        pytest.param(
            "Not_A_Name", "'Not_A_Name' is not a valid object name", id="a name Kubernetes would refuse"
        ),
    ],
)
def test_a_malformed_policy_name_in_the_annotation_is_a_400_naming_the_annotation(value, problem):
    decision = place(pod("new", annotations={"berth.dev/placement-policy": value}), *_nodes())
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message.startswith(f"annotation berth.dev/placement-policy: {problem}")


def test_a_pod_governed_by_an_invalid_policy_is_refused_with_the_policy_error_and_placed_nowhere():
    broken = placement_policy("broken", {"type": "MAX_N_PER_HOST", "max": 65})
    decision = place(pod("new", labels=app("web")), *_nodes(), broken)
    assert decision.chosen is None
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message == (
        "PlacementPolicy default/broken is not Ready: spec.policy.max: must be between 1 and 64"
    )
    assert all(not n.feasible for n in decision.nodes)


def test_an_invalid_policy_does_not_touch_pods_it_does_not_govern():
    broken = placement_policy(
        "broken", {"type": "MAX_N_PER_HOST", "max": 0}, selector={"matchLabels": {"app": "x"}}
    )
    decision = place(pod("new", labels=app("web")), *_nodes(), broken)
    assert decision.chosen in ("n1", "n2")


def test_an_invalid_policy_named_by_the_annotation_refuses_the_pod():
    broken = placement_policy("broken", {"type": "COMPOSITE", "policies": []}, selector=None)
    new = pod("new", labels=app("web"), annotations={"berth.dev/placement-policy": "broken"})
    decision = place(new, *_nodes(), broken)
    assert decision.error is not None and decision.error.code == 400
    assert "spec.policy.policies: must list at least one item" in decision.error.message


def test_updating_a_policy_changes_the_placement_and_removing_it_frees_the_pod():
    v = view(*_nodes(), placement_policy("pin", PIN_N2, generation=1))
    first = v.policy("default", "pin")
    assert first is not None and first.ready

    # The same spec at a new generation is not compiled again.
    same = v.upsert_policy(placement_policy("pin", PIN_N2, generation=2))
    assert same.generation == 2 and same.predicate is first.predicate

    v.upsert_policy(placement_policy("pin", {"type": "MATCH_TAG", "tag": "n1"}, generation=3))
    new = to_pod(pod("new", labels=app("web")))
    assert decide(new, v, default_pipeline(), seed=0).chosen == "n1"
    v.remove_policy("default", "pin")
    after = decide(new, v, default_pipeline(), seed=0)
    assert {n.name for n in after.nodes if n.feasible} == {"n1", "n2"}


def test_the_view_counts_an_apps_pods_per_node_as_pods_and_nodes_come_and_go():
    v = view(
        node("n1"), node("n2"), pod("a", node="n1", labels=app("web")), pod("b", node="n1", labels=app("web"))
    )
    key = ("default", "web", "1.0")
    assert dict(v.app_nodes(key)) == {"n1": 2}
    v.add_pod(to_pod(pod("c", node="n2", labels=app("web"))))
    assert dict(v.app_nodes(key)) == {"n1": 2, "n2": 1}
    v.remove_pod("default/a")
    v.remove_node("n2")
    assert dict(v.app_nodes(key)) == {"n1": 1}
    v.upsert_node(node_from_k8s(node("n2")))
    assert dict(v.app_nodes(key)) == {"n1": 1, "n2": 1}
