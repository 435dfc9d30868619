"""Annotations of one namespace never change decisions for pods of another."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.configure import default_pipeline
from berth.engine import decide
from tests.builders import node, pod, to_pod, view

TAGS = ["web", "db", "batch"]
PIPELINE = default_pipeline(kube_filters=True)

affinities = st.fixed_dictionaries(
    {},
    optional={
        "require_with_tag": st.lists(st.sampled_from(TAGS), max_size=1, unique=True),
        "require_without_tag": st.lists(st.sampled_from(TAGS), max_size=1, unique=True),
        "prefer_with_tag": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "prefer_without_tag": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
    },
).filter(lambda a: not set(a.get("require_with_tag", [])) & set(a.get("require_without_tag", [])))
placements = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.sampled_from(TAGS), max_size=2, unique=True)), max_size=8
)
other_annotations = st.dictionaries(
    st.sampled_from(
        ["berth.dev/tags", "berth.dev/affinity", "berth.dev/placement-policy", "berth.dev/traits"]
    ),
    st.sampled_from(['["web"]', '["batch", "db"]', '{"web": 5}', "nope", "[", '{"ssd": true}']),
    max_size=3,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    affinities,
    placements,
    placements,
    st.lists(other_annotations, min_size=8, max_size=8),
    st.integers(0, 99),
)
def test_annotations_of_another_namespace_never_change_a_decision(affinity, mine, theirs, rewritten, seed):
    nodes = [node(f"n{i}") for i in range(4)]
    own = [pod(f"m{i}", namespace="mine", node=f"n{n}", tags=t or None) for i, (n, t) in enumerate(mine)]
    before = [
        pod(f"t{i}", namespace="theirs", node=f"n{n}", tags=t or None) for i, (n, t) in enumerate(theirs)
    ]
    # The same pods of the other namespace on the same nodes, their berth annotations rewritten.
    after = [
        pod(f"t{i}", namespace="theirs", node=f"n{n}", annotations=rewritten[i])
        for i, (n, _t) in enumerate(theirs)
    ]
    new = to_pod(
        pod("new", namespace="mine", tags=["web"], affinity=json.dumps(affinity) if affinity else None)
    )
    first = decide(new, view(*nodes, *own, *before), PIPELINE, seed=seed)
    second = decide(new, view(*nodes, *own, *after), PIPELINE, seed=seed)
    assert first.chosen == second.chosen
    assert [(n.name, n.feasible, n.candidate, n.score) for n in first.nodes] == [
        (n.name, n.feasible, n.candidate, n.score) for n in second.nodes
    ]
