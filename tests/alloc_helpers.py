"""Nodes, pods and configurations for the allocator's tests, written as kubectl shows them."""

from __future__ import annotations

import json
from typing import Any

from berth.engine import Decision
from berth.vocab.alloc.config import AllocatorConfig, parse_config
from tests.builders import node, pod


def cn(
    name: str,
    *,
    memory: str = "16Gi",
    cpu: str = "4",
    disk: str | None = None,
    traits: Any = None,
    nic_tags: Any = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    kubelet: str | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A compute node: a Kubernetes Node with the berth annotations the allocator reads."""
    extra = {"ephemeral-storage": disk} if disk else None
    obj = node(name, memory=memory, cpu=cpu, labels=labels, ready=ready, extra=extra)
    notes = dict(annotations or {})
    if traits is not None:
        notes["berth.dev/traits"] = traits if isinstance(traits, str) else json.dumps(traits)
    if nic_tags is not None:
        notes["berth.dev/nic-tags"] = json.dumps(nic_tags)
    if notes:
        obj["metadata"]["annotations"] = notes
    if kubelet:
        obj["status"]["nodeInfo"] = {"kubeletVersion": kubelet}
    return obj


def vm(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    memory: str | None = None,
    cpu: str | None = None,
    disk: str | None = None,
    annotations: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A pod with limits (the allocator's sizes) and requests of 0 for them, so that kube-scheduler's
    NodeResourcesFit lets the allocator's overprovision ratios promise more than a node's allocatable
    (a limit alone would be the request too, as the API server defaults it); annotation values that
    are not strings are JSON."""
    notes = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (annotations or {}).items()}
    obj = pod(name, namespace=namespace, node=node, annotations=notes, labels=labels, uid=uid)
    limits = {k: v for k, v in (("memory", memory), ("cpu", cpu), ("ephemeral-storage", disk)) if v}
    if limits:
        obj["spec"]["containers"][0]["resources"] = {"limits": limits, "requests": dict.fromkeys(limits, "0")}
    return obj


def config(**data: Any) -> AllocatorConfig:
    return parse_config(data)


def chain(*members: Any, **data: Any) -> AllocatorConfig:
    """A configuration whose allocationDescription is ["pipe", *members]."""
    return parse_config({"allocationDescription": ["pipe", *members], **data})


def reason_texts(decision: Decision) -> dict[str, str]:
    """Node name -> its first reason as a user reads it, for the nodes that have one."""
    return {n.name: str(n.reasons[0]) for n in decision.nodes if n.reasons}


def feasible(decision: Decision) -> set[str]:
    return {n.name for n in decision.nodes if n.feasible}


def candidates(decision: Decision) -> set[str]:
    return {n.name for n in decision.nodes if n.candidate}


def trace(decision: Decision, step: str):
    return next(t for t in decision.steps if t.step == step)
