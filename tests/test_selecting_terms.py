"""kube's inter-pod score counts the placed pods' terms that select the pod. Which terms those are is
kept per namespace and labels between decisions; whatever pods with new terms were placed or
removed, and whatever namespace labels changed since, the terms counted are those a fresh match over
every placed pod's terms finds."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.engine.draws import Seeded
from berth.engine.step import PodContext
from berth.vocab.kube.interpod import HARD_POD_AFFINITY_WEIGHT, topology_score
from berth.vocab.kube.terms import term_selects
from tests.builders import node, pod

NODES = [f"n{i}" for i in range(4)]
APPS = ("web", "db")
NAMESPACES = ("default", "shop")


def _term(app: str, team: str | None) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "zone"}
    if team is not None:  # the namespaces labelled team=<team>
        term["namespaceSelector"] = {"matchLabels": {"team": team}}
    return term


def _placed(i: int, namespace: str, where: str, app: str, kind: str, team: str | None) -> dict[str, Any]:
    term = _term(app, team)
    if kind == "required":
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    else:
        weighted = [{"weight": 7, "podAffinityTerm": term}]
        side = "podAffinity" if kind == "preferred" else "podAntiAffinity"
        affinity = {side: {"preferredDuringSchedulingIgnoredDuringExecution": weighted}}
    spec = {"affinity": affinity}
    return pod(f"p{i}", namespace=namespace, node=where, labels={"app": "x"}, spec=spec, uid=f"u{i}")


ACTIONS = st.one_of(
    st.tuples(
        st.just("place"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(NODES),
        st.sampled_from(APPS),
        st.sampled_from(("required", "preferred", "anti")),
        st.sampled_from((None, "a", "b")),
    ),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("label"), st.sampled_from(NAMESPACES), st.sampled_from(("a", "b"))),
    st.tuples(st.just("ask"), st.sampled_from(NAMESPACES), st.sampled_from(APPS)),
)


def _fresh(view: ClusterView, probe: Any) -> list[tuple[str, int, list[int]]]:
    """Every placed pod's term that selects the probe, with its weight and pods by slot."""
    out = []
    for terms in view.pods_with_affinity():
        weighted = [(t, HARD_POD_AFFINITY_WEIGHT) for t in terms.required]
        weighted += [(w.term, w.weight) for w in terms.preferred]
        weighted += [(w.term, -w.weight) for w in terms.preferred_anti]
        for term, weight in weighted:
            if term_selects(term, probe, view):
                out.append((term.topology_key, weight, view.affinity_slots(terms).tolist()))
    return out


# A namespace labelled after a pod of it was asked about: the namespaceSelector term selects it now.
LABELLED_AFTER = [
    ("place", "default", "n0", "web", "preferred", "a"),
    ("ask", "shop", "web"),
    ("label", "shop", "a"),
    ("ask", "shop", "web"),
]
# A new set of terms placed after a pod was asked about.
PLACED_AFTER = [
    ("ask", "default", "web"),
    ("place", "default", "n1", "web", "anti", None),
    ("ask", "default", "web"),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(ACTIONS, max_size=30))
@example(LABELLED_AFTER)
@example(PLACED_AFTER)
def test_the_terms_counted_are_those_a_fresh_match_finds(actions: list[tuple[Any, ...]]) -> None:
    nodes = [node(n, labels={"zone": f"z{i % 2}"}) for i, n in enumerate(NODES)]
    view = ClusterView([node_from_k8s(n) for n in nodes], [])
    placed: list[str] = []
    for step, action in enumerate(actions):
        if action[0] == "place":
            _, namespace, where, app, kind, team = action
            view.add_pod(pod_from_k8s(_placed(step, namespace, where, app, kind, team)))
            placed.append(f"{namespace}/p{step}")
        elif action[0] == "remove" and placed:
            view.remove_pod(placed.pop(action[1] % len(placed)))
        elif action[0] == "label":
            _, namespace, team = action
            view.upsert_workload(
                {"kind": "Namespace", "metadata": {"name": namespace, "labels": {"team": team}}}
            )
        elif action[0] == "ask":
            _, namespace, app = action
            probe = pod_from_k8s(pod("probe", namespace=namespace, labels={"app": app}, phase="Pending"))
            ctx = PodContext(pod=probe, spec=None, view=view, randoms=Seeded(0))
            got = [(key, w, a.tolist()) for key, parts in topology_score(ctx).items() for w, a in parts]
            assert got == _fresh(view, probe)
