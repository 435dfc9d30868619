"""The view's counts of placed pods by label selector (what kube's spreading and pod affinity count),
kept up to date as pods come and go: after any sequence of pods placed and removed, and selectors
first asked for at any point (by labels, by expressions alone, several pairs, none that can match),
each count is what counting the namespace's placed pods afresh gives."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster import view as view_module
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.selectors import parse_selector
from berth.cluster.view import ClusterView
from tests.builders import node, pod

NODES = [f"n{i}" for i in range(4)]
SELECTORS = [
    {"matchLabels": {"app": "web"}},
    {"matchLabels": {"app": "web", "tier": "front"}},
    {"matchLabels": {"tier": "front"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    {"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
]
LABELS = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db", "front"]), max_size=2
)
ACTIONS = st.one_of(
    st.tuples(st.just("place"), LABELS, st.sampled_from(NODES), st.sampled_from(["default", "other"])),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("ask"), st.integers(0, len(SELECTORS) - 1)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ACTIONS, max_size=40), st.integers(2, 8))
def test_every_count_kept_is_the_count_made_afresh(actions: list[tuple[Any, ...]], kept: int) -> None:
    original = view_module.SELECTORS_KEPT
    view_module.SELECTORS_KEPT = kept  # fewer kept than asked for: some are dropped and asked again
    try:
        view = ClusterView([node_from_k8s(node(n)) for n in NODES], [])
        placed: list[dict[str, Any]] = []
        asked: list[int] = []
        for step, action in enumerate(actions):
            if action[0] == "place":
                _, labels, where, namespace = action
                obj = pod(f"p{step}", namespace=namespace, node=where, labels=labels or None, uid=f"u{step}")
                view.add_pod(pod_from_k8s(obj))
                placed.append(obj)
            elif action[0] == "remove" and placed:
                gone = placed.pop(action[1] % len(placed))
                view.remove_pod(f"{gone['metadata']['namespace']}/{gone['metadata']['name']}")
            elif action[0] == "ask":
                asked.append(action[1])
                view.selected_nodes("default", _selector(action[1]))
        for i in dict.fromkeys(asked):
            selector = _selector(i)
            expected = Counter(
                o["spec"]["nodeName"]
                for o in placed
                if o["metadata"]["namespace"] == "default"
                and selector.matches(o["metadata"].get("labels") or {})
            )
            assert dict(view.selected_nodes("default", selector)) == dict(expected)
    finally:
        view_module.SELECTORS_KEPT = original


def _selector(i: int) -> Any:
    return parse_selector(SELECTORS[i], "selector")[0]
