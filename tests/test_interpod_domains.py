"""kube's InterPodAffinity score by hostname, as berth's ranking reads it: a node's raw value is the
summed weight x matching pods of its domain (the nodes with its value of the key), 0 for a node
without the label. berth gathers it per node when every labelled node has a value of its own (the
usual hostname), and sums it by domain otherwise; both must give kube's value whatever the labels."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.configure import default_pipeline
from berth.engine import decide
from berth.engine.draws import Seeded
from berth.engine.step import PodContext, Skipped
from berth.vocab.kube.score import KubePreferences, PerNode, _inter_pod, _Nodes
from tests.builders import node, pod, to_pod, view

HOSTNAME = "kubernetes.io/hostname"
PIPELINE = default_pipeline(kube_filters=True)


def _term(group: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"group": group}}, "topologyKey": HOSTNAME}


def _anti(weight: int, group: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": _term(group)}
            ]
        }
    }


def _affine(weight: int, group: str) -> dict[str, Any]:
    return {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": _term(group)}
            ]
        }
    }


# Each node: its hostname label (its own name, another node's, or none) and the pods on it: how many
# of group "a" (which the new pod avoids, weight 60) and of group "b" carrying a preferred affinity
# term toward group "a" (the running pods' symmetric term, weight 30).
NODES = st.lists(
    st.tuples(st.sampled_from(["own", "shared", "none"]), st.integers(0, 2), st.integers(0, 2)),
    min_size=2,
    max_size=8,
)


def _world(layout: list[tuple[str, int, int]]) -> tuple[Any, list[str | None]]:
    objects: list[dict[str, Any]] = []
    values: list[str | None] = []
    for i, (label, a_pods, b_pods) in enumerate(layout):
        name = f"n{i}"
        obj = node(name)
        value = {"own": name, "shared": "shared-host", "none": None}[label]
        if value is None:
            del obj["metadata"]["labels"][HOSTNAME]
        else:
            obj["metadata"]["labels"][HOSTNAME] = value
        values.append(value)
        objects.append(obj)
        objects += [pod(f"a-{i}-{k}", node=name, labels={"group": "a"}) for k in range(a_pods)]
        objects += [
            pod(f"b-{i}-{k}", node=name, labels={"group": "b"}, spec={"affinity": _affine(30, "a")})
            for k in range(b_pods)
        ]
    return view(*objects), values


def _expected(layout: list[tuple[str, int, int]], values: list[str | None]) -> list[int]:
    """kube's raw score of each node: -60 per group "a" pod and +30 per group "b" pod in its domain."""
    by_value: dict[str, int] = {}
    for (_, a_pods, b_pods), value in zip(layout, values, strict=True):
        if value is not None:
            by_value[value] = by_value.get(value, 0) - 60 * a_pods + 30 * b_pods
    return [0 if value is None else by_value[value] for value in values]


@settings(max_examples=150, deadline=None)
@given(NODES)
def test_every_nodes_inter_pod_score_is_its_hostname_domains(layout: list[tuple[str, int, int]]) -> None:
    v, values = _world(layout)
    new = to_pod(pod("new", labels={"group": "a"}, spec={"affinity": _anti(60, "a")}))
    ctx = PodContext(pod=new, spec=PIPELINE.compile_pod(new), view=v, randoms=Seeded(1))
    prepared = KubePreferences().prepare(ctx)
    expected = _expected(layout, values)
    slots = v.slots()
    at = np.array([slots.index[f"n{i}"] for i in range(len(layout))])
    if isinstance(prepared, Skipped):  # no pod of the terms on a labelled node: nothing scored
        assert expected == [0] * len(layout)
        return
    assert _inter_pod(_Nodes.of(v), prepared, at).tolist() == expected
    # one node at a time (the per-node rule) gives the same
    assert [int(_inter_pod(_Nodes.of(v), prepared, at[i : i + 1])[0]) for i in range(len(at))] == expected


def test_a_hostname_per_node_is_read_per_node_and_a_shared_one_by_domain() -> None:
    """Which way the score is read: per node only when every labelled node has its own value."""
    own, _ = _world([("own", 1, 0), ("own", 0, 0), ("none", 0, 0)])
    shared, _ = _world([("shared", 1, 0), ("shared", 0, 0), ("own", 0, 0)])
    new = to_pod(pod("new", labels={"group": "a"}, spec={"affinity": _anti(60, "a")}))
    for v, per_node in ((own, True), (shared, False)):
        ctx = PodContext(pod=new, spec=PIPELINE.compile_pod(new), view=v, randoms=Seeded(1))
        weights = KubePreferences().prepare(ctx).topology[HOSTNAME]
        assert isinstance(weights, PerNode) is per_node


def test_the_new_pod_avoids_every_node_of_a_shared_hostname() -> None:
    """Two nodes under one hostname value are one domain: a pod the new pod avoids on either one keeps
    it off both (kube-scheduler's InterPodAffinity), and a node without the label is not scored down."""
    layout = [("shared", 1, 0), ("shared", 0, 0), ("none", 0, 0)]
    v, _ = _world(layout)
    new = to_pod(pod("new", labels={"group": "a"}, spec={"affinity": _anti(60, "a")}))
    assert {decide(new, v, PIPELINE, seed=seed).chosen for seed in range(12)} == {"n2"}
