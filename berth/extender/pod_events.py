"""The events berth writes on the pods it decides about, as kube-scheduler writes FailedScheduling.

A refusal (`FailedPlacement`) or an invalid specification (`InvalidPlacementSpec`) is written once per
change of its reason: kube-scheduler asks again after every backoff and at every flush of its queue, and
the pod's events should say why it waits, not count the attempts (kube-scheduler's own FailedScheduling
counts them). The reason is the decision's message; the notes added to it (the nodes kube did not ask
about, the pods that block only under berth's rules) change with kube's sample, and ride along. The same
reason is written again only once the first event may have expired (the API server keeps events an
hour by default, --event-ttl), so that a pod waiting for hours still says why. A decision's
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
# seconds a refusal's note on the nodes kube-scheduler did not ask about is kept before it is worked out
# again (berth.extender.sample): a decision over the nodes left out
NOTE_EVERY = 60.0
REWRITE_AFTER = 3000.0  # seconds: under kube-apiserver's default --event-ttl of an hour

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
        self._refusals = states.map("refusal events")  # pod -> (the reason last written, when)
        self._warned = states.map("warnings written")  # pod -> True

    async def warn_once(self, pod: Pod, decision: Decision) -> None:
        warnings = [e for e in decision.early_events if e.type == "Warning" and e.reason not in REFUSALS]
        key = pod_key(pod)
        if warnings and key not in self._warned:
            self._warned.set(key, True)
            await self.record(pod, warnings)

    async def refused(self, pod: Pod, decision: Decision, note: str = "") -> None:
        assert decision.error is not None
        why = decision.error.message
        key = pod_key(pod)
        last, now = self._refusals.get(key), self.clock()
        if last is not None and last[0] == why and now - last[1] < REWRITE_AFTER:
            return
        self._refusals.set(key, (why, now))
        reason = "InvalidPlacementSpec" if decision.error.code == 400 else "FailedPlacement"
        await self.record(pod, [Event("Warning", reason, why + note)])

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
