"""The engine's memo of set-level answers (docs/engine.md, "Writing a step", 5): a step that declares
what its answer depends on (`Step.memo_key`) is asked once for the same candidates, question and state;
asked again when the state it declared moves (or mended from the answer before, when it can); never
memoised when it declares nothing. The rules themselves are compared with the memoised answers by the
property in tests/test_fast_paths.py; this is the contract a custom step's author relies on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth.cluster.convert import node_from_k8s
from berth.cluster.view import NodeState
from berth.engine import Pipe, Pipeline, decide
from berth.engine.step import Kept, MemoKey, NodeFilter, PodContext, Removals
from berth.engine.types import Kind, Reason
from berth.vocab.pod import PodCompiler
from tests.builders import node, pod, to_pod, view

BANNED = "banned"  # a node label the step below refuses


class Counting(NodeFilter[str]):
    """Refuses the nodes labelled `banned=<the pod's namespace>`; counts how often it is asked."""

    name = "test/counting"

    def __init__(self, declare: bool, mends: bool = False) -> None:
        self.declare = declare
        self.mends = mends
        self.asked = 0
        self.mended = 0
        self.epoch = 0  # what the step's answer is declared to depend on, besides the pod's namespace

    def prepare(self, ctx: PodContext) -> str:
        return ctx.pod.namespace

    def check(self, state: NodeState, prepared: str, ctx: PodContext) -> Reason | None:
        if state.node.labels.get(BANNED) == prepared:
            return Reason(self.name, Kind.UNMET, f"banned for {prepared}")
        return None

    def memo_key(self, prepared: str, ctx: PodContext) -> MemoKey | None:
        return (prepared, (self.epoch,)) if self.declare else None

    def removals(
        self, cands: Mapping[str, NodeState], prepared: str, ctx: PodContext
    ) -> Mapping[str, Reason]:
        self.asked += 1
        return Removals(super().removals(cands, prepared, ctx))

    def mend(self, before: Kept, cands: Mapping[str, NodeState], prepared: str, ctx: PodContext) -> Any:
        if not self.mends:
            return None
        self.mended += 1
        return Removals(super().removals(cands, prepared, ctx))


def _cluster() -> Any:
    return view(
        node("n1", labels={BANNED: "team-a"}),
        node("n2"),
        node("n3", labels={BANNED: "team-b"}),
    )


def _pipeline(step: Counting) -> Pipeline:
    return Pipeline(chain=Pipe((step,)), compile_pod=PodCompiler(None))


def _feasible(step: Counting, cluster: Any, namespace: str, name: str) -> list[str]:
    decision = decide(to_pod(pod(name, namespace=namespace)), cluster, _pipeline(step))
    return sorted(decision.candidate_names())


def test_a_declared_step_is_asked_once_for_the_same_candidates_and_state():
    step, cluster = Counting(declare=True), _cluster()
    answers = [_feasible(step, cluster, "team-a", f"p{i}") for i in range(3)]
    assert answers == [["n2", "n3"]] * 3
    assert step.asked == 1


def test_another_question_is_asked_again_and_answered_for_itself():
    step, cluster = Counting(declare=True), _cluster()
    assert _feasible(step, cluster, "team-a", "p1") == ["n2", "n3"]
    assert _feasible(step, cluster, "team-b", "p2") == ["n1", "n2"]
    assert _feasible(step, cluster, "team-a", "p3") == ["n2", "n3"]
    assert step.asked == 2


def test_a_moved_state_is_asked_again():
    step, cluster = Counting(declare=True), _cluster()
    assert _feasible(step, cluster, "team-a", "p1") == ["n2", "n3"]
    step.epoch += 1
    assert _feasible(step, cluster, "team-a", "p2") == ["n2", "n3"]
    assert step.asked == 2


def test_other_candidates_are_asked_again():
    # A node record changed: the decision's candidates are a new set, with nothing kept.
    step, cluster = Counting(declare=True), _cluster()
    assert _feasible(step, cluster, "team-a", "p1") == ["n2", "n3"]
    cluster.upsert_node(node_from_k8s(node("n2", labels={BANNED: "team-a"})))
    assert _feasible(step, cluster, "team-a", "p2") == ["n3"]
    assert step.asked == 2


def test_a_step_that_can_mend_is_handed_the_answer_before():
    step, cluster = Counting(declare=True, mends=True), _cluster()
    _feasible(step, cluster, "team-a", "p1")
    step.epoch += 1
    assert _feasible(step, cluster, "team-a", "p2") == ["n2", "n3"]
    assert _feasible(step, cluster, "team-a", "p3") == ["n2", "n3"]  # the mended answer is kept
    assert (step.asked, step.mended) == (1, 1)


def test_an_undeclared_step_is_asked_every_time():
    step, cluster = Counting(declare=False), _cluster()
    for i in range(3):
        assert _feasible(step, cluster, "team-a", f"p{i}") == ["n2", "n3"]
    assert step.asked == 3


def test_two_chains_with_a_step_of_the_same_name_do_not_share_answers():
    # Configured apart (two pipelines), two steps of one name are two memos: the second is asked.
    first, second, cluster = Counting(declare=True), Counting(declare=True), _cluster()
    _feasible(first, cluster, "team-a", "p1")
    _feasible(second, cluster, "team-a", "p2")
    assert (first.asked, second.asked) == (1, 1)
