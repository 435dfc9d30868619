"""The pod's allocator annotations: each malformed one is a 400 naming the annotation and the rule."""

from __future__ import annotations

import json

import pytest

from berth.errors import InvalidAnnotation
from berth.vocab.alloc.request import compile_alloc
from berth.vocab.pod import compile_pod
from tests.alloc_helpers import cn, config, vm
from tests.builders import place, to_pod

PACKAGES = config(packages={"small": {"max_physical_memory": 512, "traits": {"ssd": True}}})


@pytest.mark.parametrize(
    ("annotation", "value", "problem"),
    [
        pytest.param(
            "berth.dev/traits",
            "[1]",
            "value should be a JSON object of traits, not a list",
            id="traits not an object",
        ),
        pytest.param(
            "berth.dev/traits",
            '{"ssd": 1}',
            'trait "ssd" should be a boolean, a non-empty string or a list of strings, not a number',
            id="a trait that is a number",
        ),
        pytest.param(
            "berth.dev/traits",
            '{"hw": []}',
            'trait "hw" should be a list of 1 to 64 non-empty strings, found []',
            id="an empty trait list",
        ),
        pytest.param(
            "berth.dev/traits",
            "{ssd}",
            "value should be a JSON object of traits (invalid JSON:",
            id="bad JSON",
        ),
        pytest.param(
            "berth.dev/locality",
            '{"near": 5}',
            "near should be a target or a list of targets, not a number",
            id="a near target that is a number",
        ),
        pytest.param(
            "berth.dev/locality",
            '{"far": ["Not A Name"]}',
            'far: "Not A Name" should be a pod name, namespace/name, a pod uid or a uid prefix of at least 8 '
            "characters",
            id="a far target that is no pod name",
        ),
        pytest.param(
            "berth.dev/locality",
            '{"near": "a", "strict": "yes"}',
            "strict should be true or false, not a string",
            id="strict that is not a boolean",
        ),
        pytest.param(
            "berth.dev/locality",
            '{"nearby": "a"}',
            'unknown key "nearby" (near, far, strict and topologyKey are read)',
            id="an unknown locality key",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '{"key": "instance"}',
            "value should be a JSON list of affinity rules, not an object",
            id="rules not a list",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "=", "value": "web"}]',
            'rule 1: operator should be "==" or "!=", found "="',
            id="an operator outside == and !=",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "==", "value": "web", "valueType": "regex"}]',
            'rule 1: valueType should be "exact", "glob" or "re", found "regex"',
            id="a value type outside exact glob and re",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "==", "value": "web", "isSoft": "no"}]',
            'rule 1: isSoft should be true or false, found "no"',
            id="isSoft that is not a boolean",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "", "operator": "==", "value": "web"}]',
            'rule 1: key should be a non-empty string, found ""',
            id="an empty key",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "==", "value": "/[/", "valueType": "re"}]',
            "rule 1 (instance==/[/): invalid regular expression: missing ]: [",
            id="a regular expression that does not compile names the rule",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "==", "value": "/(a)\\\\1/", "valueType": "re"}]',
            "rule 1 (instance==/(a)\\1/): invalid regular expression: invalid escape sequence: \\1",
            id="a backreference RE2 refuses",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            json.dumps(
                [
                    {
                        "key": "instance",
                        "operator": "==",
                        "value": "(a|b){1000}x{1000}y{1000}",
                        "valueType": "re",
                    }
                ]
            ),
            "rule 1 (instance==(a|b){1000}x{1000}y{1000}): the regular expression is too large (program size",
            id="a regular expression over the size limit",
        ),
        pytest.param(
            "berth.dev/affinity-rules",
            '[{"key": "instance", "operator": "==", "value": "web", "weight": 2}]',
            'rule 1: unknown key "weight" (key, operator, value, valueType, isSoft are read)',
            id="an unknown rule key",
        ),
        pytest.param(
            "berth.dev/image",
            '{"requirements": {"min_ram": "lots"}}',
            'requirements.min_ram should be a whole number of MiB, found "lots"',
            id="a min_ram that is not a number",
        ),
        pytest.param(
            "berth.dev/image",
            '{"requirements": {"min_platform": {"7.0": "soon"}}}',
            'requirements.min_platform.7.0: "soon" should be a platform stamp like 20240131T120000Z or a '
            "version like 1.35.4",
            id="a min_platform value that is no platform",
        ),
        pytest.param(
            "berth.dev/image",
            '{"requirements": {"min_ram": 2048, "max_ram": 1024}}',
            "requirements.min_ram 2048 is more than requirements.max_ram 1024",
            id="min_ram above max_ram",
        ),
        pytest.param(
            "berth.dev/image",
            '{"name": "base", "traits": {"ssd": true}}',
            'unknown key "name" (traits, requirements, image_size are read)',
            id="an image key berth does not read",
        ),
        pytest.param(
            "berth.dev/image",
            '{"traits": ["ssd"]}',
            "traits should be a JSON object, not a list",
            id="image traits that are no object",
        ),
        pytest.param(
            "berth.dev/image",
            '{"traits": {"ssd": 1}}',
            'traits: trait "ssd" should be a boolean, a non-empty string or a list of strings, not a number',
            id="an image trait of a type traits do not take",
        ),
        pytest.param(
            "berth.dev/image",
            '{"image_size": -1}',
            "image_size should be a whole number of MiB, found -1",
            id="a negative image size",
        ),
        pytest.param(
            "berth.dev/nic-tags",
            '["external", 3]',
            "NIC tags should be non-empty strings or lists of alternatives, found 3",
            id="a NIC tag that is a number",
        ),
        pytest.param("berth.dev/package", "  ", "no value specified", id="an empty package name"),
        pytest.param(
            "berth.dev/package",
            "large",
            'unknown package "large" (the allocator configuration defines: small)',
            id="a package the configuration does not define",
        ),
    ],
)
def test_a_malformed_allocator_annotation_is_a_400_naming_the_annotation_and_the_rule(
    annotation, value, problem
):
    decision = place(vm("new", annotations={annotation: value}), cn("n1"), cfg=PACKAGES)
    assert decision.chosen is None
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message.startswith(f"annotation {annotation}: {problem}")


