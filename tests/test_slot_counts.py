"""The view's counts of placed pods by slot (selected_slots, affinity_slots), which kube's inter-pod
score sums with arrays, are the node-by-node counts (selected_nodes, pods_with_affinity) laid out by
slot, whatever pods were placed, moved or removed and nodes added or removed since they were first
asked for."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.selectors import parse_selector
from berth.cluster.view import SLOT_COUNTS_KEPT, ClusterView
from tests.builders import node, pod

GROUPS = ("a", "b", "c")
NODES = [f"n{i}" for i in range(6)]


def _term(group: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"group": group}}, "topologyKey": "kubernetes.io/hostname"}


def _pod(i: int, group: str, where: str, anti: bool) -> dict[str, Any]:
    affinity = None
    if anti:
        preferred = [{"weight": 10, "podAffinityTerm": _term(group)}]
        affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    spec = {"affinity": affinity} if affinity else None
    return pod(f"p{i}", node=where, labels={"group": group}, spec=spec, uid=f"uid-{i}")


# place a pod, take one off, add a node, remove a node
ACTIONS = st.one_of(
    st.tuples(st.just("place"), st.sampled_from(GROUPS), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 40)),
    st.tuples(st.just("add node"), st.integers(6, 9)),
    st.tuples(st.just("remove node"), st.sampled_from(NODES)),
)


def _expected(view: ClusterView, counts: Any) -> list[int]:
    layout = view.slots()
    out = [0] * len(layout.names)
    for name, count in counts.items():
        out[layout.index[name]] = count
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(ACTIONS, max_size=40))
def test_the_counts_by_slot_are_the_counts_by_node(actions: list[tuple[Any, ...]]) -> None:
    view = ClusterView([node_from_k8s(node(n)) for n in NODES], [])
    selectors = [parse_selector({"matchLabels": {"group": g}}, "selector")[0] for g in GROUPS]
    placed: list[str] = []
    for step, action in enumerate(actions):
        if action[0] == "place":
            _, group, where, anti = action
            obj = _pod(step, group, where, anti)
            view.add_pod(pod_from_k8s(obj))
            placed.append(f"default/p{step}")
        elif action[0] == "remove" and placed:
            view.remove_pod(placed.pop(action[1] % len(placed)))
        elif action[0] == "add node":
            view.upsert_node(node_from_k8s(node(f"n{action[1]}")))
        elif action[0] == "remove node":
            view.remove_node(action[1])
        # asked for after every change: the arrays kept between changes are the ones checked
        for selector in selectors:
            got = view.selected_slots("default", selector)
            counts = view.selected_nodes("default", selector)
            assert (got is None) == (not counts)  # None: no placed pod matches
            if got is not None:
                assert got.tolist() == _expected(view, counts)
        for terms, counts in view.pods_with_affinity().items():
            assert view.affinity_slots(terms).tolist() == _expected(view, counts)


def test_the_arrays_kept_are_bounded_and_right_after_they_are_dropped() -> None:
    # Each array holds a number per node: however many selectors are asked about, at most
    # SLOT_COUNTS_KEPT are kept, and one asked for again after they were dropped is made right.
    view = ClusterView([node_from_k8s(node(n)) for n in NODES], [])
    for i, where in enumerate(NODES):
        view.add_pod(pod_from_k8s(_pod(i, "a", where, anti=False)))
    # 300 selectors, each matching the placed pods (none carries the label n)
    many = [
        parse_selector(
            {
                "matchLabels": {"group": "a"},
                "matchExpressions": [{"key": "n", "operator": "NotIn", "values": [str(k)]}],
            },
            "selector",
        )[0]
        for k in range(300)
    ]
    for selector in many:
        assert view.selected_slots("default", selector) is not None
    assert 0 < len(view._selected_arrays) <= SLOT_COUNTS_KEPT
    group = parse_selector({"matchLabels": {"group": "a"}}, "selector")[0]
    view.add_pod(pod_from_k8s(_pod(99, "a", NODES[0], anti=False)))
    array = view.selected_slots("default", group)
    assert array is not None and array.tolist() == [2, 1, 1, 1, 1, 1]
