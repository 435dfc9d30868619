"""What the commands read: pod files, cluster snapshots (a file or the live cluster), what-if policies
and allocator configurations, each refused in one line naming the file."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from berth.analysis.audit import governed_pods
from berth.cli.options import (
    EXIT_INVALID,
    EXIT_NO_FIT,
    EXIT_PLACED,
)
from berth.cluster.convert import pod_from_k8s, pod_template, replica_owner, replica_pods, replicas_of
from berth.cluster.model import Pod
from berth.cluster.snapshot import Snapshot, check_cluster, load_snapshot
from berth.engine.decision import Decision
from berth.errors import BerthError, InvalidPolicy, SnapshotError
from berth.inputs import STDIN, label, read_documents
from berth.vocab.alloc.config import AllocatorConfig, load_config
from berth.vocab.policy.files import load_policy_files


def exit_code(decisions: Sequence[Decision]) -> int:
    codes = {d.error.code for d in decisions if d.error}
    if 400 in codes:
        return EXIT_INVALID
    return EXIT_NO_FIT if 409 in codes else EXIT_PLACED


def pods_in(path: str, namespace: str | None = None, default: str = "default") -> list[dict[str, Any]]:
    """The pods of a file; those without a namespace are in `namespace` (-n, which the file must agree
    with, as for `kubectl apply -n`), else in `default`."""
    objects = [in_namespace(obj, namespace, default, path) for obj in read_documents(path)]
    pods = [p for p in (template_of(obj, path) for obj in objects) if p is not None]
    if not pods:
        raise BerthError(f"{label(path)}: no Pod or workload with a pod template found")
    return pods


def template_of(obj: dict[str, Any], path: str) -> dict[str, Any] | None:
    try:
        return pod_template(obj)
    except SnapshotError as exc:
        raise BerthError(f"{label(path)}: {exc.message}") from exc
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        what = obj.get("kind") or "object"
        raise BerthError(f"{label(path)}: {what}: a field of the wrong type ({exc})") from exc


def replicas_in(
    path: str,
    replicas: int | None,
    namespace: str | None = None,
    default: str = "default",
    owners: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """The pods to simulate: a workload's `replicas` (a Job's parallelism) named <name>-0, -1, ...,
    `replicas` copies of each object when given, else a Pod once; and whether any object was
    expanded (the table then ends with a summary). Objects without a namespace are in `namespace`
    (-n, which the file must agree with, as for `kubectl apply -n`), else in `default`. The controllers
    that own the replicas are added to `owners` (kube's default spreading reads them)."""
    if replicas is not None and replicas < 1:
        raise BerthError(f"--replicas should be at least 1, found {replicas}")
    pods: list[dict[str, Any]] = []
    expanded = replicas is not None
    for obj in (in_namespace(o, namespace, default, path) for o in read_documents(path)):
        if template_of(obj, path) is None:
            continue
        count = replicas if replicas is not None else replicas_of(obj)
        if count is None or (count == 1 and replicas is None):
            pods.append(pod_template(obj))  # type: ignore[arg-type]
        else:
            pods += replica_pods(obj, count)
            expanded = True
            owner = replica_owner(obj)
            if owner is not None and owners is not None:
                owners.append(owner)
    if not pods and not expanded:
        raise BerthError(f"{label(path)}: no Pod or workload with a pod template found")
    return pods, expanded


def pod_of(raw: dict[str, Any], path: str) -> Pod:
    """The pod of a manifest, or an error naming the file and the object."""
    try:
        return pod_from_k8s(raw)
    except SnapshotError as exc:
        raise BerthError(f"{label(path)}: {exc.message}") from exc
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        meta = raw.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        what = f"Pod {name or '<unnamed>'}"
        raise BerthError(f"{label(path)}: {what}: a field of the wrong type ({exc})") from exc


def one_stdin(*paths: str | None) -> None:
    if sum(1 for p in paths if p == STDIN) > 1:
        raise BerthError("only one input can be read from standard input (-)")


def what_if_policies(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """The PlacementPolicy objects of the files with their file, checked; a bare policy tree has no
    namespace or selector to apply it with, so it is refused here."""
    load_policy_files(paths)  # every problem of every invalid policy, or nothing
    objects = []
    for path in paths:
        for obj in read_documents(path):
            if obj.get("kind") != "PlacementPolicy":
                raise InvalidPolicy(
                    f"{label(path)}: a {obj.get('kind') or 'bare policy tree'} is not a PlacementPolicy "
                    "object: the what-if applies PlacementPolicy objects (metadata.namespace, spec.selector)",
                    field="policy",
                )
            objects.append((path, obj))
    return objects


def apply_what_if(
    snapshot: Snapshot, policies: list[tuple[str, dict[str, Any]]], namespaces: Sequence[str]
) -> list[str]:
    """The what-if PlacementPolicies applied over the snapshot's own, as `kubectl apply` would: one
    without a namespace in the namespace asked for (one -n), else the context's; each added to its
    namespace or in place of the policy of that name. The warnings: a policy put in a namespace, one
    that governs no running pod."""
    warnings: list[str] = []
    applied = []
    for path, obj in policies:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if not meta.get("namespace"):
            where = namespaces[0] if len(namespaces) == 1 else snapshot.namespace
            obj = {**obj, "metadata": {**meta, "namespace": where}}
            warnings.append(
                f"{label(path)}: PlacementPolicy {meta.get('name') or '<unnamed>'} has no namespace: "
                f"applied in namespace {where}"
            )
        applied.append((path, snapshot.view.upsert_policy(obj)))
    for path, policy in applied:
        if not any(True for _ in governed_pods(snapshot.view, policy)):
            warnings.append(
                f"{label(path)}: PlacementPolicy {policy.namespace}/{policy.name} governs no running pod "
                f"in namespace {policy.namespace}: the what-if changes nothing there"
            )
    return warnings


def find_pod(snapshot: Snapshot, name: str, namespace: str | None, everywhere: bool) -> Pod:
    """NAMESPACE/NAME, or NAME in -n's namespace (the context's by default), or with -A in whichever
    namespace has a pod of that name (refused when several do)."""
    if "/" in name:
        key = name
    elif everywhere:
        found = sorted(p.key for p in snapshot.view.pods() if p.name == name)
        if len(found) > 1:
            raise BerthError(
                f"pods named {name} in {len(found)} namespaces ({', '.join(found)}): give NAMESPACE/NAME"
            )
        key = found[0] if found else f"<any namespace>/{name}"
    else:
        key = f"{namespace or snapshot.namespace}/{name}"
    pod = snapshot.view.pod(key)
    if pod is None:
        raise BerthError(f"no pod {key} in the cluster (terminal pods are not kept)")
    return pod


def placed_copy(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, node_name=node)


def allocator_config(path: str | None) -> AllocatorConfig | None:
    """The allocator configuration of --config (None: berth's defaults); its warnings go to stderr."""
    if path is None:
        return None
    config = load_config(path)
    for warning in config.warnings:
        print(f"berth: warning: {path}: {warning}", file=sys.stderr)
    return config


def load_live_snapshot(kubeconfig: str | None, context: str | None = None) -> Snapshot:
    """The cluster now, through the kubeconfig and context as kubectl would read them; names without
    a namespace are in the context's namespace."""
    from berth.cluster.kubeapi import load_credentials
    from berth.cluster.live import fetch_snapshot

    creds = load_credentials(kubeconfig, context)  # a bad kubeconfig or plugin fails here, in one line
    snapshot = asyncio.run(fetch_snapshot(creds))
    snapshot.namespace = creds.namespace
    return snapshot


def source_snapshot(args: argparse.Namespace) -> Snapshot:
    if args.live:
        return load_live_snapshot(args.kubeconfig, args.context)
    if args.kubeconfig or args.context:
        raise BerthError("--kubeconfig and --context go with --live")
    snapshot = load_snapshot(args.cluster)
    check_cluster(snapshot)
    return snapshot


def in_namespace(obj: dict[str, Any], namespace: str | None, default: str, path: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return obj  # the pod's own checks name what is wrong with it
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise BerthError(
            f"{label(path)}: {obj.get('kind', 'object')} {meta.get('name', '')} is in namespace "
            f"{meta['namespace']}, not {namespace} (as kubectl: the file and -n must agree)"
        )
    return {**obj, "metadata": {**meta, "namespace": meta.get("namespace") or namespace or default}}
