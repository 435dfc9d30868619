"""A pod converted again from the API server reuses what its spec gave before (SpecMemo) only while
its spec, labels and namespace are those converted then: the record is the one a fresh conversion
gives, whatever changed between two events about the pod."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import berth.cluster.convert as convert
from berth.cluster.convert import SpecMemo, pod_from_k8s
from berth.errors import SnapshotError
from tests.builders import pod


def _base() -> dict[str, Any]:
    """A pod whose record reads its labels through its spec: pod affinity and spread with
    matchLabelKeys, a toleration, requests, a priority."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["version"],
        "topologyKey": "kubernetes.io/hostname",
    }
    spread = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["version"],
    }
    spec = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term}]
            }
        },
        "topologySpreadConstraints": [spread],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
        "priority": 10,
    }
    return pod(
        "web-1", uid="uid-web-1", labels={"app": "web", "version": "v1"}, cpu="250m", memory="64Mi", spec=spec
    )


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


CHANGES = [
    # what a watch event or a scheduling attempt brings: none of it is in what the memo keeps
    (("spec", "nodeName"), "node-7"),
    (("status", "phase"), "Running"),
    (("status", "startTime"), "2026-12-05T01:00:00Z"),
    (("status", "nominatedNodeName"), "node-3"),
    (("metadata", "annotations"), {"berth.dev/tags": '["web"]'}),
    (("metadata", "deletionTimestamp"), "2026-12-05T02:00:00Z"),
    # what is: each must be converted anew
    (("metadata", "labels"), {"app": "web", "version": "v2"}),
    (("metadata", "labels"), {"app": "api"}),
    (("metadata", "namespace"), "other"),
    (("spec", "priority"), 20),
    (("spec", "schedulerName"), "berth-scheduler"),
    (("spec", "tolerations"), []),
    (("spec", "nodeSelector"), {"disk": "ssd"}),
    (("spec", "containers"), [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]),
    (("spec", "topologySpreadConstraints"), []),
    (("spec", "preemptionPolicy"), "Never"),
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(range(len(CHANGES))), min_size=1, max_size=8))
def test_a_pod_converted_with_the_memo_is_the_pod_a_fresh_conversion_gives(steps):
    obj = _base()
    memo = SpecMemo()
    kept, convert.SPEC_MEMO = convert.SPEC_MEMO, memo
    try:
        assert pod_from_k8s(copy.deepcopy(obj), memo=True) == pod_from_k8s(copy.deepcopy(obj))
        for step in steps:
            path, value = CHANGES[step]
            _set(obj, path, copy.deepcopy(value))
            assert pod_from_k8s(copy.deepcopy(obj), memo=True) == pod_from_k8s(copy.deepcopy(obj))
    finally:
        convert.SPEC_MEMO = kept


def test_the_memo_serves_the_events_that_leave_the_spec_alone_and_only_those():
    memo = SpecMemo()
    obj = _base()
    fields = {"requests": {"cpu": 250}}
    memo.put("u", "default", obj["metadata"]["labels"], obj["spec"], fields)
    bound = copy.deepcopy(obj)
    bound["spec"]["nodeName"] = "node-7"
    assert memo.get("u", "default", bound["metadata"]["labels"], bound["spec"]) is fields
    assert memo.get("u", "other", obj["metadata"]["labels"], obj["spec"]) is None
    assert memo.get("u", "default", {"app": "web"}, obj["spec"]) is None
    assert memo.get("v", "default", obj["metadata"]["labels"], obj["spec"]) is None
    grown = copy.deepcopy(obj)
    grown["spec"]["hostNetwork"] = True
    assert memo.get("u", "default", grown["metadata"]["labels"], grown["spec"]) is None
    shrunk = copy.deepcopy(obj)
    del shrunk["spec"]["priority"]
    assert memo.get("u", "default", shrunk["metadata"]["labels"], shrunk["spec"]) is None


def test_a_spec_made_malformed_after_a_good_conversion_is_still_refused_with_its_field():
    obj = _base()
    pod_from_k8s(copy.deepcopy(obj), memo=True)
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(SnapshotError, match="cpu"):
        pod_from_k8s(obj, memo=True)


