"""A pod on a node whose kubelet starts it (status.phase, status.startTime) changes nothing a
decision counts: the view takes the new record and does not count the node as changed."""

from __future__ import annotations

import copy

from berth.cluster.convert import pod_from_k8s
from berth.cluster.view import ClusterView
from tests.builders import node, pod, view


def _world() -> tuple[ClusterView, dict]:
    web = pod(
        "web-1", node="n1", uid="uid-web-1", labels={"app": "web"}, tags=["web"], cpu="500m", memory="1Gi"
    )
    web["status"] = {"phase": "Pending"}  # bound, not started yet
    return view(node("n1"), node("n2"), web, pod("db-1", node="n2", uid="uid-db-1", cpu="1")), web


def _counts(v: ClusterView, name: str) -> tuple:
    state = v.state(name)
    assert state is not None
    return (  # (a resource summed back to 0 is left at 0)
        {k: v for k, v in state.requested.items() if v},
        {k: v for k, v in state.limited.items() if v},
        dict(state.apps),
        dict(state.owners),
        {ns: dict(c) for ns, c in state.tags.items()},
        state.nonzero_cpu,
        state.nonzero_memory,
        state.uncapped,
    )


def test_a_pod_started_on_its_node_is_the_new_record_and_the_node_is_not_touched():
    v, web = _world()
    counts = _counts(v, "n1")
    touched = v.touched.version
    generation = v.state("n1").generation
    started = copy.deepcopy(web)
    started["status"] = {"phase": "Running", "startTime": "2026-12-05T10:00:00Z"}
    v.add_pod(pod_from_k8s(started))
    held = v.pod("default/web-1")
    assert held is not None and held.phase == "Running" and held.start_time == "2026-12-05T10:00:00Z"
    assert v.state("n1").pods["default/web-1"] is held
    assert any(p is held for p in v.namespace_pods("default"))
    assert _counts(v, "n1") == counts
    assert v.touched.version == touched  # every answer kept by node still holds
    assert v.state("n1").generation > generation  # a bind checked against it looks again
    # The same as a view made with the started pod from the start.
    fresh = view(node("n1"), node("n2"), started, pod("db-1", node="n2", uid="uid-db-1", cpu="1"))
    assert _counts(fresh, "n1") == counts and fresh.pod("default/web-1") == held


def test_anything_else_that_changes_is_counted_again():
    for change in (
        {"metadata": {"labels": {"app": "api"}}},
        {"status": {"phase": "Succeeded"}},
        {"spec": {"nodeName": "n2"}},
        {"metadata": {"deletionTimestamp": "2026-12-05T11:00:00Z"}},
    ):
        v, web = _world()
        touched = v.touched.version
        changed = copy.deepcopy(web)
        for part, fields in change.items():
            changed[part].update(fields)
        v.add_pod(pod_from_k8s(changed))
        assert v.touched.version > touched, change
        fresh = view(node("n1"), node("n2"), changed, pod("db-1", node="n2", uid="uid-db-1", cpu="1"))
        assert _counts(v, "n1") == _counts(fresh, "n1"), change
        assert _counts(v, "n2") == _counts(fresh, "n2"), change
