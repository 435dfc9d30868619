"""The PlacementPolicy CRD and the sample policies: every sample is valid for the API server's schema
and its validation rules, and for berth; what the CRD refuses, berth refuses too."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from cel_expr_python import cel

from berth.cli import main
from berth.vocab.policy import load_policy
from berth.vocab.policy.schema import TYPES

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "manifests/crds/placementpolicies.berth.dev.yaml"
SAMPLES = sorted((ROOT / "manifests/samples").glob("*.yaml"))


def _crd() -> dict[str, Any]:
    return yaml.safe_load(CRD.read_text())


def _version() -> dict[str, Any]:
    (version,) = _crd()["spec"]["versions"]
    return version


def _openapi() -> dict[str, Any]:
    return _version()["schema"]["openAPIV3Schema"]


def _json_schema(node: Any) -> Any:
    """The OpenAPI v3 schema as JSON Schema: `nullable` becomes a null type, and an object that lists
    its properties refuses others (kubectl's strict field validation)."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"
    }
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if (
        node.get("type") == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out.setdefault("additionalProperties", False)
    return out


def _rules_on(schema: dict[str, Any], value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(path, rule, self) for every x-kubernetes-validations rule the API server runs on `value`."""
    for rule in schema.get("x-kubernetes-validations", ()):
        yield path, rule["rule"], value
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                yield from _rules_on(sub, value[key], f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from _rules_on(schema["items"], item, f"{path}[{i}]")


def _all_rules(schema: dict[str, Any]) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations", ()):
        yield rule["rule"]
    for sub in (schema.get("properties") or {}).values():
        yield from _all_rules(sub)
    if "items" in schema:
        yield from _all_rules(schema["items"])


_ENV = cel.NewEnv(variables={"self": cel.Type.DYN})


def _holds(rule: str, value: Any) -> bool:
    result = _ENV.compile(rule).eval(data={"self": value})
    assert result.type() == cel.Type.BOOL, f"{rule}: {result.value()}"
    return bool(result.value())


def _crd_problems(obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_json_schema(_openapi()))
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    problems += [f"{p}: {rule}" for p, rule, value in _rules_on(_openapi(), obj) if not _holds(rule, value)]
    return problems


def test_the_crd_defines_a_namespaced_placement_policy_with_status_and_printer_columns():
    crd = _crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "placementpolicies.berth.dev"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "berth.dev",
        "Namespaced",
        "PlacementPolicy",
    )
    assert "ppol" in spec["names"]["shortNames"]
    version = _version()
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Type"] == ".spec.policy.type"
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"
    assert columns["Violating"] == ".status.violatingPods"
    status = _openapi()["properties"]["status"]["properties"]
    assert {"conditions", "observedGeneration", "governedPods", "violatingPods"} <= set(status)


def test_every_validation_rule_of_the_crd_compiles_as_cel_returning_a_boolean():
    rules = list(_all_rules(_openapi()))
    assert len(rules) >= 5
    for rule in rules:
        assert _ENV.compile(rule).return_type() == cel.Type.BOOL, rule


def test_there_is_a_sample_for_every_policy_type():
    types = {yaml.safe_load(p.read_text())["spec"]["policy"]["type"] for p in SAMPLES}
    assert types == set(TYPES)


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"the {p.stem} sample" for p in SAMPLES])
def test_every_sample_is_valid_for_the_crd_and_for_berth(sample, capsys):
    obj = yaml.safe_load(sample.read_text())
    assert _crd_problems(obj) == []
    assert load_policy(obj).ready
    assert main(["validate", str(sample)]) == 0
    assert capsys.readouterr().out == "ok: 1 object(s) checked\n"


def _policy(policy: Any, selector: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"policy": policy}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(_policy({"type": "ONE_PER_HOST", "max": 2}), id="max on a type without it"),
        pytest.param(_policy({"type": "MAX_N_PER_HOST"}), id="MAX_N_PER_HOST without max"),
        pytest.param(_policy({"type": "MAX_N_PER_HOST", "max": 65}), id="max above 64"),
        pytest.param(_policy({"type": "MATCH_TAG"}), id="MATCH_TAG without tag"),
        pytest.param(_policy({"type": "MATCH_TAG", "tag": ""}), id="an empty tag"),
        pytest.param(_policy({"type": "RULE_BASED"}), id="RULE_BASED without rule"),
        pytest.param(_policy({"type": "ANY", "rule": "true"}), id="rule on a type without it"),
        pytest.param(_policy({"type": "COMPOSITE"}), id="COMPOSITE without policies"),
        pytest.param(_policy({"type": "COMPOSITE", "policies": []}), id="an empty COMPOSITE"),
        pytest.param(_policy({"type": "NO_TAG", "combiner": "AND"}), id="a combiner outside COMPOSITE"),
        pytest.param(
            _policy({"type": "COMPOSITE", "combiner": "XOR", "policies": [{"type": "ANY"}]}),
            id="an unknown combiner",
        ),
        pytest.param(
            _policy(
                {"type": "COMPOSITE", "policies": [{"type": "COMPOSITE", "policies": [{"type": "BOGUS"}]}]}
            ),
            id="an unknown type two levels down",
        ),
        pytest.param(_policy({"type": "LOCAL"}), id="Drove's LOCAL"),
        pytest.param(_policy({"type": "ANY", "extra": 1}), id="an unknown field"),
        pytest.param(
            _policy({"type": "ANY"}, {"matchExpressions": [{"key": "a", "operator": "In"}]}),
            id="In without values",
        ),
        pytest.param(
            _policy(
                {"type": "ANY"}, {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}
            ),
            id="Exists with values",
        ),
    ],
)
def test_what_the_crd_refuses_berth_refuses_too(obj):
    assert _crd_problems(obj), "the CRD accepts it"
    assert load_policy(obj).errors, "berth accepts it"


def test_below_the_third_level_the_crd_keeps_the_tree_and_berth_alone_refuses_it():
    deep = {"type": "COMPOSITE", "policies": [{"type": "BOGUS"}]}
    for _ in range(2):
        deep = {"type": "COMPOSITE", "policies": [copy.deepcopy(deep)]}
    obj = _policy(deep)
    assert _crd_problems(obj) == []
    assert load_policy(obj).errors == (
        "spec.policy.policies[0].policies[0].policies[0].type: must be one of ANY, ONE_PER_HOST, "
        "MAX_N_PER_HOST, MATCH_TAG, NO_TAG, COMPOSITE, RULE_BASED, found 'BOGUS'",
    )
