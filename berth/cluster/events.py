"""core/v1 Events as berth writes them: on the pods it places and refuses (berth serve) and on the
pods it evicts and their owners (berth rebalance)."""

from __future__ import annotations

import datetime as dt
from typing import Any

MAX_EVENT_MESSAGE = 1024  # the API server refuses longer messages
RETRY_CONDITION = "berth.dev/PlacementRetry"
# Written by berth serve on its own pod when its scheduler takes the Lease (berth.cluster.live.catch_up).
FENCE_CONDITION = "berth.dev/LeaseTaken"


def retry_patch(reason: str, why: str, now: str | None = None) -> dict[str, Any]:
    """The status patch (strategic merge: conditions merge by type) that asks kube-scheduler to try a
    pending pod again: an update of a pod an extender refused is one it requeues
    (berth.operator.policy_requeue says where in its code). Written by the operator when a
    PlacementPolicy changes and by berth serve when a pod leaves a node."""
    now = now or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": RETRY_CONDITION,
        "status": "True",
        "reason": reason,
        "message": f"{why}: berth asked kube-scheduler to try the pod again",
        "lastTransitionTime": now,
        "lastProbeTime": now,
    }
    return {"status": {"conditions": [condition]}}


def fence_patch(token: str, now: str | None = None) -> dict[str, Any]:
    """The status patch berth serve writes on its own pod when its scheduler takes the Lease: the watch
    shows it after every pod change stored before it, so seeing it come back means the view holds the
    placements the scheduler that led before made (berth.cluster.live.LiveCluster.catch_up)."""
    now = now or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": FENCE_CONDITION,
        "status": "True",
        "reason": "CaughtUp",
        "message": f"berth serve took over placing at {now} (fence {token})",
        "lastTransitionTime": now,
    }
    return {"status": {"conditions": [condition]}}


def involved(api_version: str, kind: str, namespace: str, name: str, uid: str = "") -> dict[str, Any]:
    out = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}
    return out | ({"uid": uid} if uid else {})


def event_body(obj: dict[str, Any], type_: str, reason: str, message: str, instance: str) -> dict[str, Any]:
    """An Event about `obj` (an involvedObject), reported by berth from `instance`."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{obj['name']}.", "namespace": obj["namespace"]},
        "involvedObject": obj,
        "reason": reason,
        "message": message[:MAX_EVENT_MESSAGE],
        "type": type_,
        "source": {"component": "berth"},
        "reportingComponent": "berth",
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
