"""The events berth writes on the pods it decides about, as kube-scheduler writes FailedScheduling.

A refusal (`FailedPlacement`) or an invalid specification (`InvalidPlacementSpec`) is always written,
at most once per REFUSAL_EVENT_EVERY while its words stay the same: kube-scheduler asks again after
every backoff, and the pod's events should say why it waits, not count the attempts. A decision's
other warnings (a deprecated form, a rule that reads nothing) are written once per pod. The events of
a placement (`Placed`, `HadNoChoice`, ...) only when `berth serve --placement-events` asks for them:
the placement record on the pod says the same for every pod without an event each.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

from berth.cluster.model import Pod
from berth.cluster.per_pod import PodStates, pod_key
from berth.engine import Decision, Event

# The events a placed pod can get (`berth serve --placement-events`).
PLACEMENT_EVENTS = ("Placed", "HadNoChoice", "FinalCandidates", "HighestAffinity")
REFUSALS = ("FailedPlacement", "InvalidPlacementSpec")
REFUSAL_EVENT_EVERY = 60.0  # seconds between repeated refusal events for the same pod and text

Recorder = Callable[[Pod, list[Event]], Awaitable[None]]


class PodEvents:
    def __init__(
        self,
        recorder: Recorder,
        states: PodStates,
        placement_events: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.record = recorder
        self.placement_events = frozenset(placement_events)
        self.clock = clock
        self._refusals = states.map("refusal events")  # pod -> (the words written, when)
        self._warned = states.map("warnings written")  # pod -> True

    async def warn_once(self, pod: Pod, decision: Decision) -> None:
        warnings = [e for e in decision.early_events if e.type == "Warning" and e.reason not in REFUSALS]
        key = pod_key(pod)
        if warnings and key not in self._warned:
            self._warned.set(key, True)
            await self.record(pod, warnings)

    async def refused(self, pod: Pod, decision: Decision, note: str = "") -> None:
        assert decision.error is not None
        message = decision.error.message + note
        key = pod_key(pod)
        last = self._refusals.get(key)
        now = self.clock()
        if last and last[0] == message and now - last[1] < REFUSAL_EVENT_EVERY:
            return
        self._refusals.set(key, (message, now))
        reason = "InvalidPlacementSpec" if decision.error.code == 400 else "FailedPlacement"
        await self.record(pod, [Event("Warning", reason, message)])

    async def placed(self, pod: Pod, decision: Decision, node: str) -> None:
        if self.placement_events:
            events = placement_events(decision, node, self.placement_events)
            if events:
                await self.record(pod, events)


def placement_events(decision: Decision, node: str, wanted: frozenset[str]) -> list[Event]:
    """The events of a placed pod that `berth serve --placement-events` asks for."""
    if node != decision.chosen:
        if "Placed" not in wanted:
            return []
        message = f"placed on {node} by the scheduler; berth ranked {decision.chosen} first"
        return [Event("Normal", "Placed", message)]
    out = []
    for event in decision.events:
        if event.reason not in wanted:
            continue
        if event.reason == "Placed":
            event = Event(event.type, event.reason, f"{event.message}; seed {decision.seed}")
        out.append(event)
    return out
