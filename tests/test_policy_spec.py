"""What a PlacementPolicy may say: every type accepted as Drove writes it, every mistake refused with
its field path and the rule it breaks."""

from __future__ import annotations

import pytest

from berth.errors import InvalidPolicy
from berth.vocab.policy import compile_policy, load_policy
from tests.policy_builders import placement_policy


def _errors(policy=None, *, spec=None, **kwargs) -> list[str]:
    obj = (
        placement_policy("p", policy, **kwargs)
        if spec is None
        else {**placement_policy("p", {}), "spec": spec}
    )
    return list(load_policy(obj).errors)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param({"type": "ANY"}, id="ANY"),
        pytest.param({"type": "ONE_PER_HOST"}, id="ONE_PER_HOST"),
        pytest.param({"type": "MAX_N_PER_HOST", "max": 1}, id="MAX_N_PER_HOST at 1"),
        pytest.param({"type": "MAX_N_PER_HOST", "max": 64}, id="MAX_N_PER_HOST at 64"),
        pytest.param({"type": "MATCH_TAG", "tag": "gpu"}, id="MATCH_TAG"),
        pytest.param({"type": "NO_TAG"}, id="NO_TAG"),
        pytest.param({"type": "RULE_BASED", "rule": "ctx.allocation.node.hostname != ''"}, id="RULE_BASED"),
        pytest.param(
            {"type": "COMPOSITE", "policies": [{"type": "ANY"}], "combiner": None},
            id="COMPOSITE with a null combiner",
        ),
        pytest.param(
            {
                "type": "COMPOSITE",
                "combiner": "OR",
                "policies": [{"type": "NO_TAG"}, {"type": "MATCH_TAG", "tag": "a"}],
            },
            id="COMPOSITE OR",
        ),
    ],
)
def test_every_policy_type_is_accepted_as_drove_writes_it(policy):
    compiled = compile_policy(placement_policy("p", policy))
    assert compiled.ready
    assert compiled.type == policy["type"]


@pytest.mark.parametrize(
    ("policy", "errors"),
    [
        pytest.param(
            {"type": "MAX_N_PER_HOST", "max": 65},
            ["spec.policy.max: must be between 1 and 64"],
            id="max above 64",
        ),
        pytest.param(
            {"type": "MAX_N_PER_HOST", "max": 0},
            ["spec.policy.max: must be between 1 and 64"],
            id="max of zero",
        ),
        pytest.param({"type": "MAX_N_PER_HOST"}, ["spec.policy.max: is required"], id="max missing"),
        pytest.param(
            {"type": "MAX_N_PER_HOST", "max": "3"},
            ["spec.policy.max: must be an integer"],
            id="max as a string",
        ),
        pytest.param(
            {"type": "MAX_N_PER_HOST", "max": True},
            ["spec.policy.max: must be an integer"],
            id="max as a boolean",
        ),
        pytest.param({"type": "MATCH_TAG"}, ["spec.policy.tag: is required"], id="tag missing"),
        pytest.param(
            {"type": "MATCH_TAG", "tag": ""}, ["spec.policy.tag: must be a non-empty string"], id="empty tag"
        ),
        pytest.param(
            {"type": "ONE_PER_HOST", "max": 2},
            ["spec.policy.max: is not a field of ONE_PER_HOST (it takes topologyKey)"],
            id="a field of another type",
        ),
        pytest.param(
            {"type": "MATCH_TAG", "tag": "a", "tags": ["b"]},
            ["spec.policy.tags: is not a field of MATCH_TAG (it takes tag)"],
            id="a misspelt field",
        ),
        pytest.param(
            {"type": "RULE_BASED", "rule": "true", "ruleType": "MVEL"},
            ["spec.policy.ruleType: is not a field of RULE_BASED (it takes rule)"],
            id="Drove's ruleType: berth rules are CEL",
        ),
        pytest.param(
            {"type": "ANYWHERE"},
            [
                "spec.policy.type: must be one of ANY, ONE_PER_HOST, MAX_N_PER_HOST, MATCH_TAG, NO_TAG, "
                "COMPOSITE, RULE_BASED, found 'ANYWHERE'"
            ],
            id="an unknown type",
        ),
        pytest.param(
            {"type": "LOCAL", "hostLevel": True},
            [
                "spec.policy.type: must be one of ANY, ONE_PER_HOST, MAX_N_PER_HOST, MATCH_TAG, NO_TAG, "
                "COMPOSITE, RULE_BASED, found 'LOCAL' (LOCAL is for Drove's local services: "
                "it has no meaning for pods)"
            ],
            id="Drove's LOCAL",
        ),
        pytest.param(
            {"max": 3},
            [
                "spec.policy.type: is required (one of ANY, ONE_PER_HOST, MAX_N_PER_HOST, MATCH_TAG, NO_TAG, "
                "COMPOSITE, RULE_BASED)"
            ],
            id="no type",
        ),
        pytest.param("ANY", ["spec.policy: must be an object"], id="a string instead of a policy"),
        pytest.param(None, ["spec.policy: is required"], id="no policy"),
        pytest.param(
            {"type": "COMPOSITE", "policies": []},
            ["spec.policy.policies: must list at least one item"],
            id="an empty composite",
        ),
        pytest.param(
            {"type": "COMPOSITE", "policies": [{"type": "ANY"}], "combiner": "XOR"},
            ["spec.policy.combiner: must be 'AND' or 'OR'"],
            id="an unknown combiner",
        ),
        pytest.param(
            {
                "type": "COMPOSITE",
                "policies": [
                    {"type": "ANY"},
                    {
                        "type": "COMPOSITE",
                        "policies": [{"type": "NO_TAG"}, {"type": "MAX_N_PER_HOST", "max": 99}],
                    },
                    {"type": "MATCH_TAG"},
                ],
            },
            [
                "spec.policy.policies[1].policies[1].max: must be between 1 and 64",
                "spec.policy.policies[2].tag: is required",
            ],
            id="every problem of a nested tree with its path",
        ),
    ],
)
def test_an_invalid_policy_is_refused_with_every_problem_and_its_field_path(policy, errors):
    obj = placement_policy("p", policy)
    if policy is None:
        del obj["spec"]["policy"]
    assert list(load_policy(obj).errors) == errors
    with pytest.raises(InvalidPolicy) as raised:
        compile_policy(obj)
    assert raised.value.errors == errors
    assert raised.value.field == errors[0].split(":", 1)[0]


