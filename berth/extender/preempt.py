"""berth's answer to kube-scheduler's preemption, and what follows it until the room is made.

kube-scheduler runs preemption (its PostFilter) when no node fits a pod, and asks the extender's
preempt verb about its candidate nodes with their victims. berth answers each with the fewest victims
that make room under kube's filters and berth's rules together (berth.analysis.preemption): nodes berth
would still refuse are dropped, lower-priority pods that block only under berth's rules are added, and
kube's victims that berth's rules make room without are spared. The answer is kept per pod for
VICTIMS_GOING_SECONDS: while the victims of the node kube chose are going, the pod's next decision
counts them gone, the pod is not preempted for again, and once kube has nominated the pod, the events
say what berth chose of the victims and why.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from berth.analysis.preemption import Victims, nominated_here, overlay, select_victims
from berth.cluster.convert import pod_from_k8s
from berth.cluster.model import Pod
from berth.cluster.per_pod import PodStates, pod_key
from berth.cluster.placement_record import seed_for
from berth.engine import Event, Pipeline, decide
from berth.extender import wire
from berth.extender.decisions import DECISION_CACHE, Cluster

log = logging.getLogger("berth.extender")

# How long after berth's answer to a preemption a new one waits while the victims of the node kube
# chose are going (their deletion reaches kube-scheduler's cache within a second or two).
VICTIMS_GOING_SECONDS = 15.0
# Nodes a refused pod that may preempt is checked on for blocks only berth's rules make.
BLOCKS_CHECKED = 5

Recorder = Callable[[Pod, list[Event]], Awaitable[None]]


@dataclass(slots=True)
class Preempting:
    """berth's last answer to kube-scheduler's preemption for a pod: when, and per node its victims and
    kube's; told: the events of the node kube chose are recorded."""

    at: float
    nodes: dict[str, tuple[Victims, list[Pod]]]
    told: bool = False


