"""The targets `berth rebalance` planned for the replacements of the pods it evicts.

Before evicting a pod, rebalance writes the node it planned for the pod's replacement on the pod
(`berth.dev/rebalance-target`: `{"node": ..., "until": ..., "rules": [...]}`). When the watch shows
that pod going (deletionTimestamp set, or deleted), the view keeps the target for its controller and
pod template until `until`; the `rebalance/planned-target` step then steers a pod of the same
controller and template there, if berth's rules accept the node. The first such pod bound there
uses the target up. Nothing else is held: the target is a direction for the replacement, not room
kept from other pods, and a replacement that finds it taken is placed as any other pod.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import orjson

from berth import annotations as ann
from berth.cluster.model import Pod

# The labels that name a pod's template: a ReplicaSet's pods (Deployments) and a StatefulSet's or
# DaemonSet's revision.
TEMPLATE_LABELS = ("pod-template-hash", "controller-revision-hash")


@dataclass(frozen=True, slots=True)
class Target:
    node: str
    until: float  # seconds since the epoch
    rules: tuple[str, ...]


def parse_target(value: str) -> Target | None:
    """The annotation's target, or None when it is not one (a malformed value plans nothing)."""
    try:
        raw = orjson.loads(value)
        node, until = raw["node"], dt.datetime.fromisoformat(raw["until"]).timestamp()
        rules = tuple(str(r) for r in raw.get("rules") or ())
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
    if not isinstance(node, str) or not node:
        return None
    return Target(node, until, rules)


def target_annotation(node: str, until: dt.datetime, rules: tuple[str, ...]) -> str:
    stamp = until.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return orjson.dumps({"node": node, "until": stamp, "rules": list(rules)}).decode()


def template_of(pod: Pod) -> tuple[str, str, str, str] | None:
    """(namespace, controller kind, controller name, template) of a pod a controller replaces."""
    if pod.controller is None:
        return None
    template = next((pod.labels[k] for k in TEMPLATE_LABELS if k in pod.labels), "")
    return (pod.namespace, *pod.controller, template)


class PlannedTargets:
    """Targets by controller and template, each by the uid of the pod it replaces."""

    def __init__(self, clock=time.time) -> None:
        self._targets: dict[tuple[str, str, str, str], dict[str, Target]] = {}
        self._clock = clock

    def __len__(self) -> int:
        return sum(len(t) for t in self._targets.values())

    def note(self, pod: Pod) -> None:
        """A pod is going: keep its planned target, if it carries one that is still valid."""
        value = pod.annotations.get(ann.REBALANCE_TARGET)
        if not value:
            return
        key = template_of(pod)
        if key is None or not pod.uid:
            return
        target = parse_target(value)
        if target is None or target.until <= self._clock():
            return
        self._targets.setdefault(key, {})[pod.uid] = target

    def nodes_for(self, pod: Pod) -> frozenset[str]:
        """The planned targets a pod may take: those of its controller and template, not its own."""
        if not self._targets or pod.deleting:
            return frozenset()
        key = template_of(pod)
        found = self._targets.get(key) if key is not None else None
        if key is None or not found:
            return frozenset()
        now = self._clock()
        for uid in [u for u, t in found.items() if t.until <= now]:
            del found[uid]
        if not found:
            del self._targets[key]
        return frozenset(t.node for uid, t in found.items() if uid != pod.uid)

    def bound(self, pod: Pod) -> None:
        """A pod is bound: a target of its controller and template on its node is used up."""
        if not self._targets or pod.deleting or not pod.node_name:
            return
        key = template_of(pod)
        found = self._targets.get(key) if key is not None else None
        if key is None or not found or pod.uid in found:
            return
        uid = next((u for u, t in found.items() if t.node == pod.node_name), None)
        if uid is not None:
            del found[uid]
            if not found:
                del self._targets[key]
