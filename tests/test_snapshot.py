"""Cluster snapshots as kubectl writes them, and the per-node counters built from them."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.snapshot import load_snapshot
from berth.cluster.view import ClusterView
from berth.errors import SnapshotError
from tests.builders import k8s_list, node, pod


def test_a_kubectl_list_places_pods_on_their_nodes_and_drops_terminal_ones(tmp_path):
    objects = [
        node("n1"),
        pod("a", node="n1", tags=["web"], cpu="1"),
        pod("b", node="n1", tags=["web"], phase="Succeeded"),
        pod("c", node="n1", tags=["web"], phase="Failed"),
        pod("pending"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(k8s_list(*objects)))
    view = load_snapshot(path).view
    state = view.state("n1")
    assert list(state.pods) == ["default/a"]
    assert state.tag_count("default", "web") == 1
    assert state.requested["cpu"] == 1000
    assert view.pod("default/pending") is not None


def test_several_yaml_documents_and_json_are_read_alike(tmp_path):
    objects = [node("n1"), pod("a", node="n1", tags=["x"])]
    multi = tmp_path / "multi.yaml"
    multi.write_text(yaml.safe_dump_all(objects))
    as_json = tmp_path / "cluster.json"
    as_json.write_text(json.dumps(k8s_list(k8s_list(*objects))))
    for path in (multi, as_json):
        view = load_snapshot(path).view
        assert view.node_names() == ["n1"]
        assert view.state("n1").tag_count("default", "x") == 1


def test_placement_policies_are_kept_for_the_policy_vocabulary(tmp_path):
    policy = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "p"},
        "spec": {},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(k8s_list(node("n1"), policy)))
    assert load_snapshot(path).policies == [policy]


def test_a_pod_on_a_node_missing_from_the_snapshot_is_attached_when_the_node_appears():
    view = ClusterView()
    view.add_pod(pod_from_k8s(pod("a", node="late", tags=["t"])))
    view.upsert_node(node_from_k8s(node("late")))
    assert view.state("late").tag_count("default", "t") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("a: [", "not valid YAML", id="broken YAML"),
        pytest.param("- 1\n- 2\n", "expected Kubernetes objects", id="a list of numbers"),
        pytest.param(
            yaml.safe_dump(
                {
                    "kind": "Pod",
                    "metadata": {"name": "p", "annotations": {"berth.dev/tags": ["a"]}},
                    "spec": {},
                }
            ),
            "annotation berth.dev/tags: value must be a string",
            id="an annotation that is not a string",
        ),
        pytest.param(
            yaml.safe_dump(node("n1", cpu="lots")),
            "resource cpu: not a quantity",
            id="a node with a bad quantity",
        ),
    ],
)
def test_an_unusable_snapshot_is_an_error_naming_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(SnapshotError, match=message) as info:
        load_snapshot(path)
    assert str(path) in info.value.message


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(tmp_path / "nope.yaml")


def _rebuilt(view: ClusterView) -> dict[str, tuple]:
    fresh = ClusterView(nodes=[s.node for s in view.states()], pods=list(view.pods()))
    return _counters(fresh)


def _counters(view: ClusterView) -> dict[str, tuple]:
    out = {}
    for s in view.states():
        tags = {ns: dict(c) for ns, c in s.tags.items()}
        out[s.node.name] = (sorted(s.pods), tags, dict(s.apps), dict(s.owners), dict(+s.requested))
    return out


operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "move"]),
        st.sampled_from(["p0", "p1", "p2", "p3"]),
        st.sampled_from(["n0", "n1", ""]),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
        st.sampled_from(["ns1", "ns2"]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_incremental_counters_always_equal_a_fresh_rebuild(ops):
    view = ClusterView(nodes=[node_from_k8s(node("n0")), node_from_k8s(node("n1"))])
    for op, name, where, tags, ns in ops:
        if op == "remove":
            view.remove_pod(f"{ns}/{name}")
        else:
            view.add_pod(
                pod_from_k8s(pod(name, namespace=ns, node=where or None, tags=tags or None, cpu="100m"))
            )
    assert _counters(view) == _rebuilt(view)
    for state in view.states():
        expected = Counter(t for p in state.pods.values() if p.namespace == "ns1" for t in p.tags)
        assert dict(state.tags.get("ns1", {})) == dict(expected)