def test_composite_nesting_deeper_than_eight_levels_is_refused():
    tree: dict = {"type": "ANY"}
    for _ in range(8):
        tree = {"type": "COMPOSITE", "policies": [tree]}
    assert _errors(tree) == ["spec.policy: COMPOSITE policies nest deeper than 8 levels"]


def test_a_tree_of_more_than_128_policies_is_refused():
    tree = {
        "type": "COMPOSITE",
        "policies": [{"type": "COMPOSITE", "policies": [{"type": "ANY"}] * 31} for _ in range(5)],
    }
    assert _errors(tree) == ["spec.policy: the tree holds more than 128 policies"]


def test_a_composite_of_more_than_32_policies_is_refused():
    tree = {"type": "COMPOSITE", "policies": [{"type": "ANY"}] * 33}
    assert _errors(tree) == ["spec.policy.policies: must hold at most 32 items"]


@pytest.mark.parametrize(
    ("selector", "errors"),
    [
        pytest.param(
            {"matchLabels": {"tier": 1}},
            ["spec.selector.matchLabels.tier: must be a string"],
            id="a number as a label value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "In"}]},
            ["spec.selector.matchExpressions[0].values: must list at least one value for operator In"],
            id="In without values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]},
            ["spec.selector.matchExpressions[0].values: must be empty for operator Exists"],
            id="Exists with values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]},
            ["spec.selector.matchExpressions[0].operator: must be 'In', 'NotIn', 'Exists' or 'DoesNotExist'"],
            id="an operator label selectors do not have",
        ),
        pytest.param(
            {"matchLabel": {"a": "b"}},
            ["spec.selector.matchLabel: is not a known field"],
            id="a misspelt field",
        ),
    ],
)
def test_an_invalid_selector_is_refused_with_its_field_path(selector, errors):
    assert _errors({"type": "ANY"}, selector=selector) == errors


def test_unknown_spec_fields_a_missing_name_and_another_api_version_are_all_reported():
    obj = {
        "apiVersion": "berth.dev/v1",
        "kind": "PlacementPolicy",
        "metadata": {"namespace": "shop"},
        "spec": {"policy": {"type": "ANY"}, "placementPolicy": {"type": "ANY"}},
    }
    assert list(load_policy(obj).errors) == [
        "apiVersion: must be berth.dev/v1alpha1, found 'berth.dev/v1'",
        "metadata.name: is required",
        "spec.placementPolicy: is not a field of a PlacementPolicy spec (it takes selector, policy)",
    ]
