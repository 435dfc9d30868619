"""`berth validate` as a user meets it: the warnings where a manifest berth accepts will not do what it
seems to ask, the CEL result type refused, --strict, -o json and reading standard input."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import yaml

from berth.cli import main
from tests.builders import pod

SCHEDULER = {"schedulerName": "berth-scheduler"}


def _write(tmp_path, name: str, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _deployment(
    name: str = "web",
    *,
    template_notes: dict[str, str] | None = None,
    own_notes: dict[str, str] | None = None,
    scheduler: str | None = "berth-scheduler",
    kind: str = "Deployment",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "web", "image": "busybox"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    template = {"metadata": {"annotations": template_notes or {}}, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop", "annotations": own_notes or {}},
        "spec": {"replicas": 2, "template": template},
    }


def _policy(rule: str) -> dict[str, Any]:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "rule", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "policy": {"type": "RULE_BASED", "rule": rule}},
    }


def _run_json(capsys, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["validate", "-o", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def _warnings(capsys, path: str, *args: str) -> list[dict[str, Any]]:
    code, out = _run_json(capsys, path, *args)
    assert code == 0 and out["errors"] == []
    return out["warnings"]


def test_a_misspelt_berth_annotation_is_a_warning_with_the_one_it_likely_meant(tmp_path, capsys):
    path = _write(tmp_path, "p.yaml", [pod("web", annotations={"berth.dev/afinity": "{}"}, spec=SCHEDULER)])
    code = main(["validate", path])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == (
        f'warning: {path}: Pod default/web: metadata.annotations["berth.dev/afinity"]: not an annotation '
        "berth reads; did you mean berth.dev/affinity?"
    )
    assert out.splitlines()[-1] == "ok: 1 object(s) checked, 1 warning(s)"


def test_an_unknown_annotation_nothing_resembles_is_still_named(tmp_path, capsys):
    path = _write(tmp_path, "p.yaml", [_deployment(template_notes={"berth.dev/colour": "blue"})])
    [found] = _warnings(capsys, path)
    assert found["rule"] == "unknown-annotation"
    assert found["field"] == 'spec.template.metadata.annotations["berth.dev/colour"]'
    assert "did you mean" not in found["message"]


def test_the_deprecated_weighted_affinity_is_a_warning_naming_the_constraint_form(tmp_path, capsys):
    path = _write(tmp_path, "p.yaml", [pod("web", affinity={"cache": 10, "batch": -1}, spec=SCHEDULER)])
    [found] = _warnings(capsys, path)
    assert found["rule"] == "deprecated-affinity"
    assert found["field"] == 'metadata.annotations["berth.dev/affinity"]'
    assert '{"prefer_with_tag": ["cache"], "prefer_without_tag": ["batch"]}' in found["message"]


def test_the_deprecated_server_spread_of_an_allocator_configuration_is_a_warning(tmp_path, capsys):
    path = _write(tmp_path, "allocator.yaml", [{"defaults": {"server_spread": "max-ram"}}])
    [found] = _warnings(capsys, path)
    assert found["rule"] == "deprecated-server-spread"
    assert found["field"] == "defaults.server_spread"
    assert found["object"] == "allocator configuration"


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "Job"])
def test_berth_annotations_on_a_workload_itself_are_a_warning_they_never_reach_the_pods(
    tmp_path, capsys, kind
):
    workload = _deployment(own_notes={"berth.dev/tags": '["web"]'}, kind=kind)
    path = _write(tmp_path, "w.yaml", [workload])
    [found] = _warnings(capsys, path)
    assert found["rule"] == "annotation-outside-template"
    assert (found["kind"], found["namespace"], found["name"]) == (kind, "shop", "web")
    assert found["field"] == 'metadata.annotations["berth.dev/tags"]'
    assert found["message"].endswith("move it to spec.template.metadata.annotations")


def test_a_cron_jobs_job_template_annotations_never_reach_the_pods_either(tmp_path, capsys):
    job = {"metadata": {"annotations": {"berth.dev/tags": '["nightly"]'}}, "spec": {"template": {}}}
    job["spec"]["template"] = {"spec": {"schedulerName": "berth-scheduler", "containers": []}}
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": job},
    }
    [found] = _warnings(capsys, _write(tmp_path, "c.yaml", [cron]))
    assert found["field"] == 'spec.jobTemplate.metadata.annotations["berth.dev/tags"]'
    assert found["message"].endswith("move it to spec.jobTemplate.spec.template.metadata.annotations")


def test_a_pod_with_berth_rules_that_names_no_scheduler_is_a_warning_with_the_fix(tmp_path, capsys):
    path = _write(
        tmp_path, "w.yaml", [_deployment(template_notes={"berth.dev/tags": '["web"]'}, scheduler=None)]
    )
    [found] = _warnings(capsys, path)
    assert found["rule"] == "scheduler-name"
    assert found["field"] == "spec.template.spec.schedulerName"
    assert found["message"].endswith("set spec.template.spec.schedulerName: berth-scheduler")


def test_a_near_miss_scheduler_name_is_a_warning_with_did_you_mean(tmp_path, capsys):
    notes = {"berth.dev/tags": '["web"]'}
    path = _write(tmp_path, "p.yaml", [pod("web", tags=["web"], spec={"schedulerName": "berth-schedular"})])
    [found] = _warnings(capsys, path)
    assert found["field"] == "spec.schedulerName"
    assert "did you mean 'berth-scheduler'?" in found["message"]
    # Another scheduler, named as the one berth runs as: nothing to say.
    other = _write(tmp_path, "o.yaml", [_deployment(template_notes=notes, scheduler="placer")])
    assert _warnings(capsys, other, "--scheduler-name", "placer") == []
    [found] = _warnings(capsys, other)
    assert "validate with --scheduler-name placer" in found["message"]


def test_a_pod_without_berth_rules_may_name_any_scheduler(tmp_path, capsys):
    path = _write(tmp_path, "p.yaml", [pod("a", spec=SCHEDULER), _deployment(scheduler="default-scheduler")])
    assert _warnings(capsys, path) == []


def test_a_file_with_nothing_for_berth_is_a_warning(tmp_path, capsys):
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
    path = _write(tmp_path, "cm.yaml", [plain, _deployment(scheduler=None)])
    code = main(["validate", path])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"warning: {path}: nothing for berth in 2 object(s)")


def test_a_file_that_holds_no_kubernetes_objects_is_an_error(tmp_path, capsys):
    random = tmp_path / "random.json"
    random.write_text('{"results": [1, 2, 3]}')
    code, out = _run_json(capsys, str(random))
    assert code == 2
    [error] = out["errors"]
    assert (error["rule"], error["object"], error["field"]) == ("not-kubernetes", "document 1", "kind")
    assert out["warnings"] == []


def test_a_rule_whose_result_is_not_a_boolean_is_refused(tmp_path, capsys):
    path = _write(tmp_path, "policy.yaml", [_policy("ctx.allocation.node.hostname")])
    code = main(["validate", path])
    out = capsys.readouterr()
    assert code == 2
    assert out.out.splitlines() == [
        f"{path}: PlacementPolicy shop/rule: spec.policy.rule: must return a boolean, it returns string"
    ]
    code, found = _run_json(capsys, path)
    assert [(e["rule"], e["field"]) for e in found["errors"]] == [("rule-not-boolean", "spec.policy.rule")]


def test_strict_fails_on_warnings_with_exit_1_and_errors_stay_exit_2(tmp_path, capsys):
    warned = _write(tmp_path, "w.yaml", [pod("web", tags=["web"])])  # no schedulerName
    assert main(["validate", warned]) == 0
    assert main(["validate", "--strict", warned]) == 1
    assert "failing with --strict" in capsys.readouterr().err
    clean = _write(tmp_path, "c.yaml", [pod("web", tags=["web"], spec=SCHEDULER)])
    assert main(["validate", "--strict", clean]) == 0
    broken = _write(tmp_path, "b.yaml", [pod("web", tags=[""])])
    assert main(["validate", "--strict", broken]) == 2


def test_json_output_lists_objects_errors_and_warnings_each_naming_file_object_field_and_rule(
    tmp_path, capsys
):
    path = _write(
        tmp_path,
        "all.yaml",
        [
            _deployment(template_notes={"berth.dev/tags": '["web"]', "berth.dev/affinity": '{"a": 1}'}),
            pod("x", tags=[1], spec=SCHEDULER),
        ],
    )
    code, out = _run_json(capsys, path)
    assert code == 2
    assert set(out) == {"checked", "errors", "warnings", "exit"} and out["exit"] == 2
    assert [(c["kind"], c["name"], c["document"]) for c in out["checked"]] == [
        ("Deployment", "web", 0),
        ("Pod", "x", 1),
    ]
    [error] = out["errors"]
    assert error == {
        "severity": "error",
        "file": path,
        "object": "Pod default/x",
        "kind": "Pod",
        "namespace": "default",
        "name": "x",
        "document": 1,
        "field": 'metadata.annotations["berth.dev/tags"]',
        "rule": "invalid-annotation",
        "message": "annotation berth.dev/tags: tags should be non-empty strings, found 1",
    }
    [warning] = out["warnings"]
    assert (warning["object"], warning["rule"]) == ("Deployment shop/web", "deprecated-affinity")


def test_a_dash_reads_the_manifests_from_standard_input(monkeypatch, capsys):
    text = yaml.safe_dump(pod("web", annotations={"berth.dev/tag": '["web"]'}, spec=SCHEDULER))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out = _run_json(capsys, "-")
    assert code == 0
    [found] = out["warnings"]
    assert found["file"] == "<stdin>" and "did you mean berth.dev/tags?" in found["message"]
