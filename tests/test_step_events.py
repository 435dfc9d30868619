"""The events a step adds to a placed pod (Step.event): asked of the steps that did something for the
pod, never of one that skipped it (docs/engine.md, "Writing a step")."""

from __future__ import annotations

from berth.cluster.view import NodeState
from berth.engine import Pipe, Pipeline, decide
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Event, Reason, StepTrace
from berth.vocab.pod import PodCompiler
from tests.builders import node, pod, to_pod, view

QUIET = "quiet"  # the namespace whose pods the step below skips


class Announcing(NodeFilter[str]):
    """Keeps every node; tells each pod it did not skip where it went, and counts how often it is asked."""

    name = "test/announcing"

    def __init__(self) -> None:
        self.asked = 0

    def prepare(self, ctx: PodContext) -> str | Skipped:
        return skip("a quiet pod") if ctx.pod.namespace == QUIET else ctx.pod.namespace

    def check(self, state: NodeState, prepared: str, ctx: PodContext) -> Reason | None:
        return None

    def event(self, trace: StepTrace, prepared: str, ctx: PodContext) -> Event | None:
        self.asked += 1
        return Event("Normal", "Announced", f"kept {len(trace.remaining)} nodes for {prepared}")


def _events(step: Announcing, namespace: str) -> list[tuple[str, str]]:
    cluster = view(node("n1"), node("n2"))
    pipeline = Pipeline(chain=Pipe((step,)), compile_pod=PodCompiler(None))
    decision = decide(to_pod(pod("p", namespace=namespace)), cluster, pipeline, seed=1)
    assert decision.chosen in {"n1", "n2"}
    return [(e.reason, e.message) for e in decision.events]


def test_a_step_that_did_something_for_the_pod_adds_its_event():
    step = Announcing()
    assert ("Announced", "kept 2 nodes for team-a") in _events(step, "team-a")
    assert step.asked == 1


def test_a_step_that_skipped_the_pod_is_not_asked_for_an_event():
    step = Announcing()
    assert not any(reason == "Announced" for reason, _ in _events(step, QUIET))
    assert step.asked == 0
