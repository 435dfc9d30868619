"""Preemption that respects berth's rules: what the extender's preempt verb answers kube-scheduler.

kube-scheduler's preemption proposes candidate nodes, each with the lower-priority pods its own filters
need gone (its dry run). For each, berth decides for the preemptor on that node as it would be without
those victims, with the pods nominated there whose priority is equal or higher, and:

- keeps the node with kube's victims when berth accepts it then;
- when berth still refuses and lower-priority pods are what make it refuse (a neighbour carrying a tag
  the pod excludes, a pod of the same app under ONE_PER_HOST), adds the fewest and lowest-priority of
  them as victims, the way kube's SelectVictimsOnNode does: every lower-priority pod taken off, then
  each put back, the most important first, those whose eviction would break a PodDisruptionBudget
  before the others, and kept off only if berth refuses with it back;
- drops the node otherwise: no pod is evicted for a node berth will refuse anyway.

A pod of equal or higher priority is never a victim. Victims are listed the most important first (the
order kube reads the highest-priority victim from), and their PodDisruptionBudget violations are
counted as kube counts them. The view is changed only for the time of each decision and put back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
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
    """Node -> the victims berth agrees to for the preemptor there; nodes berth would still refuse are
    left out. `proposed` is kube's candidates: node -> the uids of its victims."""
    out: dict[str, Victims] = {}

    def fits(node: str) -> bool:
        return decide(pod, view, pipeline, candidates=[node], seed=seed).chosen == node

    for node, uids in proposed.items():
        state = view.state(node)
        if state is None:
            continue
        wanted = set(uids)
        kube = [p for p in state.pods.values() if p.uid in wanted and p.priority < pod.priority]
        nominated = nominated_here(view, pod, [node])
        placed_for_others = {n.key for n in nominated}
        with overlay(view, remove=kube, place=nominated):
            if fits(node):
                out[node] = _victims(kube, view)
                continue
            lower = [
                p
                for p in state.pods.values()
                if p.priority < pod.priority and not p.same_pod(pod) and p.key not in placed_for_others
            ]
            if not lower:
                continue
            extra = _reprieve(pod, node, lower, view, fits)
        if extra is not None:
            out[node] = _victims([*kube, *extra], view)
    return out


def _reprieve(pod: Pod, node: str, lower: list[Pod], view: ClusterView, fits) -> list[Pod] | None:
    """The fewest of `lower` that berth needs gone, or None when taking all of them off is not enough.
    The view is as it was when this returns."""
    with overlay(view, remove=lower):
        if not fits(node):
            return None
    ordered = important_first(lower)
    violating = pdb_violating(ordered, view)
    victims: list[Pod] = []
    off = list(ordered)
    with contextlib.ExitStack() as stack:
        for p in off:
            view.remove_pod(p.key)
        stack.callback(lambda: [view.put_back(p) for p in off if view.pod(p.key) is None])
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
