"""The placement record (`berth.dev/placement`): what berth writes with a Binding is what `explain` and
`rebalance` read, and the rules never see it."""

from __future__ import annotations

import msgspec

from berth import annotations as ann
from berth.cluster import placement_record
from berth.cluster.convert import pod_from_k8s
from berth.engine.types import Event
from berth.vocab.planned_target import EVENT as PLANNED_TARGET_EVENT
from tests.builders import node, place, pod


def _placed(*objects, **kwargs):
    return place(pod("p", uid="u-1", **kwargs), *objects, seed=placement_record.seed_for(_pod()))


def _pod(record: str = ""):
    obj = pod("p", uid="u-1")
    if record:
        obj["metadata"].setdefault("annotations", {})[ann.PLACEMENT_RECORD] = record
    return pod_from_k8s(obj)


def test_what_is_written_at_bind_is_read_back_by_the_commands():
    decision = _placed(node("small", memory="8Gi"), node("big", memory="64Gi"))
    text = placement_record.write(decision, decision.chosen, "abc123")
    record = placement_record.read(_pod(text))
    assert record["node"] == decision.chosen == "big"
    assert record["seed"] == decision.seed == placement_record.seed_for(_pod())
    assert record["chain"] == "abc123"
    assert record["feasible"] == 2 and record["noChoice"] is False
    assert record["top"] == [[name, score] for name, score in decision.summary.top]
    assert record["top"][0][0] == "big" and record["score"] == record["top"][0][1]
    assert placement_record.planned(_pod(text)) is False


def test_a_pod_bound_elsewhere_than_berth_ranked_first_says_so_and_carries_no_score():
    decision = _placed(node("small", memory="8Gi"), node("big", memory="64Gi"))
    record = msgspec.json.decode(placement_record.write(decision, "small", "abc123"))
    assert record == {
        "node": "small",
        "ranked": "big",
        "noChoice": False,
        "seed": decision.seed,
        "chain": "abc123",
    }


def test_a_placement_on_the_planned_node_is_marked_planned():
    decision = _placed(node("n1"))
    decision.events = (*decision.events, Event("Normal", PLANNED_TARGET_EVENT, "planned"))
    assert placement_record.planned(_pod(placement_record.write(decision, "n1", "d")))


def test_a_record_that_is_not_a_json_object_reads_as_none_and_breaks_nothing():
    for text in ("not json", "[1, 2]", '"a string"', "{"):
        assert placement_record.read(_pod(text)) == {}
        assert placement_record.planned(_pod(text)) is False


def test_the_record_is_taken_out_of_the_pod_s_annotations_and_kept_apart():
    record = '{"node":"n1"}'
    converted = _pod(record)
    assert converted.record == record
    assert ann.PLACEMENT_RECORD not in converted.annotations


def test_a_pod_s_seed_follows_its_uid_and_without_one_its_name():
    a, b = pod_from_k8s(pod("p", uid="u-1")), pod_from_k8s(pod("p", uid="u-2"))
    assert placement_record.seed_for(a) != placement_record.seed_for(b)
    assert placement_record.seed_for(a) == placement_record.seed_for(pod_from_k8s(pod("q", uid="u-1")))
    assert placement_record.seed_for(pod_from_k8s(pod("p"))) == placement_record.seed_for(
        pod_from_k8s(pod("p"))
    )