def test_the_memo_keeps_two_generations_of_pods():
    memo = SpecMemo(size=2)
    spec: dict[str, Any] = {"containers": []}
    for uid in ("a", "b", "c"):
        memo.put(uid, "ns", None, spec, {"uid": uid})
    assert memo.get("a", "ns", None, spec) == {"uid": "a"}  # the older generation
    memo.put("d", "ns", None, spec, {})
    memo.put("e", "ns", None, spec, {})
    assert memo.get("a", "ns", None, spec) is None  # two generations on


# -- the version memo: a filter call's pod recognised by its uid and resourceVersion ---------------


def _from_call(raw: bytes, *, record: bool = True):
    """The pod of a filter call's JSON as the extender reads it."""
    return convert.watched_pod(raw, record=record) or convert.decoded_pod(raw, record=record)


@pytest.fixture()
def versions(monkeypatch):
    memo = convert.VersionMemo()
    monkeypatch.setattr(convert, "VERSION_MEMO", memo)
    monkeypatch.setattr(convert, "SPEC_MEMO", SpecMemo())
    return memo


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(CHANGES))), st.booleans()), min_size=1, max_size=8))
def test_a_filter_calls_pod_is_the_pod_a_fresh_conversion_of_its_json_gives(steps):
    """The watch converts each stored version of a pod (every change a new resourceVersion); a call
    that sends one of them, the latest or one the watch has not shown yet, gets the record a fresh
    conversion of the very JSON it sent gives."""
    memo = convert.VersionMemo()
    kept = convert.VERSION_MEMO, convert.SPEC_MEMO
    convert.VERSION_MEMO, convert.SPEC_MEMO = memo, SpecMemo()
    try:
        obj = _base()
        obj["metadata"]["resourceVersion"] = "1"
        pod_from_k8s(copy.deepcopy(obj), record=False, memo=True)  # the watch
        for version, (step, watched) in enumerate(steps, start=2):
            path, value = CHANGES[step]
            _set(obj, path, copy.deepcopy(value))
            obj["metadata"]["resourceVersion"] = str(version)
            if watched:
                pod_from_k8s(copy.deepcopy(obj), record=False, memo=True)
            assert _from_call(orjson.dumps(obj)) == pod_from_k8s(copy.deepcopy(obj))
    finally:
        convert.VERSION_MEMO, convert.SPEC_MEMO = kept


def test_the_version_the_watch_converted_is_taken_without_reading_the_rest(versions):
    obj = _base()
    obj["metadata"]["resourceVersion"] = "41"
    watched = pod_from_k8s(copy.deepcopy(obj), record=False, memo=True)
    assert _from_call(orjson.dumps(obj)) is watched
    # A version the watch has not shown: converted from the call's own JSON.
    obj["metadata"]["resourceVersion"] = "42"
    obj["metadata"]["labels"] = {"app": "api"}
    assert _from_call(orjson.dumps(obj)).labels == {"app": "api"}


def test_a_pod_on_a_node_is_not_kept(versions):
    obj = _base()
    obj["metadata"]["resourceVersion"] = "7"
    obj["spec"]["nodeName"] = "node-1"
    pod_from_k8s(copy.deepcopy(obj), record=False, memo=True)
    assert versions.get("uid-web-1", "7") is None


def test_the_placement_record_is_given_when_asked_for_though_the_watch_leaves_it_out(versions):
    obj = _base()
    obj["metadata"]["resourceVersion"] = "3"
    obj["metadata"]["annotations"] = {"berth.dev/placement": '{"node":"node-2"}'}
    watched = pod_from_k8s(copy.deepcopy(obj), record=False, memo=True)
    assert watched.record == ""
    assert _from_call(orjson.dumps(obj)).record == '{"node":"node-2"}'
    assert _from_call(orjson.dumps(obj), record=False) is watched


def test_a_malformed_pod_is_refused_with_its_field_from_its_json(versions):
    obj = _base()
    obj["metadata"]["resourceVersion"] = "5"
    obj["metadata"]["uid"] = 5
    with pytest.raises(SnapshotError, match=r"metadata\.uid"):
        _from_call(orjson.dumps(obj))


# -- a workload's resource shape, added up once (convert._resource_fields) ---------------------------

