"""Every malformed tags or affinity annotation is a 400 that names the annotation and the rule."""

from __future__ import annotations

import json

import pytest

from tests.builders import node, pod

MALFORMED = [
    pytest.param({"berth.dev/tags": "[web"}, "berth.dev/tags", "invalid JSON", id="tags that are not JSON"),
    pytest.param({"berth.dev/tags": '"web"'}, "berth.dev/tags", "JSON list", id="tags that are a string"),
    pytest.param(
        {"berth.dev/tags": '{"web": 1}'}, "berth.dev/tags", "JSON list", id="tags that are an object"
    ),
    pytest.param({"berth.dev/tags": '["web", ""]'}, "berth.dev/tags", "non-empty", id="an empty tag"),
    pytest.param(
        {"berth.dev/tags": '["web", 3]'}, "berth.dev/tags", "non-empty strings", id="a number as a tag"
    ),
    pytest.param({"berth.dev/tags": '["web", null]'}, "berth.dev/tags", "non-empty strings", id="a null tag"),
    pytest.param({"berth.dev/tags": "[]"}, "berth.dev/tags", "no value specified", id="an empty tag list"),
    pytest.param(
        {"berth.dev/affinity": "{web: 1}"}, "berth.dev/affinity", "invalid JSON", id="affinity not JSON"
    ),
    pytest.param(
        {"berth.dev/affinity": '["web"]'}, "berth.dev/affinity", "JSON object", id="affinity that is a list"
    ),
    pytest.param(
        {"berth.dev/affinity": "{}"}, "berth.dev/affinity", "no value specified", id="an empty affinity"
    ),
    pytest.param(
        {"berth.dev/affinity": '{"require_with_tag": "web"}'},
        "berth.dev/affinity",
        'constraint "require_with_tag" should be a JSON list of tags',
        id="a constraint value that is not a list",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"prefer_with_tag": ["web", ""]}'},
        "berth.dev/affinity",
        'constraint "prefer_with_tag" should contain only non-empty tag names',
        id="an empty tag in a constraint list",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"require_without_tag": [true]}'},
        "berth.dev/affinity",
        'constraint "require_without_tag" should contain only non-empty tag names',
        id="a boolean in a constraint list",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"web": true}'},
        "berth.dev/affinity",
        "should be integers, not booleans",
        id="a boolean weight",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"web": 2.5}'},
        "berth.dev/affinity",
        "should be integers",
        id="a fractional weight",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"web": "banana"}'},
        "berth.dev/affinity",
        "should be integers",
        id="a word as a weight",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"web": [1]}'},
        "berth.dev/affinity",
        "should be integers",
        id="a list as a weight",
    ),
    pytest.param(
        {"berth.dev/affinity": '{"web": NaN}'}, "berth.dev/affinity", "invalid JSON", id="NaN as a weight"
    ),
    pytest.param(
        {"berth.dev/affinity": '{"require_with_tags": ["web"]}'},
        "berth.dev/affinity",
        "should be integers",
        id="a misspelt constraint name read as a weight",
    ),
]


@pytest.mark.parametrize(("annotations", "field", "rule"), MALFORMED)
def test_malformed_annotation_is_a_400_naming_the_annotation_and_the_rule(simulate, annotations, field, rule):
    code, out = simulate(pod("p", annotations=annotations), node("n1"))
    assert code == 2
    assert out["chosen"] is None
    assert out["error"]["code"] == 400
    assert f"annotation {field}" in out["error"]["message"]
    assert rule in out["error"]["message"]
    assert all(not n["feasible"] for n in out["nodes"])
    assert [e["reason"] for e in out["events"]] == ["InvalidPlacementSpec"]


def test_mixing_the_weighted_and_constraint_forms_is_a_400_naming_the_offending_keys(simulate):
    affinity = {"prefer_with_tag": ["cache"], "webserver": -10, "db": 5}
    code, out = simulate(pod("p", affinity=affinity), node("n1"))
    assert code == 2
    message = out["error"]["message"]
    assert '["db", "webserver"]' in message
    assert "cannot be mixed" in message


def test_a_tag_both_required_and_excluded_is_one_pod_level_400(simulate):
    code, out = simulate(
        pod("p", affinity={"require_with_tag": ["a"], "require_without_tag": ["a"]}), node("n1")
    )
    assert code == 2
    assert "both require_with_tag and require_without_tag" in out["error"]["message"]


def test_every_problem_is_reported_not_just_the_first(simulate):
    annotations = {"berth.dev/tags": "[1]", "berth.dev/affinity": '{"a": true, "b": "x"}'}
    code, out = simulate(pod("p", annotations=annotations), node("n1"))
    assert code == 2
    errors = out["error"]["errors"]
    assert len(errors) == 3
    assert errors[0].startswith("annotation berth.dev/tags")
    assert all(e.startswith("annotation berth.dev/affinity") for e in errors[1:])


@pytest.mark.parametrize(
    ("affinity", "mapped"),
    [
        pytest.param(
            {"webserver": -10}, {"prefer_without_tag": ["webserver"]}, id="a negative weight avoids"
        ),
        pytest.param({"cache": 10}, {"prefer_with_tag": ["cache"]}, id="a positive weight prefers"),
        pytest.param({"a": 0}, {}, id="zero maps to nothing"),
        pytest.param(
            {"a": "3", "b": "-1"},
            {"prefer_with_tag": ["a"], "prefer_without_tag": ["b"]},
            id="numeric strings",
        ),
        pytest.param(
            {"a": 100, "b": 1, "c": -5},
            {"prefer_with_tag": ["a", "b"], "prefer_without_tag": ["c"]},
            id="magnitudes",
        ),
    ],
)
def test_weighted_form_is_read_by_sign_with_a_deprecation_warning_naming_the_mapped_form(
    simulate, affinity, mapped
):
    code, out = simulate(pod("p", affinity=affinity), node("n1"), node("n2"))
    assert code == 0
    warnings = [e for e in out["events"] if e["reason"] == "DeprecatedAffinity"]
    assert len(warnings) == 1
    assert warnings[0]["type"] == "Warning"
    assert json.dumps(mapped) in warnings[0]["message"]


def test_the_constraint_form_and_an_empty_constraint_list_are_accepted_without_warning(simulate):
    code, out = simulate(pod("p", tags=["web"], affinity={"prefer_with_tag": []}), node("n1"), node("n2"))
    assert code == 0
    assert not [e for e in out["events"] if e["type"] == "Warning"]


def test_a_misspelt_berth_annotation_is_flagged_with_a_warning(simulate):
    code, out = simulate(pod("p", annotations={"berth.dev/afinity": "{}"}), node("n1"), node("n2"))
    assert code == 0
    assert any(
        e["reason"] == "UnknownAnnotation" and "berth.dev/afinity" in e["message"] for e in out["events"]
    )


def test_an_annotation_over_the_size_limit_is_refused(simulate):
    huge = json.dumps([f"tag-{i}" for i in range(20000)])
    code, out = simulate(pod("p", annotations={"berth.dev/tags": huge}), node("n1"))
    assert code == 2
    assert "longer than" in out["error"]["message"]


def test_a_malformed_tags_annotation_on_a_neighbour_never_breaks_another_pods_decision(simulate):
    neighbour = pod("old", node="n1", annotations={"berth.dev/tags": "not json"})
    code, out = simulate(pod("p", affinity={"prefer_with_tag": ["web"]}), node("n1"), node("n2"), neighbour)
    assert code == 0
    assert {n["name"]: n["scoreParts"]["tags/tag-affinity"] for n in out["nodes"]} == {"n1": 0, "n2": 0}
