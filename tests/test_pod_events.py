"""The events berth writes on the pods it decides about (berth.extender.pod_events): a refusal once per
change of its reason, warnings once per pod, placement events only when asked for."""

from __future__ import annotations

import asyncio

from berth.cluster.per_pod import PodStates
from berth.extender.pod_events import PLACEMENT_EVENTS, REWRITE_AFTER, PodEvents
from tests.builders import node, place, pod, to_pod


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events(wanted=(), clock=None) -> tuple[PodEvents, list[tuple[str, str, str]]]:
    written: list[tuple[str, str, str]] = []

    async def record(p, events) -> None:
        written.extend((p.name, e.reason, e.message) for e in events)

    return PodEvents(record, PodStates(), wanted, clock or _Clock()), written


def test_a_refusal_is_written_once_per_change_of_its_reason_however_often_kube_asks():
    events, written = _events()
    nowhere = pod("p", uid="u", affinity={"require_with_tag": ["nowhere"]})
    decision = place(nowhere, node("n1"))
    assert decision.error is not None and decision.error.code == 409
    p = to_pod(nowhere)
    for attempt in range(3):  # kube-scheduler's attempts, each with its own note on its sample
        asyncio.run(events.refused(p, decision, f"; kube asked about {attempt + 1} nodes"))
    assert [(reason, message) for _, reason, message in written] == [
        ("FailedPlacement", decision.error.message + "; kube asked about 1 nodes")
    ]
    elsewhere = pod("p", uid="u", affinity={"require_with_tag": ["elsewhere"]})
    other = place(elsewhere, node("n1"))
    assert other.error is not None and other.error.message != decision.error.message
    asyncio.run(events.refused(p, other))  # another reason: written
    asyncio.run(events.refused(p, decision))  # and back to the first one: written again
    assert [message for _, _, message in written[1:]] == [other.error.message, decision.error.message]


def test_the_same_refusal_is_written_again_only_once_the_first_event_may_have_expired():
    clock = _Clock()
    events, written = _events(clock=clock)
    nowhere = pod("p", uid="u", affinity={"require_with_tag": ["nowhere"]})
    decision, p = place(nowhere, node("n1")), to_pod(nowhere)
    asyncio.run(events.refused(p, decision))
    clock.now += REWRITE_AFTER - 1
    asyncio.run(events.refused(p, decision))
    assert len(written) == 1
    clock.now += 2  # past the rewrite time: kube-apiserver's event TTL is an hour
    asyncio.run(events.refused(p, decision))
    assert len(written) == 2


def test_an_invalid_specification_is_its_own_reason():
    events, written = _events()
    bad = pod("p", uid="u", annotations={"berth.dev/affinity": "{not json"})
    decision = place(bad, node("n1"))
    assert decision.error is not None and decision.error.code == 400
    asyncio.run(events.refused(to_pod(bad), decision))
    assert [reason for _, reason, _ in written] == ["InvalidPlacementSpec"]


def test_a_decision_s_warnings_are_written_once_per_pod():
    events, written = _events()
    warned = pod("p", uid="u", annotations={"berth.dev/unknwon": "x"})
    decision = place(warned, node("n1"))
    for _ in range(2):
        asyncio.run(events.warn_once(to_pod(warned), decision))
    assert [reason for _, reason, _ in written] == ["UnknownAnnotation"]
    other = pod("q", uid="v", annotations={"berth.dev/unknwon": "x"})
    asyncio.run(events.warn_once(to_pod(other), place(other, node("n1"))))
    assert [name for name, _, _ in written] == ["p", "q"]


def test_placement_events_are_written_only_when_asked_for():
    placed = pod("p", uid="u")
    decision = place(placed, node("n1"))
    quiet, nothing = _events()
    asyncio.run(quiet.placed(to_pod(placed), decision, "n1"))
    assert nothing == []
    loud, written = _events(PLACEMENT_EVENTS)
    asyncio.run(loud.placed(to_pod(placed), decision, "n1"))
    assert "HadNoChoice" in [reason for _, reason, _ in written]
    asked, some = _events(("Placed",))
    two = place(placed, node("n1"), node("n2"))  # a choice: the placement's own event is Placed
    asyncio.run(asked.placed(to_pod(placed), two, two.chosen))
    assert [reason for _, reason, _ in some] == ["Placed"] and some[0][2].endswith(f"seed {two.seed}")
