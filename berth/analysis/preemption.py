"""Preemption that respects berth's rules: what the extender's preempt verb answers kube-scheduler.

kube-scheduler's preemption proposes candidate nodes, each with the lower-priority pods its own filters
need gone (its dry run). For each, berth finds the fewest victims the way kube's SelectVictimsOnNode
does, with berth's rules added to kube's filters (as berth models them, the chain `berth simulate`
runs): every lower-priority pod taken off, then each put back, the most important first, those whose
eviction would break a PodDisruptionBudget before the others, and kept off only if the pod no longer
fits with it back. kube's own victims are candidates like any other: one that berth's victim makes room
for is reprieved, so where berth's rules do not block, berth's victims are kube's. A node where taking
every lower-priority pod off is not enough is dropped: no pod is evicted for a node berth will refuse
anyway. The pods nominated to the node with the preemptor's priority or higher count as placed there.

A pod of equal or higher priority is never a victim. Victims are listed the most important first (the
order kube reads the highest-priority victim from), and their PodDisruptionBudget violations are
counted as kube counts them. The view is changed only for the time of each decision and put back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from berth.cluster.model import Pod
from berth.cluster.view import ClusterView
from berth.engine import Decision, Pipeline, decide
from berth.engine.types import Event


@dataclass(frozen=True)
class Victims:
    pods: tuple[Pod, ...]
    pdb_violations: int
    # Per pod: why it must go, the reason the node refuses the preemptor with it back (as pods).
    why: tuple[str, ...] = ()

    def reason_of(self, pod: Pod) -> str:
        return next((w for p, w in zip(self.pods, self.why, strict=False) if p.key == pod.key), "")

    def order(self) -> tuple[int, int, int, int]:
        """kube's pickOneNodeForPreemption, lowest first: PodDisruptionBudget violations, the highest
        victim priority, the sum of the priorities, the number of victims."""
        priorities = [p.priority for p in self.pods]
        return (self.pdb_violations, max(priorities, default=-(2**31)), sum(priorities), len(priorities))


def important_first(pods: Iterable[Pod]) -> list[Pod]:
    """kube's MoreImportantPod order: higher priority first, then the one that started earlier."""
    return sorted(pods, key=lambda p: (-p.priority, p.start_time or "~", p.key))


@contextlib.contextmanager
def overlay(view: ClusterView, *, remove: Sequence[Pod] = (), place: Sequence[Pod] = ()) -> Iterator[None]:
    """The view with `remove` taken off their nodes and `place` put on theirs (copies with node_name
    set), for as long as the block runs; then as it was. None of it is news of the cluster: a planned
    rebalance target is neither noted nor used up (ClusterView.put_back)."""
    held = [view.pod(p.key) for p in place]
    try:
        for pod in remove:
            view.remove_pod(pod.key)
        for pod in place:
            view.put_back(pod)
        yield
    finally:
        for pod in place:
            view.remove_pod(pod.key)
        for pod in held:
            if pod is not None:
                view.put_back(pod)
        for pod in remove:
            view.put_back(pod)


def nominated_here(view: ClusterView, pod: Pod, nodes: Iterable[str]) -> list[Pod]:
    """The pods nominated to these nodes whose priority is equal to the pod's or higher, as placed
    there: the room a preemption freed for them is theirs (kube's addNominatedPods)."""
    out = []
    for node in nodes:
        for waiting in view.nominated(node).values():
            if waiting.key != pod.key and waiting.priority >= pod.priority:
                out.append(msgspec.structs.replace(waiting, node_name=node, phase="Running"))
    return out


def pdb_violating(pods: Sequence[Pod], view: ClusterView) -> set[str]:
    """The keys of the pods whose eviction, in this order, breaks a PodDisruptionBudget, as kube's
    filterPodsWithPDBViolation counts (each budget's disruptionsAllowed spent pod after pod)."""
    allowed: dict[tuple[str, str], int] = {}
    out = set()
    for pod in pods:
        for name, (selector, disruptions) in view.budgets(pod.namespace).items():
            if selector.empty or not selector.matches(pod.labels):
                continue
            key = (pod.namespace, name)
            allowed[key] = allowed.get(key, disruptions) - 1
            if allowed[key] < 0:
                out.add(pod.key)
    return out


