"""Properties of decisions over random clusters and specifications."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.configure import default_pipeline
from berth.engine import decide
from berth.vocab.tag_affinity import parse_affinity
from tests.builders import node, pod, to_pod, view

TAGS = ["web", "db", "cache", "batch"]
PIPELINE = default_pipeline(kube_filters=True)


@st.composite
def clusters(draw):
    n = draw(st.integers(min_value=1, max_value=6))
    nodes = [node(f"n{i}", ready=draw(st.booleans()) or i == 0) for i in range(n)]
    pods = []
    for j in range(draw(st.integers(min_value=0, max_value=12))):
        tags = draw(st.lists(st.sampled_from(TAGS), max_size=3, unique=True))
        pods.append(
            pod(
                f"p{j}",
                namespace=draw(st.sampled_from(["default", "other"])),
                node=f"n{draw(st.integers(min_value=0, max_value=n - 1))}",
                tags=tags or None,
            )
        )
    return [*nodes, *pods]


tag_lists = st.lists(st.sampled_from(TAGS), max_size=2, unique=True)
constraint_specs = st.fixed_dictionaries(
    {},
    optional={
        "require_with_tag": tag_lists,
        "require_without_tag": tag_lists,
        "prefer_with_tag": tag_lists,
        "prefer_without_tag": tag_lists,
    },
).filter(lambda d: not set(d.get("require_with_tag", [])) & set(d.get("require_without_tag", [])))
weighted_specs = st.dictionaries(
    st.sampled_from(TAGS), st.integers(min_value=-100, max_value=100), min_size=1
)


def _decide(affinity, cluster, seed=0):
    new = pod("new", affinity=affinity if affinity else None)
    return decide(to_pod(new), view(*cluster), PIPELINE, seed=seed)


@settings(max_examples=200, deadline=None)
@given(clusters(), constraint_specs)
def test_hard_filters_never_add_nodes(cluster, spec):
    hard = {k: v for k, v in spec.items() if k.startswith("require_")}
    without = _decide({}, cluster)
    with_constraints = _decide(hard, cluster)
    feasible = {n.name for n in without.nodes if n.feasible}
    assert {n.name for n in with_constraints.nodes if n.feasible} <= feasible
    for trace in with_constraints.steps:
        assert set(trace.remaining) <= {n.name for n in with_constraints.nodes}


@settings(max_examples=200, deadline=None)
@given(clusters(), constraint_specs)
def test_a_preference_never_turns_a_placeable_pod_into_an_unplaceable_one(cluster, spec):
    hard = {k: v for k, v in spec.items() if k.startswith("require_")}
    placed_without_prefs = _decide(hard, cluster).chosen is not None
    placed_with_prefs = _decide(spec, cluster).chosen is not None
    assert placed_without_prefs == placed_with_prefs


@settings(max_examples=200, deadline=None)
@given(clusters(), weighted_specs, st.integers(min_value=0, max_value=2**31 - 1))
def test_a_weighted_spec_and_its_mapped_constraint_form_decide_identically(cluster, weighted, seed):
    mapped = parse_affinity(json.dumps(weighted)).constraint_form()
    a = _decide(weighted, cluster, seed)
    b = _decide(mapped, cluster, seed)
    assert a.chosen == b.chosen
    assert [(n.name, n.feasible, n.candidate, n.score) for n in a.nodes] == [
        (n.name, n.feasible, n.candidate, n.score) for n in b.nodes
    ]
    assert [e for e in a.events if e.reason != "DeprecatedAffinity"] == list(b.events)


@settings(max_examples=100, deadline=None)
@given(clusters(), constraint_specs, st.integers(min_value=0, max_value=2**31 - 1))
def test_decisions_are_deterministic_for_a_seed(cluster, spec, seed):
    first = _decide(spec, cluster, seed)
    again = _decide(spec, cluster, seed)
    assert first == again
