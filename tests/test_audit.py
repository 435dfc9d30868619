"""`berth audit`: running pods evaluated against their own rules, one snapshot per kind of finding."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from berth.analysis.audit import audit, policy_counts
from berth.cli import main
from berth.configure import build_pipeline
from berth.vocab.pod import compile_pod
from tests.alloc_helpers import cn, vm
from tests.builders import k8s_list, view

APP = "app.kubernetes.io/name"


def policy(name: str, tree: dict[str, Any], selector: dict[str, str], namespace: str = "shop") -> dict:
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector}, "policy": tree},
    }


def _view(*objects: dict[str, Any]):
    v = view(*objects)
    for obj in objects:
        if obj["kind"] == "PlacementPolicy":
            v.upsert_policy(obj)
    return v


def _audit(*objects: dict[str, Any]):
    return audit(_view(*objects), build_pipeline(None, kube_filters=False))


def _violations(report) -> dict[str, list[tuple[str, str]]]:
    """Rule -> (pod, node) pairs."""
    return {rule: [(v.pod, v.node) for v in found] for rule, found in report.by_rule().items()}


def _web(name: str, node: str, **annotations: Any) -> dict[str, Any]:
    return vm(name, namespace="shop", node=node, annotations=annotations, labels={APP: "web"})


def test_a_pod_placed_next_to_a_tag_its_require_without_tag_excludes_is_a_violation_naming_the_tag():
    report = _audit(
        cn("n1"),
        cn("n2"),
        vm("batch-0", namespace="shop", node="n1", annotations={"berth.dev/tags": ["batch"]}),
        _web("web-0", "n1", **{"berth.dev/affinity": {"require_without_tag": ["batch"]}}),
    )
    assert _violations(report) == {"tags/require_without_tag": [("shop/web-0", "n1")]}
    (violation,) = report.violations
    assert violation.reason == (
        'tags/require_without_tag: a pod of namespace shop on the node carries an excluded tag of ["batch"]'
    )
    assert report.refused == []  # n2 would take it
    assert report.checked == 1  # batch-0 carries tags only: no rule to audit


def test_a_require_with_tag_pod_whose_neighbour_is_gone_is_refused_on_reschedule():
    report = _audit(
        cn("n1"), cn("n2"), _web("web-0", "n1", **{"berth.dev/affinity": {"require_with_tag": ["database"]}})
    )
    assert _violations(report) == {"tags/require_with_tag": [("shop/web-0", "n1")]}
    (refusal,) = report.refused
    assert refusal.pod == "shop/web-0" and refusal.rules == ("tags/require_with_tag",)
    assert refusal.message.startswith("no node satisfies the affinity constraint require_with_tag=")


def test_the_pod_is_never_its_own_neighbour():
    # web-0 carries the tag it excludes; alone on its node it breaks nothing.
    lone = _web(
        "web-0", "n1", **{"berth.dev/tags": ["web"], "berth.dev/affinity": {"require_without_tag": ["web"]}}
    )
    assert _audit(cn("n1"), lone).clean
    near_self = _web("web-0", "n1", **{"berth.dev/locality": {"near": "web-0", "strict": True}})
    report = _audit(cn("n1"), near_self)
    assert _violations(report) == {"alloc/hard-filter-locality-hints": [("shop/web-0", "n1")]}


def test_pods_of_another_namespace_are_not_neighbours_in_the_audit():
    report = _audit(
        cn("n1"),
        vm("batch-0", namespace="etl", node="n1", annotations={"berth.dev/tags": ["batch"]}),
        vm("db-0", namespace="etl", node="n1"),
        _web("web-0", "n1", **{"berth.dev/affinity": {"require_without_tag": ["batch"]}}),
        _web("web-1", "n1", **{"berth.dev/locality": {"far": "etl/db-0", "strict": True}}),
    )
    assert report.clean and report.checked == 2


@pytest.mark.parametrize(
    ("annotations", "rule", "reason"),
    [
        pytest.param(
            {"berth.dev/locality": {"far": "db-0", "strict": True}},
            "alloc/hard-filter-locality-hints",
            "strict locality: the node hosts a pod for far db-0 (inst!=db-0)",
            id="strict far with the far pod on the node",
        ),
        pytest.param(
            {"berth.dev/locality": {"near": "cache-0", "strict": True}},
            "alloc/hard-filter-locality-hints",
            "strict locality: the node hosts no pod for near cache-0 (inst==cache-0)",
            id="strict near with the near pod elsewhere",
        ),
        pytest.param(
            {"berth.dev/affinity-rules": [{"key": "role", "operator": "!=", "value": "db"}]},
            "alloc/hard-filter-locality-hints",
            "strict locality: the node hosts a pod for role!=db",
            id="an affinity rule away from a label",
        ),
        pytest.param(
            {"berth.dev/traits": {"ssd": True}},
            "alloc/hard-filter-traits",
            "",
            id="traits the node lacks",
        ),
    ],
)
def test_a_violation_of_each_allocator_rule_names_the_rule(annotations, rule, reason):
    report = _audit(
        cn("n1"),
        cn("n2"),
        cn("n3", traits={"ssd": True}),
        vm("db-0", namespace="shop", node="n1", labels={"role": "db"}),
        vm("cache-0", namespace="shop", node="n2"),
        _web("web-0", "n1", **annotations),
    )
    assert _violations(report) == {rule: [("shop/web-0", "n1")]}
    assert report.violations[0].reason.startswith(f"{rule}: {reason}")
    assert report.refused == []  # another node satisfies each of them


POLICIES = {
    "ANY": ({"type": "ANY"}, "NO_TAG"),
    "ONE_PER_HOST": ({"type": "ONE_PER_HOST"}, "ONE_PER_HOST"),
    "MAX_N_PER_HOST": ({"type": "MAX_N_PER_HOST", "max": 1}, "MAX_N_PER_HOST"),
    "MATCH_TAG": ({"type": "MATCH_TAG", "tag": "ssd"}, "MATCH_TAG"),
    "NO_TAG": ({"type": "NO_TAG"}, "NO_TAG"),
    "COMPOSITE": (
        {"type": "COMPOSITE", "combiner": "AND", "policies": [{"type": "ONE_PER_HOST"}]},
        "ONE_PER_HOST",
    ),
    "RULE_BASED": ({"type": "RULE_BASED", "rule": 'ctx.allocation.node.hostname != "n1"'}, "RULE_BASED"),
}


@pytest.mark.parametrize("kind", list(POLICIES), ids=[f"a {k} policy" for k in POLICIES])
def test_a_violation_of_every_policy_type_names_the_policy(kind):
    tree, failed = POLICIES[kind]
    # n1 holds two web pods, specialised (gpu) for the policies that skip specialised nodes; a node
    # tagged ssd satisfies MATCH_TAG.
    n1 = cn("n1", labels={"tag.berth.dev/gpu": ""} if failed == "NO_TAG" else None)
    n2 = cn("n2", labels={"tag.berth.dev/ssd": ""} if kind == "MATCH_TAG" else None)
    pods = (_web("web-0", "n1"), _web("web-1", "n1"))
    report = _audit(n1, n2, cn("n3"), policy("p", tree, {APP: "web"}), *pods)
    found = _violations(report)
    assert set(found) == {"policy/placement-policy"}
    # web-1, the younger (by name: neither started), is the one beyond what the rule allows
    assert ("shop/web-1", "n1") in found["policy/placement-policy"]
    reason = report.violations[0].reason
    assert reason.startswith(f"policy/placement-policy: PlacementPolicy shop/p: {failed}")


def test_the_deprecated_weighted_form_and_an_invalid_specification_are_reported():
    report = _audit(
        cn("n1"),
        _web("old-0", "n1", **{"berth.dev/affinity": {"cache": 2}}),
        _web("bad-0", "n1", **{"berth.dev/locality": {"near": 3}}),
    )
    assert [n.pod for n in report.deprecated] == ["shop/old-0"]
    assert "deprecated" in report.deprecated[0].message and "prefer_with_tag" in report.deprecated[0].message
    assert [n.pod for n in report.invalid] == ["shop/bad-0"]
    assert report.invalid[0].message.startswith("annotation berth.dev/locality: near")
    assert report.violations == [] and not report.clean


def test_a_clean_cluster_has_no_finding_and_pending_pods_are_not_audited():
    report = _audit(
        cn("n1"),
        _web("web-0", "n1", **{"berth.dev/affinity": {"prefer_with_tag": ["cache"]}}),
        vm("pending", namespace="shop", annotations={"berth.dev/affinity": {"require_with_tag": ["x"]}}),
    )
    assert report.clean and report.checked == 1


def test_policy_counts_are_the_governed_bound_pods_and_those_the_policy_refuses_where_they_are():
    v = _view(
        cn("n1"),
        cn("n2"),
        policy("one", {"type": "ONE_PER_HOST"}, {APP: "web"}),
        _web("web-0", "n1"),
        _web("web-1", "n1"),
        _web("web-2", "n2"),
        vm("db-0", namespace="shop", node="n1", labels={APP: "db"}),
    )
    counts = policy_counts(v, v.policy("shop", "one"), compile_pod)
    # web-0 and web-1 share n1: one of them (web-1, the younger) is beyond what the policy allows
    assert (counts.governed, counts.violating) == (3, 1)
    assert len(list(v.pods())) == 4  # every pod is back in the view


# -- the command ---------------------------------------------------------------------------------------
def _write(tmp_path, name: str, *objects: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _two_per_node(tmp_path) -> str:
    return _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(
            cn("n1"),
            cn("n2"),
            cn("n3"),
            cn("n4"),
            _web("web-0", "n1"),
            _web("web-1", "n1"),
            _web("web-2", "n2"),
            _web("web-3", "n2"),
            _web("web-4", "n3"),
        ),
    )


def test_the_what_if_of_a_policy_shows_the_three_running_pods_it_would_break(tmp_path, capsys):
    cluster = _two_per_node(tmp_path)
    assert main(["audit", "--cluster", cluster]) == 0
    assert capsys.readouterr().out.startswith("clean: 0 pod(s) checked")
    spread = _write(tmp_path, "spread.yaml", policy("spread", {"type": "ONE_PER_HOST"}, {APP: "web"}))
    code = main(["audit", "--cluster", cluster, "--policy", spread, "--output", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["checked"] == 5
    found = out["violations"]["policy/placement-policy"]
    # Each pair is one pod too many for ONE_PER_HOST: the younger (by name, neither started) is
    # reported, naming the pod it shares the node with; web-4 alone on n3 breaks nothing.
    assert [(v["pod"], v["node"], v["collidesWith"]) for v in found] == [
        ("shop/web-1", "n1", ["shop/web-0"]),
        ("shop/web-3", "n2", ["shop/web-2"]),
    ]
    assert out["refusedOnReschedule"] == []  # n4 would take any of them


def test_the_what_if_with_three_violators_prints_them_grouped_by_rule(tmp_path, capsys):
    cluster = _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(
            cn("n1"),
            cn("n2", labels={"tag.berth.dev/ssd": ""}),
            _web("web-0", "n1"),
            _web("web-1", "n1"),
            _web("web-2", "n1"),
            _web("web-3", "n2"),
        ),
    )
    ssd = _write(tmp_path, "ssd.yaml", policy("ssd", {"type": "MATCH_TAG", "tag": "ssd"}, {APP: "web"}))
    assert main(["audit", "--cluster", cluster, "--policy", ssd]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "3 finding(s) in 4 pod(s) checked"
    assert "  policy/placement-policy (3)" in out
    for name in ("web-0", "web-1", "web-2"):
        assert f"    shop/{name} on n1: policy/placement-policy: PlacementPolicy shop/ssd: MATCH_TAG" in out
    assert "web-3" not in out


def test_the_what_if_of_a_configuration_counts_capacity_with_its_ratios(tmp_path, capsys):
    big = {"berth.dev/affinity": {"prefer_with_tag": ["x"]}}
    cluster = _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(
            cn("n1", memory="8Gi"),
            vm("a", namespace="shop", node="n1", memory="5Gi", annotations=big),
            vm("b", namespace="shop", node="n1", memory="5Gi", annotations=big),
        ),
    )
    # Placed by hand: 10 GiB of limits on 8 GiB, which the default RAM ratio (1.0) does not promise.
    assert main(["audit", "--cluster", cluster, "--output", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert set(out["violations"]) == {"alloc/hard-filter-min-ram"}
    # Together they overfill n1: b, the younger, is the one too many, beside a.
    (found,) = out["violations"]["alloc/hard-filter-min-ram"]
    assert (found["pod"], found["collidesWith"]) == ("shop/b", ["shop/a"])
    loose = tmp_path / "config.yaml"
    loose.write_text("defaults:\n  overprovision_ratio_ram: 1.5\n")
    assert main(["audit", "--cluster", cluster, "--config", str(loose)]) == 0
    assert capsys.readouterr().out.startswith("clean: 2 pod(s) checked")


def test_a_bare_policy_tree_is_refused_by_the_what_if_naming_the_file(tmp_path, capsys):
    cluster = _two_per_node(tmp_path)
    tree = _write(tmp_path, "tree.yaml", {"type": "ONE_PER_HOST"})
    assert main(["audit", "--cluster", cluster, "--policy", tree]) == 2
    assert "tree.yaml: a bare policy tree is not a PlacementPolicy object" in capsys.readouterr().err


def test_an_invalid_policy_is_bad_input(tmp_path, capsys):
    cluster = _two_per_node(tmp_path)
    bad = _write(tmp_path, "bad.yaml", policy("bad", {"type": "MAX_N_PER_HOST", "max": 0}, {APP: "web"}))
    assert main(["audit", "--cluster", cluster, "--policy", bad]) == 2
    assert "bad.yaml: PlacementPolicy shop/bad: spec.policy.max" in capsys.readouterr().err


def test_namespace_limits_the_audit_to_the_pods_of_that_namespace(tmp_path, capsys):
    broken = {"berth.dev/affinity": {"require_with_tag": ["gone"]}}
    cluster = _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(
            cn("n1"),
            vm("a", namespace="shop", node="n1", annotations=broken),
            vm("b", namespace="etl", node="n1", annotations=broken),
        ),
    )
    assert main(["audit", "--cluster", cluster, "--namespace", "etl", "--output", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["checked"] == 1 and [r["pod"] for r in out["refusedOnReschedule"]] == ["etl/b"]


# -- the excess, not every pod of a collision; --fail-on; what-if warnings ----------------------------
def _started(obj: dict[str, Any], at: str) -> dict[str, Any]:
    obj.setdefault("status", {})["startTime"] = at
    return obj


def test_three_pods_of_a_one_per_host_policy_on_a_node_are_two_findings_the_youngest(tmp_path, capsys):
    # started: c first, then a, then b: c keeps its place, a and b are the two too many
    pods = [
        _started(_web("a", "n1"), "2026-01-02T00:00:00Z"),
        _started(_web("b", "n1"), "2026-01-03T00:00:00Z"),
        _started(_web("c", "n1"), "2026-01-01T00:00:00Z"),
    ]
    one = policy("one", {"type": "ONE_PER_HOST"}, {APP: "web"})
    cluster = _write(tmp_path, "cluster.yaml", k8s_list(cn("n1"), cn("n2"), one, *pods))
    assert main(["audit", "--cluster", cluster, "--output", "json"]) == 1
    found = json.loads(capsys.readouterr().out)["violations"]["policy/placement-policy"]
    assert [(v["pod"], v["collidesWith"]) for v in found] == [
        ("shop/a", ["shop/c"]),  # b, the youngest, is already counted as too many
        ("shop/b", ["shop/c", "shop/a"]),
    ]
    assert main(["audit", "--cluster", cluster]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "2 finding(s) in 3 pod(s) checked"
    assert "    shop/b on n1: policy/placement-policy: PlacementPolicy shop/one: ONE_PER_HOST" in out
    assert out.count("(collides with shop/c, shop/a)") == 1 and out.count("(collides with shop/c)") == 1
    assert "shop/c on" not in out


def test_a_rule_about_the_node_keeps_every_pod_that_breaks_it():
    # no other pod can make a node carry the ssd tag: each pod on n1 breaks MATCH_TAG on its own
    report = _audit(
        cn("n1"),
        policy("ssd", {"type": "MATCH_TAG", "tag": "ssd"}, {APP: "web"}),
        _web("web-0", "n1"),
        _web("web-1", "n1"),
    )
    assert [(v.pod, v.collides_with) for v in report.violations] == [("shop/web-0", ()), ("shop/web-1", ())]


def _deprecated_and_violating(tmp_path) -> str:
    return _write(
        tmp_path,
        "cluster.yaml",
        k8s_list(
            cn("n1"),
            vm("batch-0", namespace="shop", node="n1", annotations={"berth.dev/tags": ["batch"]}),
            _web("web-0", "n1", **{"berth.dev/affinity": {"require_without_tag": ["batch"]}}),
            _web("old-0", "n1", **{"berth.dev/affinity": {"cache": 2}}),
        ),
    )


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [
        ("all", 1),
        ("violation", 1),
        ("deprecated", 1),
        ("invalid", 0),
        ("invalid,refused", 1),  # web-0: no other node, so it is refused on reschedule too
        ("none", 0),
    ],
)
def test_fail_on_chooses_the_kinds_of_finding_that_exit_1(tmp_path, capsys, fail_on, code):
    cluster = _deprecated_and_violating(tmp_path)
    assert main(["audit", "--cluster", cluster, "--fail-on", fail_on]) == code
    assert "finding(s)" in capsys.readouterr().out  # the report is the same whatever exits 1


def test_an_unknown_fail_on_kind_is_bad_input_naming_the_kinds(tmp_path, capsys):
    cluster = _deprecated_and_violating(tmp_path)
    assert main(["audit", "--cluster", cluster, "--fail-on", "violations"]) == 2
    err = capsys.readouterr().err
    assert "--fail-on: unknown kind 'violations'" in err and "violation, refused, deprecated, invalid" in err


def test_audit_name_and_wide_outputs(tmp_path, capsys):
    cluster = _deprecated_and_violating(tmp_path)
    main(["audit", "--cluster", cluster, "-o", "name"])
    assert capsys.readouterr().out.split() == ["pod/old-0", "pod/web-0"]
    main(["audit", "--cluster", cluster, "-o", "wide"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["KIND", "POD", "NODE", "RULE"]
    assert [line.split()[0] for line in lines[1:]] == ["violation", "refused", "deprecated"]
    main(["audit", "--cluster", cluster, "-o", "wide", "--no-headers"])
    assert capsys.readouterr().out.split()[0] == "violation"


def test_a_what_if_policy_that_governs_no_running_pod_says_so(tmp_path, capsys):
    cluster = _two_per_node(tmp_path)
    nobody = _write(tmp_path, "nobody.yaml", policy("nobody", {"type": "ONE_PER_HOST"}, {APP: "api"}))
    assert main(["audit", "--cluster", cluster, "--policy", nobody]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"warning: {nobody}: PlacementPolicy shop/nobody governs no running pod in namespace shop: "
        "the what-if changes nothing there"
    )
    assert out[1].startswith("clean: ")
    main(["audit", "--cluster", cluster, "--policy", nobody, "--output", "json"])
    (warning,) = json.loads(capsys.readouterr().out)["warnings"]
    assert "governs no running pod" in warning


def test_a_what_if_policy_without_a_namespace_says_where_it_is_applied(tmp_path, capsys):
    cluster = _two_per_node(tmp_path)
    spread = policy("spread", {"type": "ONE_PER_HOST"}, {APP: "web"})
    del spread["metadata"]["namespace"]
    path = _write(tmp_path, "spread.yaml", spread)
    # as kubectl apply: in default, where no pod is
    assert main(["audit", "--cluster", cluster, "--policy", path]) == 0
    out = capsys.readouterr().out
    assert f"warning: {path}: PlacementPolicy spread has no namespace: applied in namespace default" in out
    assert "PlacementPolicy default/spread governs no running pod in namespace default" in out
    # with -n, in that namespace, where it governs the web pods
    assert main(["audit", "--cluster", cluster, "--policy", path, "-n", "shop"]) == 1
    out = capsys.readouterr().out
    assert "applied in namespace shop" in out and "governs no running pod" not in out
    assert "shop/web-1 on n1: policy/placement-policy: PlacementPolicy shop/spread" in out


def test_the_what_if_names_the_policy_that_refuses_every_node_not_one_that_refuses_a_few(tmp_path, capsys):
    # The user guide's example: api-spread (ONE_PER_HOST) is in force, api-ssd (MATCH_TAG) is asked
    # about. Each API server's own node is free of the others; api-spread refuses the nodes of the
    # other two, api-ssd every node: the refusal on reschedule is api-ssd's.
    api = {APP: "api", "app.kubernetes.io/version": "1.0"}
    pods = [vm(f"api-{i}", namespace="shop", node=f"n{i}", labels=api) for i in range(1, 4)]
    spread = policy("api-spread", {"type": "ONE_PER_HOST"}, {APP: "api"})
    cluster = _write(tmp_path, "cluster.yaml", k8s_list(*(cn(f"n{i}") for i in range(1, 6)), spread, *pods))
    ssd = _write(tmp_path, "ssd.yaml", policy("api-ssd", {"type": "MATCH_TAG", "tag": "ssd"}, {APP: "api"}))
    assert main(["audit", "--cluster", cluster, "--policy", ssd, "--output", "json"]) == 1
    refused = json.loads(capsys.readouterr().out)["refusedOnReschedule"]
    assert len(refused) == 3
    for found in refused:
        assert "the PlacementPolicy shop/api-ssd (MATCH_TAG)" in found["message"], found
        assert "api-spread" not in found["message"], found