def select_victims(
    pod: Pod, view: ClusterView, pipeline: Pipeline, proposed: Mapping[str, Sequence[str]], *, seed: int
) -> dict[str, Victims]:
    """Node -> the fewest victims that make the node fit the preemptor under `pipeline`; nodes where no
    eviction is enough are left out. `proposed` is kube's candidates (node -> the uids of its victims):
    the nodes to look at. `pipeline` is the chain that decides whether the pod fits: with kube's
    filters (the offline chain) for kube's candidates, berth's rules alone to ask what only they need."""
    out: dict[str, Victims] = {}

    def refusal(node: str) -> str | None:
        decision = decide(pod, view, pipeline, candidates=[node], seed=seed)
        if decision.chosen == node:
            return None
        reason = decision.failures().get(node)
        return reason.short() if reason is not None else "refused"

    for node in proposed:
        state = view.state(node)
        if state is None:
            continue
        nominated = nominated_here(view, pod, [node])
        placed_for_others = {n.key for n in nominated}
        lower = [
            p
            for p in state.pods.values()
            if p.priority < pod.priority and not p.same_pod(pod) and p.key not in placed_for_others
        ]
        with overlay(view, place=nominated):
            victims = fewest_victims(node, lower, view, refusal)
        if victims is not None:
            out[node] = _victims(victims, view)
    return out


def fewest_victims(
    node: str, lower: Sequence[Pod], view: ClusterView, refusal: Callable[[str], str | None]
) -> list[tuple[Pod, str]] | None:
    """kube's SelectVictimsOnNode over `lower` (the node's lower-priority pods): the fewest of them the
    pod needs gone, each with the reason the node refuses the pod with it back (`refusal`: None when
    the pod fits), or None when taking all of them off is not enough. The view is as it was after."""
    if refusal(node) is None:
        return []
    if not lower:
        return None
    with overlay(view, remove=lower):
        if refusal(node) is not None:
            return None
    ordered = important_first(lower)
    violating = pdb_violating(ordered, view)
    victims: list[tuple[Pod, str]] = []
    with contextlib.ExitStack() as stack:
        for p in ordered:
            view.remove_pod(p.key)
        stack.callback(lambda: [view.put_back(p) for p in ordered if view.pod(p.key) is None])
        for p in [q for q in ordered if q.key in violating] + [q for q in ordered if q.key not in violating]:
            view.put_back(p)
            why = refusal(node)
            if why is not None:
                view.remove_pod(p.key)
                victims.append((p, why))
    return victims


# At most this many nodes are searched for victims by would_preempt (kube-scheduler's dry run looks at
# 10% of the nodes, at least 100).
CANDIDATES = 100


def would_preempt(
    pod: Pod, view: ClusterView, pipeline: Pipeline, refused: Iterable[str], *, seed: int
) -> list[tuple[str, Victims]]:
    """For a pod nothing fits (`refused`: the nodes where an eviction could help), the nodes where
    preemption would place it, with their fewest victims, in the order kube-scheduler picks among them
    (pickOneNodeForPreemption): what `berth simulate` says of a pod that fits only by preemption."""
    if not pod.preempts:
        return []
    nodes = sorted(refused)[:CANDIDATES]
    found = select_victims(pod, view, pipeline, dict.fromkeys(nodes, ()), seed=seed)
    return sorted(((n, v) for n, v in found.items() if v.pods), key=lambda item: (item[1].order(), item[0]))


def _victims(pods: Sequence[tuple[Pod, str]], view: ClusterView) -> Victims:
    reasons = {p.key: why for p, why in pods}
    ordered = important_first(p for p, _ in pods)
    violating = pdb_violating(ordered, view)
    why = tuple(reasons[p.key] for p in ordered)
    return Victims(tuple(ordered), sum(1 for p in ordered if p.key in violating), why)


def preemption_events(
    pod: Pod, decision: Decision, view: ClusterView, pipeline: Pipeline, *, detail: bool = False
) -> tuple[Event, ...]:
    """What `berth simulate` adds to a pod nothing fits (a 409) that preemption would place: the node
    kube-scheduler would pick and its victims ("would preempt on n2: batch-n2-a (priority 10)"), and
    with `detail` every candidate. The decision itself stays a refusal: without evictions the pod does
    not fit."""
    if decision.error is None or decision.error.code != 409:
        return ()
    failed, _ = decision.failure_texts()
    found = would_preempt(pod, view, pipeline, failed, seed=decision.seed)
    if not found:
        return ()

    def shown(node: str, victims: Victims) -> str:
        named = (
            f"{p.name if p.namespace == pod.namespace else p.key} (priority {p.priority})"
            for p in victims.pods
        )
        return f"{node}: {', '.join(named)}"

    events = [Event("Normal", "WouldPreempt", f"would preempt on {shown(*found[0])}")]
    if detail:
        events += [Event("Normal", "PreemptionCandidate", shown(*c)) for c in found[1:]]
    return tuple(events)
