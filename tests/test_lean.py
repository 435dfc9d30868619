"""API objects decoded without their managedFields (berth.cluster.lean): everything else as sent."""

from __future__ import annotations

import orjson

from berth.cluster import lean
from tests.builders import pod


def _with_managed_fields(obj: dict) -> dict:
    obj["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def test_a_page_keeps_every_field_but_managed_fields():
    objects = [_with_managed_fields(pod(f"p{i}", uid=f"u{i}", node="n1", tags=["web"])) for i in range(3)]
    raw = orjson.dumps(
        {"kind": "PodList", "metadata": {"continue": "abc", "resourceVersion": "9"}, "items": objects}
    )
    decoded = lean.page(raw)
    assert decoded["metadata"] == {"continue": "abc", "resourceVersion": "9"}
    for got, sent in zip(decoded["items"], objects, strict=True):
        del sent["metadata"]["managedFields"]
        assert got == sent


def test_a_watch_event_keeps_its_object_and_an_error_its_status():
    obj = _with_managed_fields(pod("p", uid="u", phase="Pending"))
    decoded = lean.event(orjson.dumps({"type": "MODIFIED", "object": obj}))
    del obj["metadata"]["managedFields"]
    assert decoded == {"type": "MODIFIED", "object": obj}
    error = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
    }
    assert lean.event(orjson.dumps(error)) == error
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "12"}}}
    assert lean.event(orjson.dumps(bookmark)) == bookmark
