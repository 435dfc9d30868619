"""The chart's files that need no helm: values documented and valid, the CRDs shared with manifests/, the
generated scheduler configuration. Rendering, linting and the API server are e2e/test_chart.py's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import berth

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts/berth"
sys.path.insert(0, str(ROOT / "charts"))
import render_chart  # noqa: E402


def values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def schema() -> dict:
    return json.loads((CHART / "values.schema.json").read_text())


def test_every_value_is_documented_in_values_yaml():
    assert render_chart.undocumented_values() == []


def test_the_readme_values_table_is_generated_from_values_yaml():
    assert (CHART / "README.md").read_text() == render_chart.readme(), "run python charts/render_chart.py"


def test_the_default_values_satisfy_the_schema():
    jsonschema.validate(values(), schema())


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"scheduler": {"replicas": "two"}}, id="a number given as a word"),
        pytest.param({"scheduler": {"nmae": "x"}}, id="a misspelt key"),
        pytest.param({"webhook": {"failurePolicy": {"pods": "Sometimes"}}}, id="an unknown failure policy"),
        pytest.param({"webhook": {"timeoutSeconds": 45}}, id="a webhook timeout over the API server's 30s"),
        pytest.param(
            {"extender": {"httpTimeout": "ten seconds"}}, id="a duration kube-scheduler cannot read"
        ),
        pytest.param({"scheduler": {"name": "Berth_Scheduler"}}, id="a scheduler name that is no DNS label"),
    ],
)
def test_the_schema_refuses_values_that_cannot_work(override):
    merged = values()
    for key, value in override.items():
        merged[key] = {**merged[key], **value}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merged, schema())


def test_the_chart_and_manifests_hold_the_same_crds():
    chart_crds = sorted(p.name for p in (CHART / "crds").iterdir())
    assert chart_crds == sorted(p.name for p in (ROOT / "manifests/crds").iterdir())
    for name in chart_crds:
        assert (CHART / "crds" / name).read_bytes() == (ROOT / "manifests/crds" / name).read_bytes(), name


def test_the_chart_installs_this_version_of_berth():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == berth.__version__


def test_the_generated_scheduler_configuration_keeps_what_berth_relies_on():
    text = render_chart.SCHEDULER_CONFIG.read_text()
    assert text.startswith("# Generated from charts/berth")
    config = yaml.safe_load(text)
    assert config["percentageOfNodesToScore"] == 100
    assert config["profiles"] == [
        {"schedulerName": "berth-scheduler", "plugins": {"score": {"disabled": [{"name": "*"}]}}}
    ]
    (extender,) = config["extenders"]
    assert extender["urlPrefix"].startswith("http://127.0.0.1:")
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"]) == (
        "filter",
        "prioritize",
        "bind",
    )
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is False
    assert config["leaderElection"]["resourceName"] == "berth-scheduler"
