"""core/v1 Events as berth writes them: on the pods it places and refuses (berth serve) and on the
pods it evicts and their owners (berth rebalance)."""

from __future__ import annotations

import datetime as dt
from typing import Any

MAX_EVENT_MESSAGE = 1024  # the API server refuses longer messages


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
