"""berth's rules per topology domain (`topologyKey`): one per zone, at most N per rack, a neighbour in
the same zone, far means another zone; nodes without the label; invalid keys; the view's counts per
domain kept with every change; audit, rebalance and simulate naming the domain."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.analysis.audit import audit, policy_counts
from berth.analysis.preemption import select_victims
from berth.analysis.rebalance import plan
from berth.analysis.room import capacity
from berth.cli import main
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.topology import key_problem
from berth.cluster.view import ClusterView, app_key
from berth.configure import build_pipeline, default_pipeline
from berth.engine import Kind, decide
from berth.vocab.pod import compile_pod
from berth.vocab.policy import load_policy
from tests import builders
from tests.alloc_helpers import cn, vm
from tests.builders import k8s_list, node, place, pod, to_pod
from tests.policy_builders import app, placement_policy, reasons

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
POLICY = "policy/placement-policy"


def zoned(name: str, zone: str | None, rack: str | None = None) -> dict[str, Any]:
    labels = {}
    if zone is not None:
        labels[ZONE] = zone
    if rack is not None:
        labels[RACK] = rack
    return node(name, labels=labels)


# Three zones of two nodes, and one node without the zone label.
NODES = [
    zoned("a1", "a"),
    zoned("a2", "a"),
    zoned("b1", "b"),
    zoned("b2", "b"),
    zoned("c1", "c"),
    zoned("x1", None),
]


def web(name: str, node_name: str | None = None, **kw: Any) -> dict[str, Any]:
    return pod(name, node=node_name, labels=app("web"), **kw)


def tagged(name: str, node_name: str, tags: list[str], namespace: str = "default") -> dict[str, Any]:
    return pod(name, node=node_name, tags=tags, namespace=namespace)


def with_affinity(affinity: dict[str, Any], name: str = "new") -> dict[str, Any]:
    return pod(name, labels=app("web"), annotations={"berth.dev/affinity": json.dumps(affinity)})


def with_locality(locality: dict[str, Any]) -> dict[str, Any]:
    return pod("new", labels=app("web"), annotations={"berth.dev/locality": json.dumps(locality)})


def feasible(decision) -> set[str]:
    return {n for n, r in reasons(decision).items() if r is None or r.kind is Kind.SET_ASIDE}


# -- PlacementPolicy ------------------------------------------------------------------------------------
def test_one_per_host_per_zone_refuses_every_node_of_a_zone_that_runs_the_app_naming_zone_and_pod():
    decision = place(
        web("new"),
        *NODES,
        web("web-1", "a1"),
        placement_policy("zone", {"type": "ONE_PER_HOST", "topologyKey": ZONE}),
    )
    found = reasons(decision)
    assert feasible(decision) == {"b1", "b2", "c1"}
    assert found["a2"].kind is Kind.EXHAUSTED  # evicting web-1 would free zone a
    assert found["a2"].message == (
        "PlacementPolicy default/zone: ONE_PER_HOST: zone a (topology.kubernetes.io/zone) already runs web-1 "
        "of app web version 1.0"
    )
    assert found["a2"].values == {"pods": 1, "topologyKey": ZONE, "domain": "a"}
    # the node without the label: refused by the hard rule, naming the label; no eviction helps
    assert found["x1"].kind is Kind.UNMET
    assert "has no label topology.kubernetes.io/zone" in found["x1"].message


def test_a_deployment_of_four_under_one_per_host_per_zone_on_three_zones_places_three_and_refuses_one():
    policy = placement_policy("zone", {"type": "ONE_PER_HOST", "topologyKey": ZONE})
    view = builders.view(*NODES, policy)
    pipeline = default_pipeline(kube_filters=True)
    zones = []
    for i in range(4):
        new = to_pod(web(f"web-{i}"))
        decision = decide(new, view, pipeline, seed=i)
        if decision.chosen is None:
            assert i == 3
            assert decision.error is not None and decision.error.code == 409
            assert (
                "ONE_PER_HOST" in decision.error.message
                and "topology.kubernetes.io/zone" in decision.error.message
            )
            break
        zones.append(view.node(decision.chosen).labels[ZONE])
        view.add_pod(pod_from_k8s(web(f"web-{i}", decision.chosen)))
    assert sorted(zones) == ["a", "b", "c"]


def test_max_n_per_host_per_rack_counts_the_pods_of_every_node_of_the_rack():
    nodes = [zoned("r1-1", "a", "r1"), zoned("r1-2", "a", "r1"), zoned("r2-1", "a", "r2")]
    policy = placement_policy("rack", {"type": "MAX_N_PER_HOST", "max": 2, "topologyKey": RACK})
    one = place(web("new"), *nodes, web("w1", "r1-1"), policy)
    assert feasible(one) == {"r1-1", "r1-2", "r2-1"}  # one pod in r1: below the maximum of 2
    two = place(web("new"), *nodes, web("w1", "r1-1"), web("w2", "r1-2"), policy)
    assert feasible(two) == {"r2-1"}
    message = reasons(two)["r1-1"].message
    assert (
        "rack r1 (example.com/rack) already holds the maximum of 2 pod(s) of app web version 1.0: w1, w2"
        in message
    )


def test_per_domain_counts_only_the_same_namespace_app_and_version():
    policy = placement_policy("zone", {"type": "ONE_PER_HOST", "topologyKey": ZONE})
    others = [
        pod("other-ns", node="a1", namespace="other", labels=app("web")),
        pod("other-version", node="a1", labels=app("web", "2.0")),
        pod("other-app", node="a2", labels=app("db")),
    ]
    assert "a1" in feasible(place(web("new"), *NODES, *others, policy))


def test_one_per_host_per_zone_inside_a_composite_and():
    tree = {
        "type": "COMPOSITE",
        "policies": [{"type": "ONE_PER_HOST", "topologyKey": ZONE}, {"type": "MATCH_TAG", "tag": "ssd"}],
    }
    nodes = [node("a1", labels={ZONE: "a"}, tags=("ssd",)), node("a2", labels={ZONE: "a"}, tags=("ssd",))]
    nodes += [node("b1", labels={ZONE: "b"}), node("b2", labels={ZONE: "b"}, tags=("ssd",))]
    decision = place(web("new"), *nodes, web("web-1", "a1"), placement_policy("p", tree))
    assert decision.chosen == "b2"
    assert "zone a (topology.kubernetes.io/zone) already runs web-1" in reasons(decision)["a2"].message


@pytest.mark.parametrize("key", [None, "kubernetes.io/hostname"])
def test_without_a_topology_key_or_with_the_hostname_the_rule_counts_per_node(key):
    spec: dict[str, Any] = {"type": "ONE_PER_HOST"}
    if key is not None:
        spec["topologyKey"] = key
    decision = place(web("new"), *NODES, web("web-1", "a1"), placement_policy("p", spec))
    assert feasible(decision) == {"a2", "b1", "b2", "c1", "x1"}  # the zone label plays no part
    assert reasons(decision)["a1"].message.endswith("a pod of app web version 1.0 is already on the node")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"type": "ONE_PER_HOST", "topologyKey": "not a key"},
            "spec.policy.topologyKey: 'not a key' is not a valid label key",
        ),
        (
            {"type": "MAX_N_PER_HOST", "max": 2, "topologyKey": ""},
            "spec.policy.topologyKey: must be a node label key",
        ),
        ({"type": "ANY", "topologyKey": ZONE}, "spec.policy.topologyKey: is not a field of ANY"),
        (
            {"type": "COMPOSITE", "policies": [{"type": "ONE_PER_HOST", "topologyKey": "Bad_/x"}]},
            "spec.policy.policies[0].topologyKey: 'Bad_/x' is not a valid label key",
        ),
    ],
)
def test_an_invalid_topology_key_in_a_policy_names_the_field(spec, error):
    errors = load_policy(placement_policy("p", spec)).errors
    assert len(errors) == 1 and errors[0].startswith(error)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("topology.kubernetes.io/zone", True),
        ("rack", True),
        ("example.com/rack_1.a", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("Example.com/rack", False),
        ("/rack", False),
        ("rack-", False),
        ("a/b/c", False),
    ],
)
def test_a_topology_key_is_a_label_key_as_kubernetes_validates_it(key, ok):
    assert (key_problem(key) is None) is ok


# -- tag affinity ---------------------------------------------------------------------------------------
def test_require_with_tag_per_zone_keeps_every_node_of_the_zones_holding_the_tag():
    decision = place(
        with_affinity({"require_with_tag": ["db"], "topologyKey": ZONE}), *NODES, tagged("db-1", "a1", ["db"])
    )
    assert feasible(decision) == {"a1", "a2"}
    found = reasons(decision)
    assert (
        found["b1"].message
        == 'no pod of namespace default in zone b (topology.kubernetes.io/zone) carries "db"'
    )
    assert found["b1"].kind is Kind.UNMET
    assert "has no label topology.kubernetes.io/zone" in found["x1"].message


def test_require_with_tag_per_zone_sees_only_the_pods_own_namespace():
    decision = place(
        with_affinity({"require_with_tag": ["db"], "topologyKey": ZONE}),
        *NODES,
        tagged("db-1", "a1", ["db"], namespace="other"),
    )
    assert decision.chosen is None and decision.error.code == 409


def test_require_without_tag_per_zone_removes_the_zone_and_the_unlabelled_node():
    decision = place(
        with_affinity({"require_without_tag": ["db"], "topologyKey": ZONE}),
        *NODES,
        tagged("db-1", "a1", ["db"]),
    )
    assert feasible(decision) == {"b1", "b2", "c1"}
    found = reasons(decision)
    assert found["a2"].kind is Kind.EXHAUSTED
    assert "in zone a (topology.kubernetes.io/zone) carries an excluded tag" in found["a2"].message
    assert found["a2"].values["domain"] == "a"
    assert found["x1"].kind is Kind.UNMET


def test_prefer_with_tag_per_zone_ranks_the_zone_and_gives_the_unlabelled_node_nothing():
    decision = place(
        with_affinity({"prefer_with_tag": ["db"], "topologyKey": ZONE}), *NODES, tagged("db-1", "b1", ["db"])
    )
    assert decision.chosen in {"b1", "b2"}
    assert "x1" in reasons(decision) and reasons(decision)["x1"].kind is Kind.SET_ASIDE
    without = place(
        with_affinity({"prefer_without_tag": ["db"], "topologyKey": ZONE}),
        *NODES,
        tagged("db-1", "b1", ["db"]),
    )
    assert without.chosen not in {"b1", "b2"}


def test_an_invalid_topology_key_in_the_affinity_annotation_is_a_400_naming_the_field():
    decision = place(with_affinity({"require_with_tag": ["db"], "topologyKey": "no such key!"}), *NODES)
    assert decision.chosen is None and decision.error.code == 400
    assert (
        "annotation berth.dev/affinity: topologyKey: 'no such key!' is not a valid label key"
        in decision.error.message
    )


def test_the_weighted_form_does_not_take_a_topology_key():
    decision = place(with_affinity({"db": 1, "topologyKey": ZONE}), *NODES)
    assert decision.error.code == 400
    assert "topologyKey goes with the constraint form" in decision.error.message


# -- locality -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("which", "strict", "expected"),
    [
        ("near", True, {"a1", "a2"}),
        ("far", True, {"b1", "b2", "c1"}),
        ("near", False, {"a1", "a2"}),
        ("far", False, {"b1", "b2", "c1"}),
    ],
)
def test_locality_per_zone_near_is_the_targets_zone_and_far_another_zone(which, strict, expected):
    locality = {which: "db-1", "strict": strict, "topologyKey": ZONE}
    decision = place(with_locality(locality), *NODES, tagged("db-1", "a1", ["db"]))
    found = reasons(decision)
    ok = {n for n, r in found.items() if r is None or r.step != "alloc/hard-filter-locality-hints"}
    if strict:
        assert ok == expected
        assert "has no label topology.kubernetes.io/zone" in found["x1"].message
    assert decision.chosen in expected
    if which == "far":
        assert "is in the zone (a) of a pod for far db-1" in found["a2"].message


def test_soft_far_per_zone_falls_back_to_the_targets_zone_when_nothing_else_is_left():
    nodes = [zoned("a1", "a"), zoned("a2", "a")]
    decision = place(
        with_locality({"far": "db-1", "topologyKey": ZONE}), *nodes, tagged("db-1", "a1", ["db"])
    )
    assert decision.chosen in {"a1", "a2"}


def test_an_invalid_topology_key_in_the_locality_annotation_is_a_400():
    decision = place(with_locality({"near": "db-1", "topologyKey": 7}), *NODES)
    assert decision.error.code == 400
    assert "berth.dev/locality" in decision.error.message and "topologyKey" in decision.error.message


# -- the view's counts per domain -----------------------------------------------------------------------
CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["land", "leave", "relabel", "add-node", "remove-node"]),
        st.integers(0, 7),
        st.sampled_from(["z1", "z2", None]),
        st.sampled_from([["db"], ["web"], ["db", "web"], []]),
        st.sampled_from(["default", "other"]),
    ),
    max_size=40,
)


def _counted(view: ClusterView, key: str) -> tuple[dict, dict]:
    """The per-domain counts worked out from scratch, from the pods on every node."""
    domains = view.domains(key)
    tags: dict = {}
    apps: dict = {}
    for state in view.states():
        value = domains.of.get(state.node.name)
        if value is None:
            continue
        for p in state.pods.values():
            apps.setdefault(app_key(p), Counter())[value] += 1
            for tag in p.tags:
                tags.setdefault((p.namespace, tag), Counter())[value] += 1
    return tags, apps


@settings(max_examples=150, deadline=None)
@given(CHANGES)
def test_the_counts_per_domain_are_kept_with_every_pod_and_node_change(changes):
    view = ClusterView([node_from_k8s(zoned(f"n{i}", "z1" if i % 2 else "z2")) for i in range(4)])
    view.domain_tag_counts(ZONE, "default", "db")  # asked for once: kept from now on
    placed: list[str] = []
    for i, (what, where, zone, tags, namespace) in enumerate(changes):
        name = f"n{where}"
        if what == "land":
            obj = pod(f"p{i}", node=name, tags=tags, namespace=namespace, labels=app("web"))
            view.add_pod(pod_from_k8s(obj))
            placed.append(f"{namespace}/p{i}")
        elif what == "leave" and placed:
            view.remove_pod(placed.pop(where % len(placed)))
        elif what in ("relabel", "add-node"):
            view.upsert_node(node_from_k8s(zoned(name, zone)))
        elif what == "remove-node":
            view.remove_node(name)
        tags_now, apps_now = _counted(view, ZONE)
        for (ns, tag), counts in tags_now.items():
            assert dict(view.domain_tag_counts(ZONE, ns, tag)) == dict(counts)
        for app_, counts in apps_now.items():
            assert dict(view.domain_app_counts(ZONE, app_)) == dict(counts)
        for ns in ("default", "other"):
            for tag in ("db", "web"):
                if (ns, tag) not in tags_now:
                    assert not view.domain_tag_counts(ZONE, ns, tag)


# -- audit, rebalance, simulate -------------------------------------------------------------------------
def _zone_cluster() -> list[dict[str, Any]]:
    nodes = [cn(n, labels={ZONE: z}) for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))]
    pods = []
    for name, node_name, started in (("web-a", "a1", "01"), ("web-b", "a2", "02")):
        obj = vm(
            name, namespace="shop", node=node_name, labels={"app.kubernetes.io/name": "web"}, uid=f"u-{name}"
        )
        obj["status"]["startTime"] = f"2026-12-{started}T00:00:00Z"
        obj["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web-5d8", "controller": True}]
        pods.append(obj)
    policy = placement_policy(
        "zone",
        {"type": "ONE_PER_HOST", "topologyKey": ZONE},
        namespace="shop",
        selector={"matchLabels": {"app.kubernetes.io/name": "web"}},
    )
    return [*nodes, *pods, policy]


def test_audit_names_the_zone_and_the_pod_in_another_node_of_it_that_the_youngest_collides_with():
    report = audit(builders.view(*_zone_cluster()), build_pipeline(None, kube_filters=False))
    (found,) = report.by_rule()[POLICY]
    assert (found.pod, found.node) == ("shop/web-b", "a2")
    assert found.collides_with == ("shop/web-a",)
    assert "zone a (topology.kubernetes.io/zone) already runs web-a" in found.reason


def test_the_policy_status_counts_one_violating_pod_in_the_zone_that_holds_two():
    view = builders.view(*_zone_cluster())
    counts = policy_counts(view, view.policy("shop", "zone"), compile_pod)
    assert (counts.governed, counts.violating) == (2, 1)


def test_rebalance_moves_the_excess_out_of_the_zone_that_holds_two():
    view = builders.view(*_zone_cluster())
    found = plan(view, build_pipeline(None, kube_filters=False), build_pipeline(None, kube_filters=True))
    assert [(m.pod, m.node) for m in found.moves] == [("shop/web-b", "a2")]
    assert found.moves[0].target in {"b1", "c1"}


def test_simulate_detail_names_the_zone_and_the_pod_already_there(tmp_path, capsys):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(k8s_list(*_zone_cluster()[:5])))  # the nodes and web-a
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(_zone_cluster()[-1]))
    new = tmp_path / "pod.yaml"
    new.write_text(yaml.safe_dump(vm("web-new", namespace="shop", labels={"app.kubernetes.io/name": "web"})))
    code = main(
        [
            "simulate",
            "--cluster",
            str(cluster),
            "--policy",
            str(policy),
            "--pod",
            str(new),
            "--detail",
            "--seed",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "zone a (topology.kubernetes.io/zone) already runs web-a" in out


# -- capacity, preemption, validate ----------------------------------------------------------------------
def test_capacity_under_one_per_host_per_zone_is_one_per_labelled_zone():
    view = builders.view(*NODES, placement_policy("zone", {"type": "ONE_PER_HOST", "topologyKey": ZONE}))
    found = capacity(to_pod(web("more")), view, default_pipeline(kube_filters=True))
    placed = {row.name: row.fits for row in found.nodes if row.fits}
    assert sum(placed.values()) == 3  # zones a, b and c; x1 has no zone
    assert sorted(view.node(n).labels[ZONE] for n in placed) == ["a", "b", "c"]


def _priority(obj: dict[str, Any], priority: int) -> dict[str, Any]:
    obj["spec"]["priority"] = priority
    obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
    return obj


def test_preemption_frees_a_node_whose_own_pod_fills_its_zone_and_no_other():
    policy = placement_policy("zone", {"type": "ONE_PER_HOST", "topologyKey": ZONE})
    urgent = to_pod(_priority(web("urgent"), 100))
    # zone b's only pod of the app is on b1, of lower priority: evicting it frees b1 (and zone b)
    here = builders.view(*NODES, policy, _priority(web("low", "b1"), 1))
    found = select_victims(urgent, here, default_pipeline(kube_filters=True), {"b1": []}, seed=1)
    assert [p.name for p in found["b1"].pods] == ["low"]
    # the pod filling zone b is on b2: nothing on b1 can be evicted to let the pod in (kube-scheduler
    # takes victims on the candidate node only), so b1 is not proposed
    there = builders.view(
        *NODES, policy, _priority(web("low", "b2"), 1), _priority(pod("filler", node="b1"), 1)
    )
    assert select_victims(urgent, there, default_pipeline(kube_filters=True), {"b1": []}, seed=1) == {}


def test_berth_validate_names_an_invalid_topology_key(tmp_path, capsys):
    bad = tmp_path / "pod.yaml"
    bad.write_text(
        yaml.safe_dump(
            with_affinity({"require_with_tag": ["db"], "topologyKey": "zone key"}) | {"apiVersion": "v1"}
        )
    )
    assert main(["validate", str(bad)]) == 2
    out = capsys.readouterr()
    assert "berth.dev/affinity" in out.out + out.err and "topologyKey" in out.out + out.err
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(placement_policy("p", {"type": "ONE_PER_HOST", "topologyKey": "-x"})))
    assert main(["validate", str(policy)]) == 2
    out = capsys.readouterr()
    assert "spec.policy.topologyKey" in out.out + out.err
