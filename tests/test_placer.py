"""The extender's HTTP verbs with kube-scheduler's exact wire shapes, served from a snapshot."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from fastapi.testclient import TestClient

import berth.cluster.convert as convert
from berth.cluster.convert import pod_from_k8s
from berth.cluster.kubeapi import ApiError
from berth.cluster.placement_record import seed_for
from berth.configure import default_pipeline
from berth.extender.app import build_extender
from berth.extender.placer import Writes
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, view


@pytest.fixture
def serve():
    def _serve(*objects, placement_events=()):
        events: list[tuple[str, str, str]] = []
        bound: list[tuple[str, str]] = []
        records: list[dict] = []

        async def binder(p, n, annotations):
            bound.append((p.key, n))
            records.append(json.loads(annotations["berth.dev/placement"]))

        async def recorder(p, evs):
            events.extend((p.key, e.reason, e.message) for e in evs)

        cluster = SnapshotCluster(view(*objects))
        app = build_extender(
            cluster,
            rules=default_pipeline(kube_filters=False),
            with_kube=default_pipeline(kube_filters=True),
            writes=Writes(bind=binder, record=recorder),
            placement_events=placement_events,
        )
        client = TestClient(app)
        client.events, client.bound, client.cluster, client.records = events, bound, cluster, records
        return client

    return _serve


def _args(pod_obj, names):
    return {"Pod": pod_obj, "Nodes": None, "NodeNames": names}


def _schedule(client, pod_obj, names):
    """What kube-scheduler does for one pod: filter, prioritize when more than one node is left,
    pick the highest score, bind."""
    result = client.post("/filter", json=_args(pod_obj, names)).json()
    left = result["NodeNames"]
    if not left:
        return None, result
    if len(left) == 1:
        chosen = left[0]
    else:
        scores = client.post("/prioritize", json=_args(pod_obj, left)).json()
        chosen = max(scores, key=lambda h: h["Score"])["Host"]
    meta = pod_obj["metadata"]
    bind = client.post(
        "/bind",
        json={
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": chosen,
        },
    )
    assert bind.json() == {"Error": ""}
    return chosen, result


def _tagged_cluster(serve):
    return serve(
        node("free"),
        node("busy"),
        node("lonely"),
        pod("batch", node="busy", tags=["batch"]),
        pod("db", node="free", tags=["db"]),
        pod("db2", node="busy", tags=["db"]),
    )


NEEDS_DB = {"require_with_tag": ["db"], "require_without_tag": ["batch"]}


def test_filter_answers_with_the_one_node_berth_chose_and_no_failure_map(serve):
    client = _tagged_cluster(serve)
    new = pod("p", affinity=NEEDS_DB, uid="u1")
    response = client.post("/filter", json=_args(new, ["free", "busy", "lonely"]))
    assert response.status_code == 200
    assert response.json() == {
        "Nodes": None,
        "NodeNames": ["free"],
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }


def test_when_nothing_fits_filter_splits_the_reasons_by_whether_preemption_can_help(serve):
    client = _tagged_cluster(serve)
    new = pod("p", affinity=NEEDS_DB, uid="u1")
    response = client.post("/filter", json=_args(new, ["busy", "lonely"]))
    ns, batch, db = "namespace default on the node", '["batch"]', '["db"]'
    assert response.json() == {
        "Nodes": None,
        "NodeNames": [],
        "FailedNodes": {
            "busy": f"tags/require_without_tag: a pod of {ns} carries an excluded tag of {batch}"
        },
        "FailedAndUnresolvableNodes": {
            "lonely": f"tags/require_with_tag: pods of {ns} do not carry every required tag {db}"
        },
        "Error": "",
    }


def test_full_node_objects_are_accepted_when_the_scheduler_is_not_node_cache_capable(serve):
    client = serve(node("n1"), node("n2"))
    body = {
        "Pod": pod("p", uid="u"),
        "Nodes": {"metadata": {}, "items": [node("n1"), node("n2")]},
        "NodeNames": None,
    }
    names = client.post("/filter", json=body).json()["NodeNames"]
    assert len(names) == 1 and names[0] in ("n1", "n2")


def test_a_preference_decides_at_filter(serve):
    client = serve(node("n1"), node("n2"), pod("c", node="n2", tags=["cache"]))
    result = client.post(
        "/filter", json=_args(pod("p", affinity={"prefer_with_tag": ["cache"]}, uid="u"), ["n1", "n2"])
    )
    assert result.json()["NodeNames"] == ["n2"]
    assert result.json()["FailedNodes"] is None


def test_prioritize_gives_the_maximum_to_the_node_berth_chose(serve):
    client = serve(node("n1"), node("n2"), node("n3"))
    scores = client.post("/prioritize", json=_args(pod("p", uid="u"), ["n1", "n2", "n3"])).json()
    assert sorted(h["Host"] for h in scores) == ["n1", "n2", "n3"]
    assert sorted(h["Score"] for h in scores)[-1] == 10
    assert all(0 <= h["Score"] <= 10 for h in scores)
    assert len([h for h in scores if h["Score"] == 10]) == 1


def test_a_burst_sees_every_earlier_placement_before_its_binding_is_watched(serve):
    # Anti-affinity by tag: four pods that each refuse a node holding one of them, on three nodes.
    client = serve(node("n1"), node("n2"), node("n3"))
    names = ["n1", "n2", "n3"]
    placed = []
    for i in range(3):
        new = pod(f"w{i}", tags=["web"], affinity={"require_without_tag": ["web"]}, uid=f"uid-{i}")
        chosen, _ = _schedule(client, new, names)
        placed.append(chosen)
    assert sorted(placed) == names
    fourth = pod("w3", tags=["web"], affinity={"require_without_tag": ["web"]}, uid="uid-3")
    chosen, result = _schedule(client, fourth, names)
    assert chosen is None
    assert set(result["FailedNodes"]) == set(names)
    refusals = [e for e in client.events if e[1] == "FailedPlacement"]
    assert refusals and 'require_without_tag=["web"]' in refusals[0][2]


def test_an_invalid_specification_fails_every_node_as_unresolvable_naming_the_annotation(serve):
    client = serve(node("n1"), node("n2"))
    result = client.post("/filter", json=_args(pod("p", affinity="{bad", uid="u"), ["n1", "n2"])).json()
    assert result["NodeNames"] == []
    assert set(result["FailedAndUnresolvableNodes"]) == {"n1", "n2"}
    assert "annotation berth.dev/affinity" in result["FailedAndUnresolvableNodes"]["n1"]
    assert [e[1] for e in client.events] == ["InvalidPlacementSpec"]


def test_a_deprecated_weighted_affinity_gets_one_warning_event(serve):
    client = serve(node("n1"), node("n2"))
    new = pod("p", affinity={"web": -5}, uid="u")
    for _ in range(3):
        client.post("/filter", json=_args(new, ["n1", "n2"]))
    warnings = [e for e in client.events if e[1] == "DeprecatedAffinity"]
    assert len(warnings) == 1
    assert '{"prefer_without_tag": ["web"]}' in warnings[0][2]


def test_bind_puts_the_placement_record_on_the_binding_and_writes_no_event_by_default(serve):
    # Two nodes alike: kube-scheduler's default scores tie, and the allocator's scorers break the tie.
    client = serve(node("small", memory="8Gi"), node("big", memory="64Gi"), node("big2", memory="64Gi"))
    chosen, _ = _schedule(client, pod("p", uid="u"), ["small", "big", "big2"])
    assert chosen in ("big", "big2")
    assert client.bound == [("default/p", chosen)]
    (record,) = client.records
    placer = client.app.state.placer
    assert record["node"] == chosen
    assert sorted(name for name, _ in record["top"]) == ["big", "big2"]
    assert record["score"] == record["top"][0][1]
    assert record["margin"] == round(record["top"][0][1] - record["top"][1][1], 6) > 0
    assert record["feasible"] == 3 and record["noChoice"] is False
    assert record["seed"] == seed_for(pod_from_k8s(pod("p", uid="u")))
    assert record["chain"] == placer.rules.digest and len(record["chain"]) == 12
    assert [e for e in client.events if e[1] in ("Placed", "HadNoChoice", "FinalCandidates")] == []


def test_a_preference_with_one_finalist_records_no_margin(serve):
    client = serve(node("n1"), node("n2"), node("n3"), pod("c", node="n2", tags=["cache"]))
    chosen, _ = _schedule(
        client, pod("p", affinity={"prefer_with_tag": ["cache"]}, uid="u"), ["n1", "n2", "n3"]
    )
    assert chosen == "n2"
    (record,) = client.records
    ((top, score),) = record["top"]
    assert top == "n2" and score > 1 and "margin" not in record and record["feasible"] == 3
    # why top holds one node of the three feasible: the tag-affinity tier set the other two aside
    assert record["setAside"] == {"tags/tag-affinity": 2}


def test_the_placement_events_asked_for_are_written_at_bind(serve):
    client = serve(
        node("n1"),
        node("n2"),
        pod("c", node="n2", tags=["cache"]),
        placement_events=("Placed", "HighestAffinity", "HadNoChoice"),
    )
    chosen, _ = _schedule(client, pod("p", affinity={"prefer_with_tag": ["cache"]}, uid="u"), ["n1", "n2"])
    assert chosen == "n2"
    placed = [e for e in client.events if e[1] in ("Placed", "HighestAffinity", "FinalCandidates")]
    assert [e[1] for e in placed] == ["HighestAffinity", "Placed"]
    assert placed[1][2].startswith("placed on n2 with score ") and "seed" in placed[1][2]
    assert "+1 on n2" in placed[0][2]


def test_bind_records_had_no_choice_when_one_node_passed_the_hard_filters(serve):
    client = serve(
        node("n1"),
        node("n2"),
        pod("b", node="n1", tags=["batch"]),
        placement_events=("Placed", "HadNoChoice"),
    )
    new = pod("p", affinity={"require_without_tag": ["batch"], "prefer_with_tag": ["x"]}, uid="u")
    chosen, _ = _schedule(client, new, ["n1", "n2"])
    assert chosen == "n2"
    placed = [e for e in client.events if e[1] in ("Placed", "HadNoChoice")]
    assert [e[1] for e in placed] == ["HadNoChoice"]
    assert "without consulting preferences" in placed[0][2]
    assert client.records[0]["noChoice"] is True and client.records[0]["feasible"] == 1


def _binds(client) -> dict[str, float]:
    """berth_binds_total by outcome, as /metrics shows it."""
    prefix = 'berth_binds_total{outcome="'
    lines = [x for x in client.get("/metrics").text.splitlines() if x.startswith(prefix)]
    return {x[len(prefix) :].split('"')[0]: float(x.rsplit(" ", 1)[1]) for x in lines}


def _bind(client, name, uid, node_name):
    body = {"PodName": name, "PodNamespace": "default", "PodUID": uid, "Node": node_name}
    return client.post("/bind", json=body).json()


def test_bind_confirms_without_deciding_again_when_nothing_the_decision_read_has_changed(serve):
    client = serve(node("n1"), node("n2"))
    new = pod("p", tags=["web"], affinity={"require_without_tag": ["web"]}, uid="u")
    (chosen,) = client.post("/filter", json=_args(new, ["n1", "n2"])).json()["NodeNames"]
    other = "n1" if chosen == "n2" else "n2"
    # A pod placed on the other node meanwhile does not concern this decision.
    client.cluster.view.add_pod(pod_from_k8s(pod("x", node=other, tags=["web"], uid="ux")))
    assert _bind(client, "p", "u", chosen) == {"Error": ""}
    assert _binds(client) == {"confirmed": 1, "rechecked": 0, "refused": 0, "failed": 0}


def test_bind_decides_again_and_refuses_when_the_chosen_node_changed_since_filter(serve):
    client = serve(node("n1"), node("n2"))
    new = pod("p", tags=["web"], affinity={"require_without_tag": ["web"]}, uid="u")
    (chosen,) = client.post("/filter", json=_args(new, ["n1", "n2"])).json()["NodeNames"]
    # Another pod of the group lands on the chosen node between filter and bind (a scheduler restart,
    # a second scheduler): the node no longer fits and is never bound.
    client.cluster.view.add_pod(pod_from_k8s(pod("x", node=chosen, tags=["web"], uid="ux")))
    error = _bind(client, "p", "u", chosen)["Error"]
    assert error.startswith(f"berth: {chosen} no longer fits default/p: ")
    assert "require_without_tag" in error
    assert client.bound == []
    assert _binds(client) == {"confirmed": 0, "rechecked": 0, "refused": 1, "failed": 0}


def test_bind_decides_again_when_a_pod_lands_on_another_node_of_the_chosen_nodes_zone(serve):
    zone = "topology.kubernetes.io/zone"
    client = serve(node("a1", labels={zone: "a"}), node("a2", labels={zone: "a"}))
    new = pod("p", tags=["web"], affinity={"require_without_tag": ["web"], "topologyKey": zone}, uid="u")
    (chosen,) = client.post("/filter", json=_args(new, ["a1", "a2"])).json()["NodeNames"]
    other = "a1" if chosen == "a2" else "a2"
    # Per zone, a pod on the other node of the zone concerns the decision: it is checked again.
    client.cluster.view.add_pod(pod_from_k8s(pod("x", node=other, tags=["web"], uid="ux")))
    error = _bind(client, "p", "u", chosen)["Error"]
    assert error.startswith(f"berth: {chosen} no longer fits default/p: ")
    assert "zone a (topology.kubernetes.io/zone)" in error
    assert client.bound == []


def test_bind_decides_again_when_a_policy_changed_since_filter(serve):
    client = serve(node("n1"), node("n2"))
    labels = {"app.kubernetes.io/name": "web"}
    new = pod("p", labels=labels, uid="u")
    (chosen,) = client.post("/filter", json=_args(new, ["n1", "n2"])).json()["NodeNames"]
    client.cluster.view.upsert_policy(
        {
            "metadata": {"name": "pin", "namespace": "default", "generation": 1},
            "spec": {
                "selector": {"matchLabels": labels},
                "policy": {"type": "RULE_BASED", "rule": 'ctx.allocation.node.hostname == "nowhere"'},
            },
        }
    )
    assert "no longer fits" in _bind(client, "p", "u", chosen)["Error"]
    assert _binds(client)["refused"] == 1 and _binds(client)["confirmed"] == 0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param("/filter", b"{not json", id="filter with a body that is not JSON"),
        pytest.param("/filter", b'{"Nodes": null}', id="filter without a Pod"),
        pytest.param("/filter", b'{"Pod": 5, "NodeNames": ["n1"]}', id="filter with a number for the Pod"),
        pytest.param("/filter", b'{"Pod": [{}], "NodeNames": ["n1"]}', id="filter with a list for the Pod"),
        pytest.param("/prioritize", b"[]", id="prioritize with a list"),
        pytest.param("/bind", b'{"PodName": 3}', id="bind with a number for a name"),
    ],
)
def test_a_malformed_body_is_a_400_not_a_crash(serve, path, body):
    client = serve(node("n1"))
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "error" in response.json()
    if b'"Pod": ' in body:
        assert "Expected `object`" in response.json()["error"] and "$.Pod" in response.json()["error"]


def test_simulate_answers_200_409_or_400_with_the_decision(serve):
    client = serve(node("n1"), node("n2", ready=False))
    ok = client.post("/simulate", json={"pod": pod("p"), "seed": 3})
    assert ok.status_code == 200 and ok.json()["chosen"] == "n1" and ok.json()["seed"] == 3
    assert ok.json()["nodes"][1]["reasons"] == ["kube/node-ready: node is not Ready"]
    no_fit = client.post("/simulate", json={"pod": pod("p", affinity={"require_with_tag": ["x"]})})
    assert no_fit.status_code == 409 and no_fit.json()["error"]["code"] == 409
    invalid = client.post("/simulate", json={"pod": pod("p", tags=["", 1])})
    assert invalid.status_code == 400 and "berth.dev/tags" in invalid.json()["error"]["message"]
    assert client.post("/simulate", json={"nopod": 1}).status_code == 400


def test_health_readiness_and_metrics(serve):
    client = serve(node("n1"))
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    client.post("/filter", json=_args(pod("p", uid="u"), ["n1"]))
    text = client.get("/metrics").text
    assert 'berth_extender_request_seconds_count{verb="filter"} 1.0' in text
    assert 'berth_decisions_total{outcome="placed"} 1.0' in text
    assert "berth_cache_nodes 1.0" in text


def test_a_pod_the_watch_converted_at_the_same_version_is_not_decoded_again(serve, monkeypatch):
    monkeypatch.setattr(convert, "VERSION_MEMO", convert.VersionMemo())
    client = serve(node("n1"), node("n2"), pod("db", node="n1", tags=["db"]))
    web = pod("web", uid="u-web", annotations={"berth.dev/affinity": '{"require_without_tag": ["db"]}'})
    web["metadata"]["resourceVersion"] = "12"
    pod_from_k8s(copy.deepcopy(web), record=False, memo=True)  # what berth serve's watch does
    assert client.post("/filter", json=_args(web, ["n1", "n2"])).json()["NodeNames"] == ["n2"]
    changed = copy.deepcopy(web)  # a version the watch has not shown: read from the call
    changed["metadata"]["resourceVersion"] = "13"
    changed["metadata"]["annotations"] = {}
    assert client.post("/filter", json=_args(changed, ["n1", "n2"])).json()["NodeNames"] in (["n1"], ["n2"])
    text = client.get("/metrics").text
    assert 'berth_filter_pods_total{read="watched"} 1.0' in text
    assert 'berth_filter_pods_total{read="decoded"} 1.0' in text


def test_bind_refuses_a_node_that_no_longer_fits_and_a_pod_it_has_never_seen(serve):
    client = serve(node("n1"), node("n2"))
    rule = {"require_without_tag": ["web"]}
    first = pod("a", tags=["web"], affinity=rule, uid="ua")
    chosen, _ = _schedule(client, first, ["n1", "n2"])
    # A second pod the scheduler tries to bind beside the first (a race, or a restart in between).
    second = pod("b", tags=["web"], affinity=rule, uid="ub")
    client.post("/filter", json=_args(second, [chosen]))
    bind = {"PodName": "b", "PodNamespace": "default", "PodUID": "ub", "Node": chosen}
    error = client.post("/bind", json=bind).json()["Error"]
    assert error.startswith(f"berth: {chosen} no longer fits default/b")
    assert "require_without_tag" in error
    assert ("default/b", chosen) not in client.bound
    unknown = {"PodName": "ghost", "PodNamespace": "default", "PodUID": "ug", "Node": "n1"}
    assert "not in berth's cluster view" in client.post("/bind", json=unknown).json()["Error"]
    # The second pod's bind (decided again for a node it no longer fits) and the unknown pod's: refused.
    assert _binds(client) == {"confirmed": 1, "rechecked": 0, "refused": 2, "failed": 0}


def test_a_bind_with_no_decision_of_its_own_is_decided_again_for_its_node_and_counted_so(serve):
    # A pod berth's view holds but never filtered (an extender restart between filter and bind).
    client = serve(node("n1"), node("n2"), pod("p", uid="u"))
    assert _bind(client, "p", "u", "n2") == {"Error": ""}
    assert client.bound == [("default/p", "n2")]
    assert _binds(client) == {"confirmed": 0, "rechecked": 1, "refused": 0, "failed": 0}


def test_while_the_cache_is_not_synced_filter_and_bind_fail_closed_and_readyz_says_so(serve):
    client = serve(node("n1"))
    client.cluster.ready = lambda: False
    result = client.post("/filter", json=_args(pod("p", uid="u"), ["n1"])).json()
    assert result["Error"].startswith("berth: the cluster cache is not synced yet")
    assert result["NodeNames"] is None  # the scheduler takes the Error as a failed attempt
    bind = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    assert "not synced" in client.post("/bind", json=bind).json()["Error"]
    assert client.get("/readyz").status_code == 503
    assert client.bound == []


def test_a_failed_binding_is_an_error_and_frees_the_node_only_when_the_api_surely_refused_it(serve):
    client = serve(node("n1"), node("n2"))

    async def broken_binder(pod_, node_, annotations):
        raise RuntimeError("connection reset")

    placer = client.app.state.placer
    placer.writes = dataclasses.replace(placer.writes, bind=broken_binder)
    chosen_pod = pod("p", uid="u")
    client.post("/filter", json=_args(chosen_pod, ["n1", "n2"]))
    client.post("/prioritize", json=_args(chosen_pod, ["n1", "n2"]))  # berth reserves its choice
    assert client.cluster.view.pod("default/p").node_name != ""
    response = client.post(
        "/bind", json={"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    )
    assert response.status_code == 200
    assert response.json()["Error"] == "berth: binding default/p to n1 failed: RuntimeError: connection reset"
    # The outcome is unknown (the binding may have been stored): the pod keeps counting on its node.
    assert client.cluster.view.pod("default/p").node_name != ""

    async def refusing_binder(pod_, node_, annotations):
        raise ApiError("POST binding: 404 pods not found", status=404)

    placer.writes = dataclasses.replace(placer.writes, bind=refusing_binder)
    response = client.post(
        "/bind", json={"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    )
    assert "404 pods not found" in response.json()["Error"]
    assert client.cluster.view.pod("default/p").node_name == ""  # refused for sure: released
    assert _binds(client) == {"confirmed": 0, "rechecked": 0, "refused": 0, "failed": 2}


def test_a_pod_filtered_again_moves_its_reservation_and_is_never_counted_twice(serve):
    # A scheduler restarted between filter and bind filters the pod again.
    client = serve(node("n1"), node("n2"), node("n3"))
    new = pod("p", tags=["web"], uid="u")
    (first,) = client.post("/filter", json=_args(new, ["n1", "n2", "n3"])).json()["NodeNames"]
    others = [n for n in ("n1", "n2", "n3") if n != first]
    (second,) = client.post("/filter", json=_args(new, others)).json()["NodeNames"]
    view = client.cluster.view
    assert [view.state(n).tag_count("default", "web") for n in ("n1", "n2", "n3")].count(1) == 1
    assert view.state(second).tag_count("default", "web") == 1
    assert _bind(client, "p", "u", second) == {"Error": ""}
    assert client.bound == [("default/p", second)]


def test_a_filter_whose_pod_never_reaches_bind_holds_its_node_only_until_released(serve):
    # The scheduler gave up on the pod after filter (it failed in a later plugin): the reservation
    # holds until the bind check or the API server says otherwise (tests/test_live_reservations.py).
    client = serve(node("n1"))
    new = pod("p", tags=["web"], affinity={"require_without_tag": ["web"]}, uid="u")
    assert client.post("/filter", json=_args(new, ["n1"])).json()["NodeNames"] == ["n1"]
    other = pod("q", tags=["web"], affinity={"require_without_tag": ["web"]}, uid="uq")
    assert client.post("/filter", json=_args(other, ["n1"])).json()["NodeNames"] == []
    client.cluster.release(pod_from_k8s(new))
    assert client.post("/filter", json=_args(other, ["n1"])).json()["NodeNames"] == ["n1"]


def test_a_refusal_over_kube_schedulers_sample_names_a_node_outside_it_that_fits(serve):
    # With percentageOfNodesToScore below 100 kube-scheduler asks only about its sample: the one node
    # with the pod's require_with_tag neighbour (n4) is outside it. The refusal says so.
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    client = serve(
        node("n1"),
        node("n2"),
        node("n3", taints=taint),
        node("n4"),
        pod("db-0", node="n4", tags=["db"]),
        pod("db-1", node="n3", tags=["db"]),
    )
    web = pod("web-0", affinity={"require_with_tag": ["db"]}, uid="uid-web")
    result = client.post("/filter", json=_args(web, ["n1", "n2"])).json()
    assert result["NodeNames"] == []
    ((_, _, message),) = [e for e in client.events if e[1] == "FailedPlacement"]
    assert (
        "kube-scheduler asked about 2 of the cluster's 4 nodes, and n4, which it did not ask about" in message
    )
    assert "percentageOfNodesToScore" in message


def test_no_sample_note_when_the_nodes_left_out_are_refused_too(serve):
    # kube's own filter left out the tainted n3, the only other node with the neighbour: nothing
    # outside the nodes asked about fits, so the refusal does not blame a sample.
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    client = serve(node("n1"), node("n2"), node("n3", taints=taint), pod("db-1", node="n3", tags=["db"]))
    web = pod("web-0", affinity={"require_with_tag": ["db"]}, uid="uid-web")
    assert client.post("/filter", json=_args(web, ["n1", "n2"])).json()["NodeNames"] == []
    ((_, _, message),) = [e for e in client.events if e[1] == "FailedPlacement"]
    assert "did not ask about" not in message
    # every node of the cluster asked about: no note either
    client = serve(node("n1"), node("n2"))
    assert client.post("/filter", json=_args(web, ["n1", "n2"])).json()["NodeNames"] == []
    ((_, _, message),) = [e for e in client.events if e[1] == "FailedPlacement"]
    assert "did not ask about" not in message and "require_with_tag" in message
