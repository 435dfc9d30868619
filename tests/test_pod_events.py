"""The events berth writes on the pods it decides about (berth.extender.pod_events): a refusal once
while its words stay the same, warnings once per pod, placement events only when asked for."""

from __future__ import annotations

import asyncio

from berth.cluster.per_pod import PodStates
from berth.extender.pod_events import PLACEMENT_EVENTS, REFUSAL_EVENT_EVERY, PodEvents
from tests.builders import node, place, pod, to_pod


class _Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _events(wanted=()) -> tuple[PodEvents, list[tuple[str, str, str]], _Clock]:
    written: list[tuple[str, str, str]] = []

    async def record(p, events) -> None:
        written.extend((p.name, e.reason, e.message) for e in events)

    clock = _Clock()
    return PodEvents(record, PodStates(), wanted, clock), written, clock


def test_a_refusal_is_written_once_while_its_words_stay_the_same_and_again_after_a_while():
    events, written, clock = _events()
    refused_pod = pod("p", uid="u", affinity={"require_with_tag": ["nowhere"]})
    decision = place(refused_pod, node("n1"))
    assert decision.error is not None and decision.error.code == 409
    p = to_pod(refused_pod)
    for _ in range(3):
        asyncio.run(events.refused(p, decision))
    assert [reason for _, reason, _ in written] == ["FailedPlacement"]
    asyncio.run(events.refused(p, decision, "; another note"))  # other words: written
    assert len(written) == 2 and written[-1][2].endswith("; another note")
    clock.now += REFUSAL_EVENT_EVERY + 1
    asyncio.run(events.refused(p, decision, "; another note"))
    assert len(written) == 3


def test_an_invalid_specification_is_its_own_reason():
    events, written, _ = _events()
    bad = pod("p", uid="u", annotations={"berth.dev/affinity": "{not json"})
    decision = place(bad, node("n1"))
    assert decision.error is not None and decision.error.code == 400
    asyncio.run(events.refused(to_pod(bad), decision))
    assert [reason for _, reason, _ in written] == ["InvalidPlacementSpec"]


def test_a_decision_s_warnings_are_written_once_per_pod():
    events, written, _ = _events()
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
    quiet, nothing, _ = _events()
    asyncio.run(quiet.placed(to_pod(placed), decision, "n1"))
    assert nothing == []
    loud, written, _ = _events(PLACEMENT_EVENTS)
    asyncio.run(loud.placed(to_pod(placed), decision, "n1"))
    assert "HadNoChoice" in [reason for _, reason, _ in written]
    asked, some, _ = _events(("Placed",))
    two = place(placed, node("n1"), node("n2"))  # a choice: the placement's own event is Placed
    asyncio.run(asked.placed(to_pod(placed), two, two.chosen))
    assert [reason for _, reason, _ in some] == ["Placed"] and some[0][2].endswith(f"seed {two.seed}")
