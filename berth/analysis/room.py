"""`berth capacity`: how many more pods of one shape fit, counted by placing them.

One more pod after another is decided by the same chain as `berth simulate` (kube-scheduler's filters,
berth's rules, the allocator's capacity filters and ratios) and placed where it goes, until one is
refused: "N more fit" means simulate places N such pods and refuses the next. Per node: how many of
them went there, and why the node refused the one that did not fit (the refusal's reason on that node).

Counting stops at `limit` pods (the answer is then "at least" that many).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec

from berth.cluster.model import Pod
from berth.cluster.topology import ZONE
from berth.cluster.view import ClusterView
from berth.engine import Decision, Pipeline, decide

LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    name: str
    fits: int
    limited_by: str  # the reason the node refused the next pod ("" when counting stopped first)
    pods: int  # pods on the node before

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fits": self.fits, "limitedBy": self.limited_by, "pods": self.pods}


@dataclass(frozen=True, slots=True)
class Capacity:
    pod: str
    nodes: tuple[NodeCapacity, ...]
    # The decision that refused the next pod; None when counting stopped at the limit first.
    refusal: Decision | None
    limit: int
    invalid: str = ""  # the specification is invalid: nothing fits

    @property
    def total(self) -> int:
        return sum(n.fits for n in self.nodes)

    @property
    def bounded(self) -> bool:
        return self.refusal is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod,
            "total": self.total,
            "bounded": self.bounded,
            "nodes": [n.to_dict() for n in self.nodes],
        }
        if self.refusal is not None and self.refusal.error is not None:
            out["refusal"] = self.refusal.error.message
        if not self.bounded:
            out["stoppedAt"] = self.limit
        if self.invalid:
            out["invalid"] = self.invalid
        return out


def capacity(
    pod: Pod, view: ClusterView, pipeline: Pipeline, *, limit: int = LIMIT, seed: int = 0
) -> Capacity:
    """Place copies of `pod` on `view` (which keeps them) until one is refused or `limit` fit."""
    before = {state.node.name: len(state.pods) for state in view.states()}
    placed: Counter = Counter()
    refusal: Decision | None = None
    for i in range(limit):
        copy = msgspec.structs.replace(pod, name=f"{pod.name}-{i}", uid=f"{pod.uid or pod.name}-capacity-{i}")
        decision = decide(copy, view, pipeline, seed=seed + i)
        if decision.error is not None and decision.error.code == 400:
            return Capacity(
                pod.key, _rows(before, placed, None), decision, limit, invalid=decision.error.message
            )
        if decision.chosen is None:
            refusal = decision
            break
        view.add_pod(msgspec.structs.replace(copy, node_name=decision.chosen, phase="Running"))
        placed[decision.chosen] += 1
    return Capacity(pod.key, _rows(before, placed, refusal), refusal, limit)


def _rows(before: dict[str, int], placed: Counter, refusal: Decision | None) -> tuple[NodeCapacity, ...]:
    reasons = {n.name: str(n.reasons[0]) for n in refusal.nodes if n.reasons} if refusal is not None else {}
    return tuple(
        NodeCapacity(name, placed[name], reasons.get(name, ""), pods) for name, pods in sorted(before.items())
    )


# -- the room left, without a pod shape (berth capacity without --pod) -------------------------------------
NO_ZONE = "(no zone)"


@dataclass(frozen=True, slots=True)
class Room:
    """What is left on one node or in one zone: CPU in millicores, memory in bytes, pod slots; `note`
    says why a node takes no new pod whatever its room (cordoned, not Ready), or only some (tainted)."""

    name: str
    zone: str
    cpu: int
    memory: int
    pods: int
    allocatable: tuple[int, int, int]  # cpu, memory, pods
    note: str = ""
    takes_pods: bool = True  # not cordoned, Ready: counted in its zone

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "zone": self.zone}
        out |= {"free": {"cpu": f"{self.cpu}m", "memory": self.memory, "pods": self.pods}}
        cpu, memory, pods = self.allocatable
        out["allocatable"] = {"cpu": f"{cpu}m", "memory": memory, "pods": pods}
        return out | ({"note": self.note} if self.note else {})


@dataclass(frozen=True, slots=True)
class RoomLeft:
    nodes: tuple[Room, ...]
    zones: tuple[Room, ...]  # the nodes that take pods, summed per zone

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.to_dict() for n in self.nodes], "zones": [z.to_dict() for z in self.zones]}


def room_left(view: ClusterView) -> RoomLeft:
    """Per node the resources its pods' requests leave of its allocatable (kube-scheduler's
    NodeResourcesFit counts the same), and per zone the sum over the nodes that take new pods."""
    nodes = []
    for state in sorted(view.states(), key=lambda s: (s.node.labels.get(ZONE, NO_ZONE), s.node.name)):
        node = state.node
        allocatable = (
            node.allocatable.get("cpu", 0),
            node.allocatable.get("memory", 0),
            node.allocatable.get("pods", 0),
        )
        takes = not node.unschedulable and node.ready
        note = "cordoned" if node.unschedulable else ("not Ready" if not node.ready else "")
        hard = [str(t) for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
        if hard:
            note = "; ".join(
                [*([note] if note else []), f"tainted {', '.join(hard)}: only pods that tolerate it"]
            )
        nodes.append(
            Room(
                node.name,
                node.labels.get(ZONE, NO_ZONE),
                max(0, allocatable[0] - state.requested.get("cpu", 0)),
                max(0, allocatable[1] - state.requested.get("memory", 0)),
                max(0, allocatable[2] - len(state.pods)),
                allocatable,
                note,
                takes,
            )
        )
    zones: dict[str, list[Room]] = {}
    for room in nodes:
        if room.takes_pods:
            zones.setdefault(room.zone, []).append(room)
    summed = tuple(
        Room(
            zone,
            zone,
            sum(r.cpu for r in rooms),
            sum(r.memory for r in rooms),
            sum(r.pods for r in rooms),
            tuple(sum(r.allocatable[i] for r in rooms) for i in range(3)),  # type: ignore[arg-type]
            f"{len(rooms)} node(s)",
        )
        for zone, rooms in sorted(zones.items())
    )
    return RoomLeft(tuple(nodes), summed)