QUANTITIES = st.sampled_from(["100m", "1", "2", "16Mi", "1Gi"])
RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu"]), QUANTITIES, max_size=2)
CONTAINER = st.fixed_dictionaries(
    {"name": st.just("c")},
    optional={
        "resources": st.fixed_dictionaries({}, optional={"requests": RESOURCES, "limits": RESOURCES}),
        "restartPolicy": st.just("Always"),
    },
)
SPEC = st.fixed_dictionaries(
    {"containers": st.lists(CONTAINER, min_size=1, max_size=2)},
    optional={
        "initContainers": st.lists(CONTAINER, max_size=2),
        "overhead": RESOURCES,
        "resources": st.fixed_dictionaries({"requests": RESOURCES}),
    },
)


def _fields(record: Any) -> tuple:
    return (record.requests, record.limits, record.nonzero_cpu, record.nonzero_memory)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(range(4)), min_size=2, max_size=10), st.lists(SPEC, min_size=4, max_size=4))
def test_a_pod_whose_resource_shape_was_seen_gets_the_sums_of_its_own_spec(order, specs):
    """Pods converted one after another, the shapes drawn from a few that share parts (a container,
    an init container with or without restartPolicy, an overhead): each pod's requests, limits and
    non-zero requests are those its own spec adds up to."""
    for i, which in enumerate(order):
        spec = copy.deepcopy(specs[which])
        got = pod_from_k8s({"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": spec})
        requests, limits = convert.pod_requests(spec, "reference")
        assert _fields(got) == (requests, limits, *convert.nonzero_requests(spec, "reference"))


def test_a_malformed_quantity_after_a_good_one_of_the_same_shape_is_refused_with_its_pod():
    good = pod("good", cpu="2")
    assert pod_from_k8s(good).requests["cpu"] == 2000
    bad = pod("bad", cpu="two")
    with pytest.raises(SnapshotError) as refused:
        pod_from_k8s(bad)
    assert "default/bad" in str(refused.value) and "cpu" in str(refused.value)
    again = pod("bad-again", cpu="two")  # a failure is never kept: the next pod names itself
    with pytest.raises(SnapshotError, match="bad-again"):
        pod_from_k8s(again)


def test_a_quantity_that_is_not_a_string_is_never_taken_for_another():
    """JSON numbers and booleans are not what the API server writes, and 1 == True in Python: a
    boolean after a number of the same shape is still refused."""

    def with_cpu(name: str, value: Any) -> dict[str, Any]:
        body = pod(name)
        body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": value}}
        return body

    assert pod_from_k8s(with_cpu("number", 1)).requests["cpu"] == 1000
    with pytest.raises(SnapshotError, match="cpu"):
        pod_from_k8s(with_cpu("boolean", True))


def test_a_pod_listed_on_its_node_is_not_kept_but_one_waiting_for_a_node_is(monkeypatch):
    # A list of a running cluster would otherwise keep the decoded specs of thousands of pods alive.
    memo = SpecMemo()
    monkeypatch.setattr(convert, "SPEC_MEMO", memo)
    running = pod("running", uid="u-running", node="n1")
    pod_from_k8s(running, memo=True)
    assert memo.get("u-running", "default", running["metadata"].get("labels"), running["spec"]) is None
    waiting = pod("waiting", uid="u-waiting", phase="Pending")
    pod_from_k8s(waiting, memo=True)
    assert memo.get("u-waiting", "default", waiting["metadata"].get("labels"), waiting["spec"]) is not None


def test_the_pods_of_a_workload_share_one_copy_of_their_tolerations_and_owner():
    def replica(i: int) -> dict[str, Any]:
        obj = pod(f"web-{i}", uid=f"u-{i}", node="n1")
        obj["spec"]["tolerations"] = [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ]
        owner = {"kind": "ReplicaSet", "name": "web-5d8f", "controller": True, "uid": "rs"}
        obj["metadata"]["ownerReferences"] = [owner]
        return obj

    a, b = pod_from_k8s(replica(1)), pod_from_k8s(replica(2))
    assert a.tolerations == b.tolerations and a.tolerations is b.tolerations
    assert a.controller == b.controller == ("ReplicaSet", "web-5d8f") and a.controller is b.controller
    other = replica(3)
    other["spec"]["tolerations"][0]["effect"] = "NoSchedule"
    assert pod_from_k8s(other).tolerations[0].effect == "NoSchedule"
