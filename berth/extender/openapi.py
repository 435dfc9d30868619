"""The OpenAPI description of the extender's routes (the hot verbs read raw bodies, so FastAPI cannot
infer it): what /docs shows, and what the schemathesis tests generate requests from."""

from __future__ import annotations

from typing import Any

_NODE_MAP = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}

EXTENDER_ARGS = {
    "type": "object",
    "required": ["Pod"],
    "properties": {
        "Pod": {"type": "object"},
        "Nodes": {
            "type": ["object", "null"],
            "properties": {"items": {"type": ["array", "null"], "items": {"type": "object"}}},
        },
        "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}},
    },
}
BINDING_ARGS = {
    "type": "object",
    "required": ["PodName", "PodNamespace", "PodUID", "Node"],
    "properties": {k: {"type": "string"} for k in ("PodName", "PodNamespace", "PodUID", "Node")},
}
META_VICTIMS = {
    "type": ["object", "null"],
    "additionalProperties": {
        "type": "object",
        "properties": {
            "Pods": {
                "type": ["array", "null"],
                "items": {"type": "object", "required": ["UID"], "properties": {"UID": {"type": "string"}}},
            },
            "NumPDBViolations": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
        },
    },
}
PREEMPTION_ARGS = {
    "type": "object",
    "required": ["Pod"],
    "properties": {
        "Pod": {"type": "object"},
        "NodeNameToVictims": {"type": ["object", "null"]},
        "NodeNameToMetaVictims": META_VICTIMS,
    },
}
SIMULATE_ARGS = {
    "type": "object",
    "required": ["pod"],
    "properties": {"pod": {"type": "object"}, "seed": {"type": "integer"}},
}

FILTER_RESULT = {
    "type": "object",
    "properties": {
        "Nodes": {"type": ["object", "null"]},
        "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}},
        "FailedNodes": _NODE_MAP,
        "FailedAndUnresolvableNodes": _NODE_MAP,
        "Error": {"type": "string"},
    },
}
PRIORITIES = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["Host", "Score"],
        "properties": {"Host": {"type": "string"}, "Score": {"type": "integer", "minimum": 0, "maximum": 10}},
    },
}
BINDING_RESULT = {"type": "object", "properties": {"Error": {"type": "string"}}}
PREEMPTION_RESULT = {"type": "object", "properties": {"NodeNameToMetaVictims": META_VICTIMS}}
DECISION = {
    "type": "object",
    "required": ["pod", "chosen", "error", "nodes", "events"],
    "properties": {
        "pod": {"type": "string"},
        "chosen": {"type": ["string", "null"]},
        "error": {"type": ["object", "null"]},
        "nodes": {"type": "array"},
        "events": {"type": "array"},
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


BAD_REQUEST = {400: _json(_ERROR, "the body does not decode into the wire type")}

VERBS: dict[str, tuple[dict[str, Any], dict[int, Any]]] = {
    "filter": (EXTENDER_ARGS, {200: _json(FILTER_RESULT, "ExtenderFilterResult"), **BAD_REQUEST}),
    "prioritize": (EXTENDER_ARGS, {200: _json(PRIORITIES, "HostPriorityList, 0..10"), **BAD_REQUEST}),
    "bind": (BINDING_ARGS, {200: _json(BINDING_RESULT, "ExtenderBindingResult"), **BAD_REQUEST}),
    "preempt": (PREEMPTION_ARGS, {200: _json(PREEMPTION_RESULT, "ExtenderPreemptionResult"), **BAD_REQUEST}),
}

SIMULATE_RESPONSES = {
    200: _json(DECISION, "the Decision: placed"),
    409: _json(DECISION, "the Decision: nothing fits"),
    400: _json(
        {"anyOf": [DECISION, _ERROR]}, "the specification is invalid, or the body is not a simulation"
    ),
}
HEALTH_RESPONSES = {200: _json({"type": "object", "properties": {"status": {"type": "string"}}}, "alive")}
READY_RESPONSES = {
    200: _json({"type": "object", "properties": {"ready": {"type": "boolean"}}}, "the cache has synced"),
    503: _json({"type": "object", "properties": {"ready": {"type": "boolean"}}}, "the cache has not synced"),
}
METRICS_RESPONSES = {
    200: {"description": "Prometheus metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}
}
