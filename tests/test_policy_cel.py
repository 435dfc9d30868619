"""RULE_BASED policies: the CEL context a rule sees, rules that fail at evaluation, compile errors and
the limits, all as a user meets them through a placement decision."""

from __future__ import annotations

import pytest

from berth.cluster.convert import node_from_k8s
from berth.configure import default_pipeline
from berth.engine import Kind, Reason, decide
from tests.builders import node, place, pod, to_pod, view
from tests.policy_builders import app, placement_policy, reasons

STEP = "policy/placement-policy"


def _rule(rule: str, name: str = "rule", namespace: str = "shop"):
    return placement_policy(name, {"type": "RULE_BASED", "rule": rule}, namespace=namespace)


def _cluster():
    n1 = node("n1", tags=("gpu",), labels={"zone": "eu-1"})
    n1["metadata"]["uid"] = "uid-1"
    n2 = node("n2", labels={"zone": "us-1"})
    return [
        n1,
        n2,
        pod("web-0", namespace="shop", node="n1", labels=app("web")),
        pod("web-1", namespace="shop", node="n1", labels=app("web")),
        pod("web-v2", namespace="shop", node="n2", labels=app("web", "2.0")),
        pod("web-other", namespace="other", node="n2", labels=app("web")),
    ]


def _new():
    return pod(
        "new",
        namespace="shop",
        labels=app("web", tier="front"),
        tags=["web"],
        cpu="500m",
        memory="1Gi",
    )


@pytest.mark.parametrize(
    ("rule", "feasible"),
    [
        pytest.param('ctx.allocation.node.executorId == "uid-1"', {"n1"}, id="executorId is the node uid"),
        pytest.param(
            'ctx.allocation.node.executorId == "n2"',
            {"n2"},
            id="executorId is the node name when it has no uid",
        ),
        pytest.param('ctx.allocation.node.hostname == "n2"', {"n2"}, id="hostname is the node name"),
        pytest.param(
            'ctx.allocation.node.tags == ["gpu", "n1"]',
            {"n1"},
            id="tags lists every tag with the hostname, sorted",
        ),
        pytest.param(
            'ctx.allocation.node.metadata["zone"] == "eu-1"', {"n1"}, id="metadata holds the node labels"
        ),
        pytest.param(
            'ctx.pod.name == "new" && ctx.pod.namespace == "shop"',
            {"n1", "n2"},
            id="the pod name and namespace",
        ),
        pytest.param('ctx.pod.labels["tier"] == "front"', {"n1", "n2"}, id="the pod labels"),
        pytest.param(
            'ctx.pod.annotations["berth.dev/tags"] == \'["web"]\'',
            {"n1", "n2"},
            id="the pod berth annotations",
        ),
        pytest.param(
            'ctx.pod.app.name == "web" && ctx.pod.app.version == "1.0"',
            {"n1", "n2"},
            id="the app name and version",
        ),
        pytest.param(
            'ctx.pod.requests["cpu"] == 500 && ctx.pod.requests["memory"] == 1073741824',
            {"n1", "n2"},
            id="requests in millicores and bytes",
        ),
        pytest.param(
            "ctx.session.count == 2 && ctx.session.nodes == {'n1': 2}",
            {"n1", "n2"},
            id="the session counts pods of the same namespace app and version per node",
        ),
        pytest.param(
            "ctx.session.nodes[?ctx.allocation.node.hostname].orValue(0) == 0",
            {"n2"},
            id="a rule can spread by the session like ONE_PER_HOST",
        ),
    ],
)
def test_a_rule_sees_the_node_the_pod_and_the_session(rule, feasible):
    decision = place(_new(), *_cluster(), _rule(rule))
    assert {n.name for n in decision.nodes if n.feasible} == feasible


def test_the_session_never_counts_the_pod_itself():
    placed = pod("new", namespace="shop", node="n1", labels=app("web"), uid="u-new")
    again = pod("new", namespace="shop", labels=app("web"), uid="u-new")
    decision = place(again, node("n1"), placed, _rule("ctx.session.count == 0 && ctx.session.nodes == {}"))
    assert decision.chosen == "n1"


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        pytest.param("ctx.allocation.node.hostname == 'nowhere'", "rule returned false", id="a false rule"),
        pytest.param(
            'ctx.allocation.node.metadata["rack"] == "r1"',
            'rule failed: Key not found in map : "rack"',
            id="a missing key is an evaluation error",
        ),
        pytest.param(
            "1 / (size(ctx.allocation.node.tags) - 1) == 1",
            "rule failed: divide by zero",
            id="a division by zero",
        ),
        pytest.param(
            'ctx["allocation"]["node"]["metadata"]["zone"]',
            "rule returned string, not a boolean",
            id="a dynamic result that is not a boolean",
        ),
        pytest.param(
            "[" + ",".join(["0"] * 101) + "].all(a, [" + ",".join(["0"] * 101) + "].all(b, a == b))",
            "rule failed: Iteration budget exceeded (at most 10000 comprehension iterations per evaluation)",
            id="a rule over its iteration budget",
        ),
    ],
)
def test_a_rule_that_fails_or_errors_rejects_the_node_with_the_reason_and_never_crashes(rule, why):
    decision = place(_new(), node("n1", labels={"zone": "eu-1"}), _rule(rule))
    assert reasons(decision)["n1"] == Reason(
        STEP, Kind.UNMET, f"PlacementPolicy shop/rule: RULE_BASED: {why}"
    )
    assert decision.error is not None and decision.error.code == 409


