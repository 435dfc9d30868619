"""kube's default spreading of a workload's replicas, read from the view's counts by slot: the zone
counts summed by label value and each node's own count must be what reading every node that holds a
replica gives (the rule as spread.domain_counts states it node by node), whatever the nodes' labels
and the pod's node selection."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.configure import default_pipeline
from berth.engine import decide
from berth.engine.chain import plain_path
from berth.engine.draws import Seeded
from berth.engine.step import PodContext
from berth.vocab.kube.score import KubeDefaultScore, _Nodes, _spread
from berth.vocab.kube.spread import domain_counts, matching_nodes, own_soft, system_soft
from tests.builders import node, pod, to_pod, view

ZONE = "topology.kubernetes.io/zone"
PIPELINE = default_pipeline(kube_filters=True)
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"selector": {"app": "web"}},
}

# Each node: its zone label (a value, the empty value, or none), its "disk" label, and how many of
# the workload's replicas (and of another app's pods, which do not count) run there.
NODES = st.lists(
    st.tuples(
        st.sampled_from(["z1", "z2", "", None]),
        st.booleans(),
        st.integers(0, 3),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=9,
)


def _world(layout: list[tuple[str | None, bool, int, int]], *, disk_with_zone: bool = False) -> Any:
    """The nodes and pods of `layout`, and a Service over the workload; `disk_with_zone`: only the
    nodes with a zone value have the "disk" label."""
    objects: list[dict[str, Any]] = []
    for i, (zone, ssd, replicas, others) in enumerate(layout):
        name = f"n{i}"
        labels = {} if disk_with_zone and not zone else {"disk": "ssd" if ssd else "hdd"}
        if zone is not None:
            labels[ZONE] = zone
        objects.append(node(name, labels=labels))
        objects += [
            pod(f"web-{i}-{k}", namespace="shop", node=name, labels={"app": "web"}) for k in range(replicas)
        ]
        objects += [
            pod(f"db-{i}-{k}", namespace="shop", node=name, labels={"app": "db"}) for k in range(others)
        ]
    v = view(*objects)
    v.upsert_workload(SERVICE)
    return v


@settings(max_examples=150, deadline=None)
@given(NODES, st.booleans())
def test_the_default_spreading_counts_are_those_of_every_node_read_one_by_one(
    layout: list[tuple[str | None, bool, int, int]], selective: bool
) -> None:
    v = _world(layout)
    spec = {"nodeSelector": {"disk": "ssd"}} if selective else None
    new = to_pod(pod("web-new", namespace="shop", labels={"app": "web"}, spec=spec))
    ctx = PodContext(pod=new, spec=PIPELINE.compile_pod(new), view=v, randoms=Seeded(1))
    soft = system_soft(ctx)
    assert soft is not None  # the Service selects the pod: kube's system defaults apply
    nodes = _Nodes.of(v)
    assert domain_counts(soft, ctx, nodes.by_domain) == domain_counts(soft, ctx)
    # each node's own count (the hostname constraint), gathered by slot
    prepared = KubeDefaultScore().prepare(ctx)
    slots = v.slots()
    at = np.array([slots.index[f"n{i}"] for i in range(len(layout))])
    _, raws = _spread(nodes, prepared, ctx, at)
    hostname = next(
        counts for (has, _, counts), c in zip(raws, soft.constraints, strict=True) if c.topology_key != ZONE
    )
    own = matching_nodes(soft.constraints[0].selector, ctx)
    assert hostname.tolist() == [own.get(f"n{i}", 0) for i in range(len(layout))]


def _constraint(key: str) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }


@settings(max_examples=150, deadline=None)
@given(NODES, st.booleans())
def test_the_pods_own_spreading_counts_only_nodes_with_every_key(
    layout: list[tuple[str | None, bool, int, int]], selective: bool
) -> None:
    """The pod's own ScheduleAnyway constraints (over the zone and the "disk" label, which the
    nodes whose zone label is missing or empty lack): a node counts only with both labels."""
    v = _world(layout, disk_with_zone=True)
    spec: dict[str, Any] = {"topologySpreadConstraints": [_constraint(ZONE), _constraint("disk")]}
    if selective:
        spec["nodeSelector"] = {"disk": "ssd"}
    new = to_pod(pod("web-new", namespace="shop", labels={"app": "web"}, spec=spec))
    ctx = PodContext(pod=new, spec=PIPELINE.compile_pod(new), view=v, randoms=Seeded(1))
    soft = own_soft(new)
    assert soft is not None and soft.require_all
    assert domain_counts(soft, ctx, _Nodes.of(v).by_domain) == domain_counts(soft, ctx)


def test_replicas_go_to_the_zone_with_fewest_of_them() -> None:
    """Three replicas in z1, none in z2: kube's default spreading sends the next to z2, also when
    most nodes of z1 hold none."""
    layout = [("z1", False, 3, 0), ("z1", False, 0, 0), ("z1", False, 0, 0), ("z2", False, 0, 0)]
    v = _world(layout)
    new = to_pod(pod("web-new", namespace="shop", labels={"app": "web"}))
    assert {decide(new, v, PIPELINE, seed=seed).chosen for seed in range(8)} == {"n3"}


@settings(max_examples=60, deadline=None)
@given(NODES, st.booleans())
def test_the_ranking_is_that_of_the_rules_read_node_by_node(
    layout: list[tuple[str | None, bool, int, int]], own: bool
) -> None:
    """The whole decision (kube's default score with its spreading, the allocator's steps) on the
    steps' set-level answers equals the one made on their per-node rules alone."""
    v = _world(layout)
    spec = {"topologySpreadConstraints": [_constraint(ZONE)]} if own else None
    new = to_pod(pod("web-new", namespace="shop", labels={"app": "web"}, spec=spec))
    fast = decide(new, v, PIPELINE, seed=5)
    with plain_path():
        plain = decide(new, v, PIPELINE, seed=5)
    # every node's result: its reasons and each step's part of its score
    assert fast.to_dict(detail=True) == plain.to_dict(detail=True)
