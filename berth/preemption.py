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
from berth.engine import Pipeline, decide


@dataclass(frozen=True)
class Victims:
    pods: tuple[Pod, ...]
    pdb_violations: int


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

    def fits(node: str) -> bool:
        return decide(pod, view, pipeline, candidates=[node], seed=seed).chosen == node

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
            victims = fewest_victims(node, lower, view, fits)
        if victims is not None:
            out[node] = _victims(victims, view)
    return out


def fewest_victims(
    node: str, lower: Sequence[Pod], view: ClusterView, fits: Callable[[str], bool]
) -> list[Pod] | None:
    """kube's SelectVictimsOnNode over `lower` (the node's lower-priority pods): the fewest of them the
    pod needs gone, or None when taking all of them off is not enough. The view is as it was after."""
    if fits(node):
        return []
    if not lower:
        return None
    with overlay(view, remove=lower):
        if not fits(node):
            return None
    ordered = important_first(lower)
    violating = pdb_violating(ordered, view)
    victims: list[Pod] = []
    with contextlib.ExitStack() as stack:
        for p in ordered:
            view.remove_pod(p.key)
        stack.callback(lambda: [view.put_back(p) for p in ordered if view.pod(p.key) is None])
        for p in [q for q in ordered if q.key in violating] + [q for q in ordered if q.key not in violating]:
            view.put_back(p)
            if not fits(node):
                view.remove_pod(p.key)
                victims.append(p)
    return victims


def _victims(pods: Sequence[Pod], view: ClusterView) -> Victims:
    ordered = important_first(pods)
    violating = pdb_violating(ordered, view)
    return Victims(tuple(ordered), sum(1 for p in ordered if p.key in violating))