class Preemption:
    def __init__(
        self,
        cluster: Cluster,
        rules: Pipeline,
        with_kube: Pipeline,
        recorder: Recorder,
        states: PodStates,
        kube_sample: Mapping[str, int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.rules = rules
        self.with_kube = with_kube
        self.record = recorder
        self.kube_sample = kube_sample
        self.clock = clock
        self._answers = states.map("preemption answers", DECISION_CACHE)  # pod -> Preempting

    def __bool__(self) -> bool:
        """Any answer kept: a filter asks nothing more of preemption without one."""
        return len(self._answers) > 0

    def nominations_placed(self, pod: Pod) -> contextlib.AbstractContextManager:
        """Pods kube-scheduler nominated to a node (it evicted for them there) of equal or higher
        priority count there as placed: the room a preemption freed is not taken by another pod. And
        the victims berth named for this pod's preemption on the node kube nominated it to count as
        gone (victims_going)."""
        view = self.cluster.view
        waiting = nominated_here(view, pod, view.nominated_nodes()) if view.nominated_nodes() else []
        going = self.victims_going(pod) if self._answers else []
        return overlay(view, remove=going, place=waiting) if waiting or going else contextlib.nullcontext()

    def victims_going(self, pod: Pod) -> list[Pod]:
        """The victims of berth's last preemption answer for the pod on the node kube-scheduler then
        nominated it to, within VICTIMS_GOING_SECONDS, that the view still holds there. kube-scheduler
        deletes them once it has the answer, and its cache may show them gone before berth's watch
        does: held in the decision, they would have berth refuse the node kube made room on, and kube
        preempt again on another (its guard against that looks for victims still terminating)."""
        node = pod.nominated_node
        last = self._answers.get(pod_key(pod)) if node else None
        if last is None or node not in last.nodes or self.clock() - last.at > VICTIMS_GOING_SECONDS:
            return []
        view = self.cluster.view
        return [
            held
            for victim in last.nodes[node][0].pods
            if (held := view.pod(victim.key)) is not None
            and held.uid == victim.uid
            and held.node_name == node
        ]

    def only_berth_blocks(self, pod: Pod, failed: list[str]) -> str:
        """For a pod that may preempt, refused where lower-priority pods block only under berth's rules:
        kube-scheduler up to v1.37 proposes no such node for preemption (its own filters pass there), so
        the refusal says so and names those pods of the pod's namespace (others are counted, not named)."""
        if pod.priority <= 0 or not pod.preempts or not failed:
            return ""
        view = self.cluster.view
        found = select_victims(
            pod, view, self.rules, {n: [] for n in failed[:BLOCKS_CHECKED]}, seed=seed_for(pod)
        )
        if not found:
            return ""
        node, victims = next(iter(found.items()))
        own = [p.name for p in victims.pods if p.namespace == pod.namespace]
        others = len(victims.pods) - len(own)
        named = ", ".join(own) + (f" and {others} pod(s) of other namespaces" if others else "")
        return (
            f"; lower-priority pods block it only under berth's rules (on {node}: {named}): kube-scheduler "
            "up to v1.37 cannot preempt for that, as its own filters pass there"
        )

    def room_being_made(self, key: str, nominated: str = "") -> str | None:
        """The node of berth's last preemption answer for the pod that kube-scheduler nominated it to
        (`nominated`, as the pod says), or where every victim is now deleting or gone, within
        VICTIMS_GOING_SECONDS of it: kube-scheduler preempted there, and the room is being made."""
        last = self._answers.get(key)
        if last is None or self.clock() - last.at > VICTIMS_GOING_SECONDS:
            return None
        if nominated and nominated in last.nodes:
            return nominated
        view = self.cluster.view
        for node, (victims, _) in last.nodes.items():
            if all((p := view.pod(v.key)) is None or p.uid != v.uid or p.deleting for v in victims.pods):
                return node
        return None

    async def tell(self, pod: Pod, node: str) -> None:
        """Once kube-scheduler has nominated a preemptor to a node (it evicted there), what berth chose
        of the victims and why, where it differs from kube's dry run: an event on each victim berth
        added, naming the rule and the preemptor, and one on the preemptor naming berth's victims and
        kube's it spared. Pods of other namespaces are counted, never named, to the preemptor (and do
        not learn its name)."""
        answer = self._answers.get(pod_key(pod))
        if answer is None or answer.told or node not in answer.nodes:
            return
        answer.told = True
        victims, kubes = answer.nodes[node]
        kube_keys = {p.key for p in kubes}
        added = [p for p in victims.pods if p.key not in kube_keys]
        spared = [p for p in kubes if p.key not in {v.key for v in victims.pods}]
        if not added and not spared:
            return  # kube's victims, as kube chose them: its own events say so
        for victim in added:
            why = victims.reason_of(victim)
            who = f"{pod.name} (priority {pod.priority})" if victim.namespace == pod.namespace else "a pod"
            message = f"evicted on {node} for {who}: with this pod there, berth refuses it: {why}"
            await self.record(victim, [Event("Normal", "PreemptedForBerthRule", message)])
        await self.record(
            pod, [Event("Normal", "BerthPreemption", _preemption_message(pod, node, added, spared, victims))]
        )

    async def answer(self, args: wire.ExtenderPreemptionArgs) -> wire.ExtenderPreemptionResult:
        """kube-scheduler's candidates for preempting, each with the fewest victims that make room under
        kube's filters and berth's rules together."""
        if not self.cluster.ready():
            return wire.ExtenderPreemptionResult()  # no node: preemption does not go ahead
        pod = pod_from_k8s(args.pod, memo=True)
        key = pod_key(pod)
        under_way = self.room_being_made(key, pod.nominated_node)
        if under_way is not None:
            # kube-scheduler's own guard (PodEligibleToPreemptOthers: a terminating victim on the
            # nominated node) misses this when the nomination or the victims' end has not reached its
            # cache yet: preempting again would evict elsewhere too. No candidate: the pod is tried
            # again when the victims' deletion reaches kube-scheduler, and fits on that node.
            log.info("preemption for %s already made room on %s: not preempting again", pod.key, under_way)
            return wire.ExtenderPreemptionResult()
        if self.kube_sample.get(pod.scheduler_name, 100) < 100:
            # Past kube-scheduler's sample a node may fit without evictions: the hand-over, not an
            # eviction, is the answer there (berth.extender.sample).
            view = self.cluster.view
            if decide(pod, view, self.with_kube, seed=seed_for(pod)).chosen is not None:
                log.info("no preemption for %s: a node fits it without evictions", pod.key)
                return wire.ExtenderPreemptionResult()
        proposed: dict[str, list[str]] = {}
        for node, meta in (args.node_name_to_meta_victims or {}).items():
            proposed[node] = [m.uid for m in (meta.pods or [])]
        for node, full in (args.node_name_to_victims or {}).items():
            pods = (full or {}).get("Pods") or []
            proposed[node] = [((p.get("metadata") or {}).get("uid") or "") for p in pods]
        # The fewest victims under kube's filters (as berth models them) and berth's rules together.
        view = self.cluster.view
        chosen = select_victims(pod, view, self.with_kube, proposed, seed=seed_for(pod))
        self._answers.set(
            key,
            Preempting(
                self.clock(),
                {
                    node: (victims, [p for uid in proposed[node] if (p := view.pod_by_uid(uid)) is not None])
                    for node, victims in chosen.items()
                    if victims.pods
                },
            ),
        )
        # A node kube proposed with victims keeps at least one (kube up to v1.37 refuses an empty list).
        return wire.ExtenderPreemptionResult(
            node_name_to_meta_victims={
                node: wire.MetaVictims(
                    pods=[wire.MetaPod(uid=p.uid) for p in victims.pods],
                    num_pdb_violations=victims.pdb_violations,
                )
                for node, victims in chosen.items()
                if victims.pods or not proposed[node]
            }
        )


def _preemption_message(pod: Pod, node: str, added: list[Pod], spared: list[Pod], victims: Victims) -> str:
    def named(pods: list[Pod], why: bool) -> str:
        own = [p for p in pods if p.namespace == pod.namespace]
        text = ", ".join(f"{p.name} ({victims.reason_of(p)})" if why else p.name for p in own)
        others = len(pods) - len(own)
        if others:
            text += f"{', ' if own else ''}{others} pod(s) of other namespaces"
        return text

    message = f"preempting on {node}, berth chose the victims"
    if added:
        message += f": added {named(added, True)}"
    if spared:
        message += (
            f"{';' if added else ':'} spared {named(spared, False)}, which kube-scheduler's dry run chose"
        )
        message += " (the room is made without them)"
    return message