def test_every_problem_of_a_pods_annotations_is_listed_together():
    annotations = {"berth.dev/traits": "[1]", "berth.dev/locality": '{"near": 5}', "berth.dev/package": "x"}
    with pytest.raises(InvalidAnnotation) as info:
        compile_pod(to_pod(vm("new", annotations=annotations)), config=PACKAGES)
    assert [e.split(":", 1)[0] for e in info.value.errors] == [
        "annotation berth.dev/traits",
        "annotation berth.dev/locality",
        "annotation berth.dev/package",
    ]


@pytest.mark.parametrize(
    ("memory", "requirement", "problem"),
    [
        pytest.param(
            "512Mi",
            {"min_ram": 1024},
            "requirements.min_ram is 1024 MiB but the pod's RAM (memory limit) is 512 MiB",
            id="below the image's minimum",
        ),
        pytest.param(
            "4Gi",
            {"max_ram": 2048},
            "requirements.max_ram is 2048 MiB but the pod's RAM (memory limit) is 4096 MiB",
            id="above the image's maximum",
        ),
    ],
)
def test_a_pod_whose_ram_breaks_its_images_requirements_is_a_400(memory, requirement, problem):
    image = {"requirements": requirement}
    decision = place(vm("new", memory=memory, annotations={"berth.dev/image": image}), cn("n1"))
    assert decision.error is not None and decision.error.code == 400
    assert decision.error.message == f"annotation berth.dev/image: {problem}"


def test_a_pod_within_its_images_ram_requirements_is_placed():
    image = {"requirements": {"min_ram": 512, "max_ram": 1024}}
    assert place(vm("new", memory="1Gi", annotations={"berth.dev/image": image}), cn("n1")).chosen == "n1"


def test_the_package_is_resolved_from_the_configuration():
    request, problems = compile_alloc({"berth.dev/package": "small"}, config=PACKAGES)
    assert problems == []
    assert request.package is not None and request.package.ram == 512


def test_the_package_may_be_named_as_a_json_string_like_the_other_annotations():
    request, problems = compile_alloc({"berth.dev/package": '"small"'}, config=PACKAGES)
    assert problems == []
    assert request.package is not None and request.package.ram == 512
    _, problems = compile_alloc({"berth.dev/package": '""'}, config=PACKAGES)
    assert problems == ["annotation berth.dev/package: no value specified"]


def test_without_a_configuration_the_package_name_is_not_checked():
    request, problems = compile_alloc({"berth.dev/package": "anything"}, config=None)
    assert problems == []
    assert request.package is None


def test_traits_are_merged_image_over_pod_over_package():
    annotations = {
        "berth.dev/package": "small",
        "berth.dev/traits": '{"ssd": false, "rack": "r1"}',
        "berth.dev/image": '{"traits": {"rack": "r2"}}',
    }
    request, _ = compile_alloc(annotations, config=PACKAGES)
    assert request.combined_traits() == {"ssd": False, "rack": "r2"}


def test_the_allocator_annotations_are_not_reported_as_unknown():
    annotations = {
        "berth.dev/traits": '{"ssd": true}',
        "berth.dev/nic-tags": '["external"]',
        "berth.dev/affinity-rules": '[{"key": "app", "operator": "!=", "value": "db"}]',
        "berth.dev/locality": '{"far": "db-0"}',
        "berth.dev/image": '{"traits": {"ssd": true}}',
    }
    spec = compile_pod(to_pod(vm("new", annotations=annotations)))
    assert spec.alloc.traits == {"ssd": True}
    assert not [w for w in spec.warnings if w.reason == "UnknownAnnotation"]
