"""Kubernetes objects decoded without what berth never reads: their managedFields.

kube-apiserver sends every object of a list or a watch with `metadata.managedFields`, who set which
field, which no rule of berth reads: for a pod a controller created, a scheduler bound and a kubelet
started, about half of its JSON. Decoding it into Python objects was most of the time berth serve took
to list a cluster of 150,000 pods (bench.state: 31.7 s with it, bench/HISTORY.md). msgspec passes over a
field a Struct does not declare without making an object of it, so a list page and a watch event are
decoded into these Structs and handed on as the plain dicts the converters read, metadata without
managedFields, everything else as sent.
"""

from __future__ import annotations

from typing import Any

import msgspec


class _LeanMeta(msgspec.Struct):
    """ObjectMeta but managedFields (and the deprecated selfLink)."""

    name: Any = None
    generateName: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None
    generation: Any = None
    creationTimestamp: Any = None
    deletionTimestamp: Any = None
    deletionGracePeriodSeconds: Any = None
    labels: Any = None
    annotations: Any = None
    ownerReferences: Any = None
    finalizers: Any = None


_META_FIELDS = _LeanMeta.__struct_fields__


class _LeanObject(msgspec.Struct):
    apiVersion: Any = None
    kind: Any = None
    metadata: _LeanMeta | None = None
    spec: Any = None
    status: Any = None


_OBJECT_FIELDS = ("apiVersion", "kind", "spec", "status")


class _LeanPage(msgspec.Struct):
    items: list[_LeanObject] | None = None
    metadata: dict[str, Any] | None = None


class _LeanEvent(msgspec.Struct):
    type: Any = None
    object: _LeanObject | None = None


_PAGE = msgspec.json.Decoder(_LeanPage)
_EVENT = msgspec.json.Decoder(_LeanEvent)


def _plain(obj: _LeanObject) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _OBJECT_FIELDS:
        value = getattr(obj, name)
        if value is not None:
            out[name] = value
    meta = obj.metadata
    if meta is not None:
        out["metadata"] = {n: v for n in _META_FIELDS if (v := getattr(meta, n)) is not None}
    return out


def page(raw: bytes) -> dict[str, Any]:
    """A list's page: {"items": [...], "metadata": {...}} (msgspec.DecodeError when it is not one)."""
    decoded = _PAGE.decode(raw)
    return {"items": [_plain(o) for o in decoded.items or ()], "metadata": decoded.metadata or {}}


def event(raw: bytes) -> dict[str, Any]:
    """A watch event: {"type": ..., "object": {...}}; an ERROR event's object is a Status, decoded
    whole (its code, message and reason)."""
    found = _EVENT.decode(raw)
    if found.type == "ERROR":
        decoded: dict[str, Any] = msgspec.json.decode(raw)
        return decoded
    return {"type": found.type, "object": _plain(found.object) if found.object is not None else {}}
