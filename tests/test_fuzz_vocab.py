"""Hostile input to every vocabulary: random annotations, policies and allocator configurations never
crash berth, never place an invalid specification, and every refusal names its field."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth import annotations as ann
from berth.configure import default_pipeline
from berth.engine import decide
from berth.errors import InvalidConfig, SpecError
from berth.vocab.alloc.config import parse_config
from berth.vocab.policy import load_policy
from berth.vocab.policy.cel import compile_rule
from tests.builders import node, pod, to_pod, view

PIPELINE = default_pipeline(kube_filters=True)
CLUSTER = view(
    node("n1"), node("n2", tags=("gpu",)), pod("w", node="n1", tags=["web"], uid="0123456789abcdef")
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
interesting_keys = st.sampled_from(
    [
        "require_with_tag",
        "prefer_without_tag",
        "near",
        "far",
        "strict",
        "key",
        "operator",
        "value",
        "valueType",
        "isSoft",
        "ssd",
        "requirements",
        "min_ram",
        "min_platform",
        "image_size",
        "traits",
    ]
)
shaped = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(["", "web", "==", "re", "glob", "(a+)+$", "x*"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(interesting_keys, children, max_size=4),
    max_leaves=10,
)
annotation_text = st.one_of(st.text(max_size=40), json_values.map(json.dumps), shaped.map(json.dumps))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(ann.POD_ANNOTATIONS), annotation_text, min_size=1, max_size=4))
def test_random_annotations_are_accepted_or_refused_by_name_and_never_placed_when_refused(annotations):
    obj = pod("p", annotations=annotations)
    try:
        PIPELINE.compile_pod(to_pod(obj))  # what the engine compiles, with the allocator configuration
        valid = True
    except SpecError as exc:
        valid = False
        assert exc.errors
        for problem in exc.errors:
            assert problem.startswith("annotation berth.dev/"), problem
    decision = decide(to_pod(obj), CLUSTER, PIPELINE, seed=1)
    if not valid:
        assert decision.error is not None and decision.error.code == 400
        assert decision.chosen is None
    else:
        assert decision.error is None or decision.error.code == 409


policy_trees = st.recursive(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["ANY", "ONE_PER_HOST", "MAX_N_PER_HOST", "MATCH_TAG", "NO_TAG", "RULE_BASED", "BOGUS"]
            )
        },
        optional={
            "max": st.one_of(st.integers(-3, 70), st.text(max_size=3)),
            "tag": st.one_of(st.text(max_size=5), st.integers()),
            "rule": st.sampled_from(
                ["true", "ctx.allocation.node.hostname == 'n1'", "1 +", "ctx.nope", "'a'.matches('(')"]
            ),
            "combiner": st.sampled_from(["AND", "OR", "XOR", None]),
        },
    ),
    lambda children: st.fixed_dictionaries(
        {"type": st.just("COMPOSITE"), "policies": st.lists(children, max_size=3)},
        optional={"combiner": st.sampled_from(["AND", "OR", None, 3])},
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(policy_trees, json_values), st.one_of(st.none(), json_values))
def test_random_policies_compile_or_carry_errors_that_name_their_field(tree, selector):
    spec = {"policy": tree}
    if selector is not None:
        spec["selector"] = selector
    obj = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec,
    }
    compiled = load_policy(obj)
    assert compiled.ready or compiled.errors
    for error in compiled.errors:
        assert error.split(":", 1)[0].startswith(("spec", "metadata", "apiVersion")), error


config_values = st.dictionaries(
    st.sampled_from(
        ["allocationDescription", "defaults", "packages", "algorithms", "server_spread", "bogus"]
    ),
    st.one_of(
        json_values,
        st.lists(
            st.sampled_from(["pipe", "or", "identity", "hard-filter-min-ram", "nope", "tags/tag-affinity"]),
            max_size=4,
        ),
        st.dictionaries(
            st.sampled_from(["weight_uniform_random", "filter_vm_limit", "server_spread", "x"]),
            json_values,
            max_size=3,
        ),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(config_values)
def test_random_allocator_configurations_load_or_raise_invalid_config_naming_the_field(data):
    try:
        parse_config(data, source="fuzz")
    except InvalidConfig as exc:
        assert exc.errors and all(e for e in exc.errors)


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("(a+)+$", id="nested quantifiers"),
        pytest.param("(a|aa)*c", id="overlapping alternation"),
        pytest.param("(x+x+)+y", id="exponential backtracking for a backtracking engine"),
    ],
)
def test_pathological_regular_expressions_match_in_linear_time(pattern):
    rules = [{"key": "instance", "operator": "==", "value": pattern, "valueType": "re", "isSoft": True}]
    names = ["a" * 5000 + "!", "x" * 5000]
    cluster = view(node("n1"), *(pod(f"p{i}", node="n1") for i in range(3)))
    obj = pod(names[0][:60], annotations={ann.AFFINITY_RULES: json.dumps(rules)})
    started = time.perf_counter()
    decision = decide(to_pod(obj), cluster, PIPELINE, seed=1)
    assert decision.error is None
    # RE2 has no backtracking: a pattern that takes a backtracking engine years takes microseconds here.
    assert time.perf_counter() - started < 5


def test_a_regular_expression_over_the_size_limit_is_a_400_naming_the_rule():
    rules = [
        {"key": "instance", "operator": "==", "value": "(a|b)" * 400, "valueType": "re", "isSoft": False}
    ]
    decision = decide(
        to_pod(pod("p", annotations={ann.AFFINITY_RULES: json.dumps(rules)})), CLUSTER, PIPELINE, seed=1
    )
    assert decision.error.code == 400
    assert "berth.dev/affinity-rules" in decision.error.message


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        pytest.param("x" * 5000, "at most 4096", id="an expression over the length limit"),
        pytest.param(
            "ctx.allocation.node.tags.all(a, ctx.allocation.node.tags.all(b, "
            "ctx.allocation.node.tags.all(c, true)))",
            "nest",
            id="comprehensions nested three deep",
        ),
        pytest.param(
            "'a'.matches('" + "(a|b)" * 300 + "')", "matches() pattern", id="a regex over the size limit"
        ),
    ],
)
def test_costly_cel_rules_are_refused_when_they_compile(rule, words):
    with pytest.raises(SpecError) as info:
        compile_rule(rule)
    assert "spec.policy.rule" in info.value.message
    assert words in info.value.message


def test_a_cel_rule_that_iterates_too_much_rejects_the_node_with_the_reason_instead_of_hanging():
    ones = "[" + ",".join(["1"] * 200) + "]"
    compiled = compile_rule(f"{ones}.all(a, {ones}.all(b, a == b))")  # 40,000 iterations
    verdict = compiled.evaluate({})
    assert not verdict.ok
    assert "at most 10000 comprehension iterations" in verdict.why