def test_a_rule_error_on_one_node_leaves_the_others_placeable():
    decision = place(
        _new(),
        node("n1", labels={"rack": "r1"}),
        node("n2"),
        _rule('ctx.allocation.node.metadata["rack"] == "r1"'),
    )
    assert decision.chosen == "n1"
    assert "Key not found" in reasons(decision)["n2"].message


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        pytest.param(
            "ctx.allocation.node.hostname ==",
            "does not compile: 1:32: Syntax error: mismatched input '<EOF>'",
            id="a syntax error",
        ),
        pytest.param(
            "node.hostname == 'a'",
            "does not compile: 1:5: undeclared reference to 'node.hostname'",
            id="an unknown variable",
        ),
        pytest.param(
            "ctx.allocation.node.hostnme == 'a'",
            "ctx.allocation.node.hostnme is not in the rule context (it has ctx.allocation.node.executorId, "
            "ctx.allocation.node.hostname, ctx.allocation.node.tags, ctx.allocation.node.metadata)",
            id="a misspelt context field",
        ),
        pytest.param(
            "size(ctx.allocation.node.tags)", "must return a boolean, it returns int", id="an integer rule"
        ),
        pytest.param(
            "ctx.allocation.node.hostname",
            "must return a boolean, it returns string",
            id="a context field that is a string",
        ),
        pytest.param(
            'ctx.allocation.node.metadata[?"zone"].orValue("none")',
            "must return a boolean, it returns string",
            id="a label read with optional syntax",
        ),
        pytest.param(
            'ctx.pod.labels.tier == "front" ? "yes" : "no"',
            "must return a boolean, it returns string",
            id="a conditional over pod labels that yields strings",
        ),
        pytest.param(
            "ctx.session.nodes[?ctx.allocation.node.hostname].orValue(0)",
            "must return a boolean, it returns int",
            id="a session count",
        ),
        pytest.param(
            "ctx.allocation.node.tags.all(a, ctx.allocation.node.tags.all(b, "
            "ctx.allocation.node.tags.exists(c, a == b && b == c)))",
            "comprehensions nest 3 deep; at most 2 are allowed",
            id="comprehensions nested three deep",
        ),
        pytest.param(
            'ctx.allocation.node.hostname.matches("' + "a" * 1025 + '")',
            "a matches() pattern is 1025 characters long; at most 1024 are allowed",
            id="a regular expression over 1024 characters",
        ),
        pytest.param(
            'ctx.allocation.node.hostname.matches("(\\\\w{50}){20}")',
            "the matches() pattern '(\\\\w{50}){20}' compiles to 3044 RE2 instructions; "
            "at most 2000 are allowed",
            id="a short regular expression that compiles to a huge program",
        ),
        pytest.param(
            'matches(ctx.allocation.node.hostname, "(")',
            "the matches() pattern '(' is not a valid RE2 expression: missing ): (",
            id="an invalid regular expression",
        ),
        pytest.param(
            'ctx.allocation.node.hostname.matches(ctx.pod.labels["pattern"])',
            "the pattern of matches() must be a string literal",
            id="a pattern built at evaluation time",
        ),
        pytest.param(
            "true || " * 586 + "true",
            "must be at most 4096 characters",
            id="an expression over 4096 characters",
        ),
    ],
)
def test_a_rule_that_does_not_compile_or_breaks_a_limit_is_a_400_naming_the_rule_field(rule, problem):
    decision = place(_new(), node("n1"), _rule(rule))
    assert decision.chosen is None
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message.startswith(
        f"PlacementPolicy shop/rule is not Ready: spec.policy.rule: {problem}"
    )


def test_a_rule_inside_a_composite_names_its_own_path():
    policy = {
        "type": "COMPOSITE",
        "policies": [{"type": "ANY"}, {"type": "RULE_BASED", "rule": "ctx.pod.nme == 'x'"}],
    }
    decision = place(_new(), node("n1"), placement_policy("nested", policy, namespace="shop"))
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message.startswith(
        "PlacementPolicy shop/nested is not Ready: spec.policy.policies[1].rule: "
        "ctx.pod.nme is not in the rule context"
    )


def test_a_rule_reading_only_the_node_sees_a_changed_node_at_once():
    cluster = view(
        node("n1", labels={"zone": "us-1"}), _rule('ctx.allocation.node.metadata["zone"] == "eu-1"')
    )
    new = to_pod(_new())
    assert decide(new, cluster, default_pipeline(), seed=0).chosen is None
    cluster.upsert_node(node_from_k8s(node("n1", labels={"zone": "eu-1"})))
    assert decide(new, cluster, default_pipeline(), seed=0).chosen == "n1"


def test_a_rule_reading_the_pod_answers_each_pod_on_the_same_nodes():
    cluster = view(
        node("eu", labels={"zone": "eu-1"}),
        node("us", labels={"zone": "us-1"}),
        _rule('ctx.allocation.node.metadata["zone"] == ctx.pod.labels["zone"]'),
    )
    for zone, expected in (("eu-1", "eu"), ("us-1", "us"), ("eu-1", "eu")):
        new = to_pod(pod(f"p-{zone}", namespace="shop", labels=app("web", zone=zone)))
        assert decide(new, cluster, default_pipeline(), seed=0).chosen == expected


def test_rule_compile_errors_are_listed_together_with_the_other_problems_of_the_policy():
    policy = {
        "type": "COMPOSITE",
        "policies": [
            {"type": "RULE_BASED", "rule": "ctx.allocation.node.hostname =="},
            {"type": "MAX_N_PER_HOST", "max": 0},
        ],
    }
    decision = place(_new(), node("n1"), placement_policy("two", policy, namespace="shop"))
    assert decision.error is not None and decision.error.code == 400
    assert [e.split(": ")[1] for e in decision.error.errors] == [
        "spec.policy.policies[0].rule",
        "spec.policy.policies[1].max",
    ]
