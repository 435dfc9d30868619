"""A pod on a node whose kubelet starts it (status.phase, status.startTime) changes nothing a
decision counts: the view takes the new record and does not count the node as changed."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- any sequence of records of the same pods leaves the view as if made from the last ones ----------

NODES = ("n1", "n2")


def _indexes(v: ClusterView) -> tuple:
    return (
        {ns: dict(pods) for ns, pods in v._by_namespace.items()},
        {ns: {k: dict(by) for k, by in ks.items()} for ns, ks in v._labels.items()},
        dict(v._by_uid),
        {p: (set(u) if isinstance(u, set) else u) for p, u in v._uid_prefix.items()},
        {n: dict(w) for n, w in v._nominated.items()},
        {n: dict(o) for n, o in v._orphans.items() if o},
        {n: (dict(v.state(n).pods), _counts(v, n)) for n in NODES},
    )


RECORDS = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "b"]),
        "uid": st.sampled_from(["1", "2"]),  # a name's pod deleted and made again: another uid
        "app": st.sampled_from(["web", "api"]),
        "where": st.sampled_from(["", "n1", "n2", "gone-node"]),
        "phase": st.sampled_from(["Pending", "Running", "Succeeded"]),
        "nominated": st.sampled_from(["", "n1"]),
        "started": st.sampled_from(["", "2026-12-05T10:00:00Z"]),
    }
)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORDS, min_size=1, max_size=12))
def test_the_indexes_after_any_sequence_of_records_are_those_of_the_last_records(records):
    v = view(node("n1"), node("n2"))
    last: dict[str, dict] = {}
    for r in records:
        uid, labels = f"uid-{r['name']}-{r['uid']}", {"app": r["app"]}
        obj = pod(r["name"], uid=uid, labels=labels, tags=[r["app"]], cpu="100m", node=r["where"] or None)
        obj["status"] = {"phase": r["phase"], "nominatedNodeName": r["nominated"], "startTime": r["started"]}
        v.add_pod(pod_from_k8s(obj))
        last[r["name"]] = obj
    fresh = view(node("n1"), node("n2"), *last.values())
    assert _indexes(v) == _indexes(fresh)
