"""The `berth` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from berth import __version__
from berth.cluster.convert import pod_from_k8s, pod_template, replica_owner, replica_pods, replicas_of
from berth.cluster.model import Pod
from berth.cluster.snapshot import Snapshot, check_cluster, load_snapshot
from berth.engine.decide import decide
from berth.engine.decision import Decision
from berth.errors import BerthError, InvalidPolicy, SnapshotError
from berth.inputs import STDIN, label, read_documents
from berth.output import add_output_args, emit, render
from berth.pipeline import build_pipeline
from berth.preemption import preemption_events
from berth.rebalance import Limits
from berth.report import diff_table, replica_summary, summary_table, table
from berth.simulate_diff import changes
from berth.validate import DEFAULT_SCHEDULER, validate_paths
from berth.vocab.alloc.config import AllocatorConfig, load_config
from berth.vocab.policy.files import load_policy_files

EXIT_PLACED, EXIT_NO_FIT, EXIT_INVALID = 0, 1, 2
LONG_RUNNING = ("serve", "operator")
CONFIG_HELP = "allocator configuration (allocationDescription, defaults, packages); see docs/allocator.md"


def _exit_code(decisions: Sequence[Decision]) -> int:
    codes = {d.error.code for d in decisions if d.error}
    if 400 in codes:
        return EXIT_INVALID
    return EXIT_NO_FIT if 409 in codes else EXIT_PLACED


def _pods_in(path: str, namespace: str | None = None, default: str = "default") -> list[dict[str, Any]]:
    """The pods of a file; those without a namespace are in `namespace` (-n, which the file must agree
    with, as for `kubectl apply -n`), else in `default`."""
    objects = [_in_namespace(obj, namespace, default, path) for obj in read_documents(path)]
    pods = [p for p in (_template(obj, path) for obj in objects) if p is not None]
    if not pods:
        raise BerthError(f"{label(path)}: no Pod or workload with a pod template found")
    return pods


def _template(obj: dict[str, Any], path: str) -> dict[str, Any] | None:
    try:
        return pod_template(obj)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        what = obj.get("kind") or "object"
        raise BerthError(f"{label(path)}: {what}: a field of the wrong type ({exc})") from exc


def _replicas_in(
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
    for obj in (_in_namespace(o, namespace, default, path) for o in read_documents(path)):
        if _template(obj, path) is None:
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


def cmd_simulate(args: argparse.Namespace) -> int:
    _one_stdin(args.cluster, args.pod, *(args.policy or ()), args.config)
    if args.summary and args.diff:
        raise BerthError("--summary and --diff go separately: the diff is per pod, the summary per node")
    try:
        policies = load_policy_files(args.policy) if args.policy else None
    except InvalidPolicy as exc:
        for line in exc.errors:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    config = _allocator_config(args.config)
    if args.diff:
        if policies is None and config is None:
            raise BerthError("--diff compares a what-if with the cluster as it is: give --policy or --config")
        # The same seeds on both sides, so that only the what-if can tell them apart.
        seed = 0 if args.seed is None else args.seed
        snapshot = _source_snapshot(args)  # read once: a live cluster could change between two reads
        before, _ = _simulate(args, snapshot, None, None, seed, restore=True)
        after, _ = _simulate(args, snapshot, policies, config, seed)
        found = changes(before, after)
        emit(
            render(
                args,
                body=lambda: {"pods": len(after), "changes": [c.to_dict() for c in found]},
                table=lambda wide, headers: diff_table(found, len(after), headers=headers),
                names=lambda: [f"pod/{c.pod.partition('/')[2]}" for c in found],
            )
        )
        return _exit_code(after)
    decisions, expanded = _simulate(args, _source_snapshot(args), policies, config, args.seed)
    summary = replica_summary(decisions) if expanded or args.summary else None

    def body() -> Any:
        if args.summary and summary is not None:
            return {"summary": summary.to_dict()}
        if len(decisions) == 1 and summary is None:
            return decisions[0].to_dict(detail=args.detail)
        out: dict[str, Any] = {"decisions": [d.to_dict(detail=args.detail) for d in decisions]}
        if summary is not None:
            out["summary"] = summary.to_dict()
        return out

    def people(wide: bool, headers: bool) -> str:
        if args.summary and summary is not None:
            return summary_table(summary, per_node=True, headers=headers)
        parts = [table(d, detail=args.detail or wide, headers=headers) for d in decisions]
        if summary is not None:
            parts.append(summary_table(summary))
        return "\n\n".join(parts)

    emit(
        render(
            args, body=body, table=people, names=lambda: [f"node/{d.chosen}" for d in decisions if d.chosen]
        )
    )
    return _exit_code(decisions)


def _simulate(
    args: argparse.Namespace,
    snapshot: Snapshot,
    policies: list[Any] | None,
    config: AllocatorConfig | None,
    seed: int | None,
    *,
    restore: bool = False,
) -> tuple[list[Decision], bool]:
    """The pods of --pod placed in order on the snapshot, each seeing the ones before; and whether a
    workload was expanded into replicas. With `restore`, the snapshot is left as it was found."""
    if policies is not None:
        # Like Drove's simulate-placement --placement-policy: these govern every simulated pod.
        snapshot.view.override_policies(policies)
    pipeline = build_pipeline(config, offline=True)
    decisions = []
    owners: list[dict[str, Any]] = []
    raws, expanded = _replicas_in(args.pod, args.replicas, args.namespace, snapshot.namespace, owners)
    for owner in owners:  # the replicas' controller, for kube's default spreading over them
        snapshot.view.upsert_workload(owner)
    placed: list[Pod] = []
    replaced: list[Pod] = []
    try:
        for i, raw in enumerate(raws):
            pod = _pod_of(raw, args.pod)
            if expanded:
                # A replica stands in for a running pod of its name, as a StatefulSet's recreated pod
                # does: the old one is no neighbour of it or of the replicas after it.
                old = snapshot.view.remove_pod(pod.key)
                if old is not None:
                    replaced.append(old)
            decision = decide(pod, snapshot.view, pipeline, seed=None if seed is None else seed + i)
            if decision.error is not None and decision.error.code == 409:
                # A pod that fits only by evicting lower-priority pods: where, and whom (exit code kept).
                more = preemption_events(pod, decision, snapshot.view, pipeline, detail=args.detail)
                decision.events = (*decision.events, *more)
            decisions.append(decision)
            if decision.chosen:
                # Later pods in the same file see this one where it was placed (a burst).
                placed.append(_placed(pod, decision.chosen))
                snapshot.view.add_pod(placed[-1])
    finally:
        if restore:
            for pod in placed:
                snapshot.view.remove_pod(pod.key)
            for pod in replaced:
                snapshot.view.add_pod(pod)
            if policies is not None:
                snapshot.view.override_policies(None)
    return decisions, expanded


def _pod_of(raw: dict[str, Any], path: str) -> Pod:
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


def _one_stdin(*paths: str | None) -> None:
    if sum(1 for p in paths if p == STDIN) > 1:
        raise BerthError("only one input can be read from standard input (-)")


def cmd_audit(args: argparse.Namespace) -> int:
    from berth.audit import FINDING_KINDS, audit, governed_pods
    from berth.report import audit_table

    fail_on = _fail_on(args.fail_on, FINDING_KINDS)
    _one_stdin(args.cluster, *(args.policy or ()), args.config)
    try:
        policies = _what_if_policies(args.policy or [])
    except InvalidPolicy as exc:
        for line in exc.errors or [exc.message]:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    config = _allocator_config(args.config)
    snapshot = _source_snapshot(args)
    namespaces = () if args.all_namespaces else tuple(args.namespace or ())
    warnings: list[str] = []
    applied = []
    for path, obj in policies:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if not meta.get("namespace"):
            # As `kubectl apply -f` would: in the namespace asked for (one -n), else the context's.
            where = namespaces[0] if len(namespaces) == 1 else snapshot.namespace
            obj = {**obj, "metadata": {**meta, "namespace": where}}
            warnings.append(
                f"{label(path)}: PlacementPolicy {meta.get('name') or '<unnamed>'} has no namespace: "
                f"applied in namespace {where}"
            )
        # As `kubectl apply` would: added to its namespace, or in place of the policy of that name.
        applied.append((path, snapshot.view.upsert_policy(obj)))
    for path, policy in applied:
        if not any(True for _ in governed_pods(snapshot.view, policy)):
            warnings.append(
                f"{label(path)}: PlacementPolicy {policy.namespace}/{policy.name} governs no running pod "
                f"in namespace {policy.namespace}: the what-if changes nothing there"
            )
    report = audit(snapshot.view, build_pipeline(config, offline=False), namespaces=namespaces)
    report.warnings.extend(warnings)
    emit(
        render(
            args,
            body=report.to_dict,
            table=lambda wide, headers: audit_table(report, wide=wide, headers=headers),
            names=lambda: [f"pod/{key.partition('/')[2]}" for key in report.pods_found()],
        )
    )
    return EXIT_NO_FIT if report.fails(fail_on) else EXIT_PLACED


def _fail_on(value: str, kinds: Sequence[str]) -> frozenset[str]:
    """--fail-on: a comma list of kinds of finding, `all` or `none`."""
    if value == "all":
        return frozenset(kinds)
    if value == "none":
        return frozenset()
    wanted = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = sorted(wanted - set(kinds))
    if unknown or not wanted:
        raise BerthError(
            f"--fail-on: unknown kind {(unknown or [value])[0]!r}; give all, none, or a comma list of "
            + ", ".join(kinds)
        )
    return wanted


def _what_if_policies(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
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


def cmd_explain(args: argparse.Namespace) -> int:
    from berth.extender.placer import seed_for

    snapshot = _source_snapshot(args)
    pod = _find_pod(snapshot, args.pod, args.namespace, args.all_namespaces)
    key = pod.key
    record = _record(pod)
    if args.seed is not None:
        seed = args.seed
    elif isinstance(record.get("seed"), int):
        seed = record["seed"]
    else:
        seed = seed_for(pod)
    config = _allocator_config(args.config)
    decision = decide(pod, snapshot.view, build_pipeline(config, offline=True), seed=seed)
    where = f"is on {pod.node_name}" if pod.node_name else "is not placed"
    if decision.chosen and pod.node_name:
        verdict = "the same node" if decision.chosen == pod.node_name else f"{decision.chosen}, another node"
        summary = f"{key} {where}; berth, asked now with the pod's own seed {seed}, chooses {verdict}"
    else:
        answer = decision.error.message if decision.error else f"would place it on {decision.chosen}"
        summary = f"{key} {where}; berth, asked now: {answer}"
    differs = _replay_differs(record, decision, build_pipeline(config, offline=False).digest)

    def body() -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": key,
            "node": pod.node_name or None,
            "decision": decision.to_dict(detail=True),
        }
        if record:
            out["record"] = record
            out["replayDiffers"] = differs
        return out

    def people(wide: bool, headers: bool) -> str:
        lines = [summary]
        if record:
            lines.append(f"recorded at binding: {_record_line(record)}")
            lines.append(
                "the replay now differs: " + "; ".join(differs)
                if differs
                else "the replay agrees with the record"
            )
        return "\n".join([*lines, "", table(decision, detail=args.detail or wide, headers=headers)])

    emit(
        render(
            args,
            body=body,
            table=people,
            names=lambda: [f"node/{decision.chosen}"] if decision.chosen else [],
        )
    )
    return _exit_code([decision])


def _find_pod(snapshot: Snapshot, name: str, namespace: str | None, everywhere: bool) -> Pod:
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


def _record(pod: Pod) -> dict[str, Any]:
    """The berth.dev/placement record on a pod ({} when it has none or it cannot be read)."""
    if not pod.record:
        return {}
    try:
        record = json.loads(pod.record)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _record_line(record: dict[str, Any]) -> str:
    parts = [f"node {record.get('node')}"]
    if "score" in record:
        parts.append(f"score {record['score']}")
    if "margin" in record:
        parts.append(f"margin {record['margin']}")
    if record.get("top"):
        parts.append("top " + ", ".join(f"{n} ({s})" for n, s in record["top"]))
    if "feasible" in record:
        parts.append(f"{record['feasible']} feasible")
    if isinstance(record.get("setAside"), dict) and record["setAside"]:
        shown = ", ".join(f"{n} by {step}" for step, n in record["setAside"].items())
        parts.append(f"set aside: {shown}")
    if record.get("noChoice"):
        parts.append("had no choice")
    parts.append(f"seed {record.get('seed')}, chain {record.get('chain')}")
    return "; ".join(parts)


def _replay_differs(record: dict[str, Any], decision: Decision, digest: str) -> list[str]:
    """What the replay says that the record at binding did not."""
    if not record:
        return []
    out = []
    if record.get("node") != decision.chosen:
        now = decision.chosen or "no node"
        out.append(f"it chooses {now}, the record says {record.get('node')}")
    if record.get("chain") and record.get("chain") != digest:
        out.append(f"the chain or configuration changed (digest {digest}, recorded {record.get('chain')})")
    return out


def _placed(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, node_name=node)


def _allocator_config(path: str | None) -> AllocatorConfig | None:
    """The allocator configuration of --config (None: berth's defaults); its warnings go to stderr."""
    if path is None:
        return None
    config = load_config(path)
    for warning in config.warnings:
        print(f"berth: warning: {path}: {warning}", file=sys.stderr)
    return config


def cmd_capacity(args: argparse.Namespace) -> int:
    from berth.capacity import capacity
    from berth.report import capacity_table

    if args.pod is None:
        return _room_left(args)
    _one_stdin(args.cluster, args.pod, *(args.policy or ()), args.config)
    policies = load_policy_files(args.policy) if args.policy else None  # InvalidPolicy: main says it
    if args.max < 1:
        raise BerthError(f"--max should be at least 1, found {args.max}")
    pipeline = build_pipeline(_allocator_config(args.config), offline=True)
    snapshot = _source_snapshot(args)
    if policies is not None:
        snapshot.view.override_policies(policies)
    reports = []
    for raw in _pods_in(args.pod, args.namespace, snapshot.namespace):
        # Each shape counted on the cluster as it is: a fresh view per pod of the file.
        view = snapshot.view if not reports else _source_snapshot(args).view
        if policies is not None:
            view.override_policies(policies)
        reports.append(capacity(_pod_of(raw, args.pod), view, pipeline, limit=args.max))
    emit(
        render(
            args,
            body=lambda: (
                reports[0].to_dict() if len(reports) == 1 else {"pods": [r.to_dict() for r in reports]}
            ),
            table=lambda wide, headers: "\n\n".join(
                capacity_table(r, wide=wide, headers=headers) for r in reports
            ),
            names=lambda: list(dict.fromkeys(f"node/{n.name}" for r in reports for n in r.nodes if n.fits)),
        )
    )
    return EXIT_INVALID if any(r.invalid for r in reports) else 0


def _room_left(args: argparse.Namespace) -> int:
    """berth capacity without --pod: the room each node and zone has left (no shape to count)."""
    from berth.capacity import room_left
    from berth.report import room_table

    if args.policy or args.config:
        raise BerthError("--policy and --config count pods of a shape: they go with --pod")
    found = room_left(_source_snapshot(args).view)
    emit(
        render(
            args,
            body=found.to_dict,
            table=lambda wide, headers: room_table(found, headers=headers),
            names=lambda: [f"node/{n.name}" for n in found.nodes if n.takes_pods and n.pods],
        )
    )
    return 0


# -- berth rebalance ------------------------------------------------------------------------
REBALANCE_DEFAULTS = Limits()


def _add_rebalance_parser(sub: Any, prog: str) -> None:
    reb = sub.add_parser(
        "rebalance",
        help="move the running pods whose node breaks their hard rules",
        description="Plan the moves that take running pods off the nodes that break their hard rules (what "
        "berth audit reports), each only when berth would place its replacement on another node, with the "
        "other moves of the round counted; print the plan, and with --apply evict the planned pods through "
        "the Eviction API, honouring PodDisruptionBudgets (the plan says which budget allows no disruption "
        "now). berth-scheduler then places each replacement on its planned node. Pods without a "
        'controller, DaemonSet, static and system pods, and pods annotated berth.dev/rebalance: "never" are '
        "not moved. As kubectl, it acts on the namespace of the kubeconfig context (of a snapshot: "
        "default) unless -n or -A says otherwise. Exit 0 when no pod breaks a rule, 1 when some do, 2 for "
        "bad input.",
        epilog=_examples(
            prog,
            "rebalance --live -A",
            "rebalance --live -n shop -o json",
            "rebalance --live -n shop --apply",
            "rebalance --cluster cluster.yaml -A --policy one-per-host.yaml",
        ),
        formatter_class=_Formatter,
    )
    _add_cluster_source(reb, namespace=False)
    where = reb.add_mutually_exclusive_group()
    where.add_argument(
        "-n",
        "--namespace",
        action="append",
        metavar="NAME",
        help="this namespace (repeatable); default: the kubeconfig context's, as kubectl",
    )
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    reb.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: PlacementPolicy objects applied over the cluster's own (repeatable)",
    )
    reb.add_argument("--config", metavar="FILE", help=CONFIG_HELP + "; the what-if of another one")
    reb.add_argument("--apply", action="store_true", help="evict the planned pods (needs --live)")
    reb.add_argument(
        "--include-bare", action="store_true", help="also evict pods that no controller will replace"
    )
    for flag, default, what in (
        ("--max", REBALANCE_DEFAULTS.per_round, "evictions per round"),
        ("--max-per-node", REBALANCE_DEFAULTS.per_node, "evictions from one node per round"),
        ("--max-per-namespace", REBALANCE_DEFAULTS.per_namespace, "evictions in one namespace per round"),
    ):
        reb.add_argument(flag, type=_count, default=default, metavar="N", help=f"{what} (default {default})")
    reb.add_argument(
        "--pushgateway",
        metavar="URL",
        help="with --apply: push the eviction counters to a Prometheus Pushgateway",
    )
    reb.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 when pods break rules too (a CronJob's round then fails only on an error)",
    )
    add_output_args(reb, wide_help="the same as table", name_help="pod/NAME of each pod to move")
    reb.set_defaults(func=cmd_rebalance)


def _count(text: str) -> int:
    """A whole number of 0 or more, as an option's value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def cmd_rebalance(args: argparse.Namespace) -> int:
    from berth.rebalance import plan
    from berth.report import plan_table

    if args.apply and not args.live:
        raise BerthError("--apply evicts pods of a live cluster: it goes with --live")
    try:
        policies = _what_if_policies(args.policy or [])
    except InvalidPolicy as exc:
        for line in exc.errors or [exc.message]:
            print(f"berth: {line}", file=sys.stderr)
        return EXIT_INVALID
    config = _allocator_config(args.config)
    snapshot = _source_snapshot(args)
    for obj in policies:
        snapshot.view.upsert_policy(obj)
    limits = Limits(per_node=args.max_per_node, per_namespace=args.max_per_namespace, per_round=args.max)
    found = plan(
        snapshot.view,
        build_pipeline(config, offline=False),
        build_pipeline(config, offline=True),
        namespaces=() if args.all_namespaces else (args.namespace or [snapshot.namespace]),
        limits=limits,
        include_bare=args.include_bare,
    )
    outcomes = asyncio.run(_evict(args, found.moves)) if args.apply and found.moves else []

    def body() -> dict[str, Any]:
        out = found.to_dict() | {"applied": args.apply}
        return out | ({"evictions": [o.to_dict() for o in outcomes]} if args.apply else {})

    emit(
        render(
            args,
            body=body,
            table=lambda wide, headers: plan_table(found, applied=args.apply, outcomes=outcomes),
            names=lambda: [f"pod/{m.pod.partition('/')[2]}" for m in found.moves],
        )
    )
    return EXIT_PLACED if found.clean or args.exit_zero else EXIT_NO_FIT


async def _evict(args: argparse.Namespace, moves: list[Any]) -> list[Any]:
    from berth.cluster.kubeapi import KubeClient, load_credentials
    from berth.evict import evict, push_metrics

    client = KubeClient(load_credentials(args.kubeconfig, args.context))
    try:
        outcomes = await evict(client, moves)
    finally:
        await client.aclose()
    if args.pushgateway:
        push_metrics(args.pushgateway)
    return outcomes


def load_live_snapshot(kubeconfig: str | None, context: str | None = None) -> Snapshot:
    """The cluster now, through the kubeconfig and context as kubectl would read them; names without
    a namespace are in the context's namespace."""
    from berth.cluster.kubeapi import load_credentials
    from berth.cluster.live import fetch_snapshot

    creds = load_credentials(kubeconfig, context)  # a bad kubeconfig or plugin fails here, in one line
    snapshot = asyncio.run(fetch_snapshot(creds))
    snapshot.namespace = creds.namespace
    return snapshot


def _source_snapshot(args: argparse.Namespace) -> Snapshot:
    if args.live:
        return load_live_snapshot(args.kubeconfig, args.context)
    if args.kubeconfig or args.context:
        raise BerthError("--kubeconfig and --context go with --live")
    snapshot = load_snapshot(args.cluster)
    check_cluster(snapshot)
    return snapshot


def _in_namespace(obj: dict[str, Any], namespace: str | None, default: str, path: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return obj  # the pod's own checks name what is wrong with it
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise BerthError(
            f"{label(path)}: {obj.get('kind', 'object')} {meta.get('name', '')} is in namespace "
            f"{meta['namespace']}, not {namespace} (as kubectl: the file and -n must agree)"
        )
    return {**obj, "metadata": {**meta, "namespace": meta.get("namespace") or namespace or default}}


def cmd_serve(args: argparse.Namespace) -> int:
    from berth.extender.sample import parse_profiles
    from berth.extender.serve import MetricsPort, serve

    if bool(args.tls_cert) != bool(args.tls_key):
        raise BerthError("--tls-cert and --tls-key go together")
    if args.follow_lease is not None:
        namespace, _, name = args.follow_lease.partition("/")
        if not namespace or not name:
            raise BerthError(f"--follow-lease should be NAMESPACE/NAME, found {args.follow_lease!r}")
        if args.cluster:
            raise BerthError("--follow-lease goes with a live cluster, not --cluster")
    if bool(args.metrics_cert) != bool(args.metrics_key):
        raise BerthError("--metrics-cert and --metrics-key go together")
    if args.metrics_port and args.metrics_auth == "delegated" and args.cluster:
        raise BerthError(
            "--metrics-auth delegated asks the API server who may scrape: with --cluster, use none"
        )
    config = _allocator_config(args.config)
    try:
        kube_sample = parse_profiles(args.kube_sample)
    except ValueError as exc:
        raise BerthError(str(exc)) from None
    metrics = None
    if args.metrics_port:
        metrics = MetricsPort(
            args.metrics_port, args.metrics_host, args.metrics_auth, args.metrics_cert, args.metrics_key
        )
    serve(
        metrics=metrics,
        host=args.host,
        port=args.port,
        online=build_pipeline(config, offline=False),
        offline=build_pipeline(config, offline=True),
        cluster_file=args.cluster,
        kubeconfig=args.kubeconfig,
        context=args.context,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        log_level=args.log_level,
        reservation_seconds=args.reservation_seconds,
        placement_events=_placement_events(args.placement_events),
        follow_lease=args.follow_lease,
        identity=args.identity,
        kube_sample=kube_sample,
    )
    return 0


def _placement_events(value: str) -> tuple[str, ...]:
    from berth.extender.placer import PLACEMENT_EVENTS

    if value in ("", "none"):
        return ()
    if value == "all":
        return PLACEMENT_EVENTS
    wanted = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [v for v in wanted if v not in PLACEMENT_EVENTS]
    if unknown:
        raise BerthError(
            f"--placement-events: unknown event {unknown[0]!r}; "
            f"give none, all, or a comma list of {', '.join(PLACEMENT_EVENTS)}"
        )
    return wanted


def cmd_operator(args: argparse.Namespace) -> int:
    from berth.operator.run import OperatorOptions, run

    if not args.webhook_self_signed and bool(args.webhook_cert) != bool(args.webhook_key):
        raise BerthError("--webhook-cert and --webhook-key go together (or use --webhook-self-signed)")
    if not args.webhook_self_signed and not args.webhook_cert:
        raise BerthError(
            "the webhook needs TLS: give --webhook-cert and --webhook-key, or --webhook-self-signed"
        )
    options = OperatorOptions(
        namespaces=tuple(args.namespace),
        peering=None if args.standalone else args.peering,
        priority=args.priority,
        webhook_port=args.webhook_port,
        webhook_addr=args.webhook_addr,
        webhook_host=args.webhook_host,
        webhook_cert=args.webhook_cert,
        webhook_key=args.webhook_key,
        webhook_ca=args.webhook_ca,
        self_signed=args.webhook_self_signed,
        manage_webhooks=args.manage_webhooks,
        liveness=args.liveness,
        config=_allocator_config(args.config),
    )
    run(options, kubeconfig=args.kubeconfig, context=args.context)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    report = validate_paths(args.files, config=_allocator_config(args.config), scheduler=args.scheduler_name)
    failed = bool(report.warnings) and args.strict
    code = EXIT_INVALID if report.errors else (1 if failed else 0)
    if args.output == "json":
        print(json.dumps({**report.to_dict(), "exit": code}, indent=2))
        return code
    for finding in report.warnings:
        print(f"warning: {finding.line()}")
    for finding in report.errors:
        print(finding.line())
    checked = len(report.checked)
    if report.errors:
        print(f"{len(report.errors)} problem(s) in {checked} object(s)", file=sys.stderr)
    elif failed:
        print(
            f"{len(report.warnings)} warning(s) in {checked} object(s), failing with --strict",
            file=sys.stderr,
        )
    else:
        warned = f", {len(report.warnings)} warning(s)" if report.warnings else ""
        print(f"ok: {checked} object(s) checked{warned}")
    return code


def cmd_version(args: argparse.Namespace) -> int:
    from berth.version import version_info

    info = version_info()
    emit(
        render(
            args,
            body=lambda: info,
            table=lambda wide, headers: f"berth {info['version']} (commit {info['commit']})",
            names=lambda: [],
        )
    )
    return 0


SHELLS = ("bash", "zsh", "fish")


def cmd_completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import shtab

    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


def add_kubeconfig_args(
    parser: argparse.ArgumentParser, *, namespace: bool = False, live: bool = False
) -> None:
    """--kubeconfig FILE and --context NAME (and -n/--namespace NAME), taken as kubectl takes them: the
    file, else $KUBECONFIG's files merged, else ~/.kube/config, else the pod's service account."""
    where = "with --live: " if live else ""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{where}the kubeconfig (default: $KUBECONFIG, merged; ~/.kube/config; in a pod, its "
        "service account)",
    )
    parser.add_argument("--context", metavar="NAME", help=f"{where}the kubeconfig context (default: current)")
    if namespace:
        parser.add_argument(
            "-n",
            "--namespace",
            metavar="NAME",
            help="namespace of names and pods that have none (default: the context's namespace with --live, "
            "else default)",
        )


def _add_cluster_source(
    parser: argparse.ArgumentParser, *, namespace: bool = True, all_namespaces: bool = False
) -> None:
    """--cluster FILE or --live [--kubeconfig FILE --context NAME]: where the offline commands read the
    cluster."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster", metavar="FILE", help="snapshot: kubectl get nodes,pods -A -o yaml (- reads stdin)"
    )
    source.add_argument(
        "--live", action="store_true", help="read the cluster through the kubeconfig, change nothing"
    )
    add_kubeconfig_args(parser, namespace=namespace, live=True)
    if all_namespaces:
        parser.add_argument(
            "-A", "--all-namespaces", action="store_true", help="find NAME in whichever namespace has it"
        )


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; the examples epilog as written, one command a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own error, shown with its own usage
    (argparse would pass it up to `berth`, whose usage says nothing of the subcommand's options)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _examples(prog: str, *commands: str) -> str:
    return "examples:\n" + "\n".join(
        f"  {c}" if c.startswith("kubectl ") else f"  {prog} {c}" for c in commands
    )


def build_parser(prog: str = "berth") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Placement policies for Kubernetes.",
        epilog=_examples(prog, "version", "completion bash > /etc/bash_completion.d/berth"),
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)

    sim = sub.add_parser(
        "simulate",
        help="where would this pod go, and why",
        description="Decide where a pod would go on a cluster snapshot, changing nothing. Exit 0 when "
        "placed, 1 when nothing fits (409) for any pod, 2 when the specification is invalid (400). Several "
        "pods in the pod file are placed in order, each seeing the ones before; a Deployment, ReplicaSet "
        "or StatefulSet places its replicas (a Job its parallelism) that way, as kube-scheduler would "
        "take them, and the table ends with a summary.",
        epilog=_examples(
            prog,
            "simulate --cluster cluster.yaml --pod web.yaml",
            "simulate --live -n shop --pod web.yaml -o wide",
            "simulate --cluster cluster.yaml --pod api.yaml --replicas 200 --summary",
            "simulate --live --pod api.yaml --policy one-per-host.yaml --diff",
            "kubectl get nodes,pods -A -o yaml | berth simulate --cluster - --pod web.yaml",
        ),
    )
    _add_cluster_source(sim)
    sim.add_argument(
        "--pod",
        required=True,
        metavar="FILE",
        help="a Pod, or a workload with a pod template (- reads stdin)",
    )
    sim.add_argument(
        "--replicas",
        type=int,
        metavar="N",
        help="place N pods of each object (default: a workload's spec.replicas, a Job's parallelism)",
    )
    sim.add_argument("--seed", type=int, help="make every random choice reproducible")
    add_output_args(sim, wide_help="the table with --detail", name_help="node/NAME of each placed pod")
    sim.add_argument("--detail", action="store_true", help="show the chain and what each step did")
    sim.add_argument(
        "--summary",
        action="store_true",
        help="only how many pods went to each node and how many were placed and refused, not one table "
        "per pod (for workloads, --replicas N)",
    )
    sim.add_argument(
        "--diff",
        action="store_true",
        help="with --policy or --config: only the pods whose node or verdict the what-if changes, before "
        "and after, and why (both sides with the same seeds: --seed, else 0)",
    )
    sim.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help='a PlacementPolicy or a bare policy tree {"type": ...}; repeatable. Given policies govern '
        "every simulated pod, in place of the cluster's selectors and annotations",
    )
    sim.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    sim.set_defaults(func=cmd_simulate)

    cap = sub.add_parser(
        "capacity",
        help="how many more pods of this shape fit, per node and in the cluster",
        description="Count how many more pods shaped like the given pod fit by placing them one after "
        "another, as simulate would, until one is refused: N more fit means simulate places N and refuses "
        "the next. Per node: how many went there, and why it refused the next one. Changes nothing.",
        epilog=_examples(
            prog,
            "capacity --cluster cluster.yaml --pod app-1.yaml",
            "capacity --live -n shop --pod app-1.yaml --max 500 -o json",
        ),
    )
    _add_cluster_source(cap)
    cap.add_argument(
        "--pod",
        metavar="FILE",
        help="a Pod, or a workload with a pod template (- reads stdin); without it, the room left per "
        "node and per zone (CPU, memory, pods)",
    )
    cap.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    cap.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: policies that govern the counted pods, as for simulate (repeatable)",
    )
    cap.add_argument(
        "--max", type=int, default=10_000, metavar="N", help="stop counting at N pods (default 10000)"
    )
    add_output_args(
        cap,
        wide_help="and the decision that refuses the next pod",
        name_help="node/NAME of each node that fits one",
    )
    cap.set_defaults(func=cmd_capacity)

    exp = sub.add_parser(
        "explain",
        help="why a pod of the cluster is where it is, or why it is Pending",
        description="Replay the decision for a pod that is in the cluster, as the cluster is now, with the "
        "pod's own seed (the one the extender used): the verdict, the record written at binding and the "
        "table of nodes; --detail adds the steps that acted. The pod is never its own neighbour. Exit "
        "codes as for simulate.",
        epilog=_examples(
            prog,
            "explain shop/web-1 --live",
            "explain shop/web-1 --live --detail",
            "explain web-1 -A --live -o json",
            "explain web-1 -n shop --cluster c.yaml",
        ),
    )
    exp.add_argument("pod", metavar="[NAMESPACE/]NAME")
    _add_cluster_source(exp, all_namespaces=True)
    exp.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    exp.add_argument("--seed", type=int, help="another seed than the pod's own")
    exp.add_argument("--detail", action="store_true", help="show the steps that removed or scored nodes")
    add_output_args(exp, wide_help="the table with --detail", name_help="node/NAME berth chooses now")
    exp.set_defaults(func=cmd_explain)

    aud = sub.add_parser(
        "audit",
        help="which running pods break their rules now, or would after a change",
        description="Evaluate every bound pod that carries berth rules or is governed by a PlacementPolicy "
        "against the cluster as it is now, through the same engine (the pod is never its own neighbour): "
        "hard rules its node breaks, pods no node would take at their next reschedule, deprecated "
        "weighted affinity, invalid specifications. With --policy and --config, as if those policies or "
        "that allocator configuration were in force. Reads the cluster, changes nothing. Exit 0 when "
        "clean, 1 when anything --fail-on names is found, 2 for bad input.",
        epilog=_examples(
            prog,
            "audit --live -A",
            "audit --live -n shop --policy api-ssd.yaml",
            "audit --cluster cluster.yaml --fail-on violation,refused -o json",
        ),
    )
    _add_cluster_source(aud, namespace=False)  # audit's -n takes several namespaces
    aud.add_argument(
        "--policy",
        action="append",
        metavar="FILE",
        help="what-if: PlacementPolicy objects applied over the cluster's own, as kubectl apply would "
        "(repeatable)",
    )
    aud.add_argument("--config", metavar="FILE", help=CONFIG_HELP + "; the what-if of another one")
    where = aud.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--namespace", action="append", metavar="NAME", help="audit only this namespace (repeatable)"
    )
    where.add_argument(
        "-A", "--all-namespaces", action="store_true", help="audit every namespace (the default without -n)"
    )
    aud.add_argument(
        "--fail-on",
        default="all",
        metavar="KINDS",
        help="the kinds of finding that exit 1: a comma list of violation, refused, deprecated, invalid; "
        "all (default) or none (always exit 0 unless the input is bad)",
    )
    add_output_args(
        aud,
        wide_help="one row per finding, with the pods it collides with",
        name_help="pod/NAME of each pod with a finding",
    )
    aud.set_defaults(func=cmd_audit)

    _add_rebalance_parser(sub, prog)

    srv = sub.add_parser(
        "serve",
        help="run the scheduler extender",
        description="Serve the kube-scheduler extender verbs (POST /filter /prioritize /bind /preempt), the "
        "Placement Simulation API (POST /simulate), /healthz, /readyz and /metrics. The cluster comes from "
        "list+watch through the kubeconfig (or the pod's service account), or from a snapshot file.",
        epilog=_examples(
            prog,
            "serve --cluster examples/cluster.yaml",
            "serve --port 8888 --kube-sample berth-scheduler=0,berth-scheduler-exhaustive=100",
        ),
    )
    srv.add_argument("--cluster", metavar="FILE", help="serve from a snapshot file instead of a live cluster")
    add_kubeconfig_args(srv)
    srv.add_argument(
        "--host", default="127.0.0.1", help="loopback address the verbs listen on (default 127.0.0.1)"
    )
    srv.add_argument("--port", type=int, default=8888)
    srv.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", metavar="FILE")
    srv.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    srv.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    srv.add_argument(
        "--kube-sample",
        metavar="PROFILE=PERCENT,...",
        default="",
        help="kube-scheduler's percentageOfNodesToScore for each profile that asks this extender (0: "
        "kube's adaptive default). For a pod of such a profile whose rules few nodes meet, berth looks "
        "past kube's sample and hands the pod over to a node outside it; a profile not listed is "
        "taken as asking about every node",
    )
    srv.add_argument(
        "--reservation-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="how long a placement the watch has not shown bound counts on its node before berth asks the "
        "API server whether it is bound (default 30; it is undone only when the API server says not bound)",
    )
    srv.add_argument(
        "--placement-events",
        default="none",
        metavar="LIST",
        help="events written on each placed pod: none (default; the placement record rides on the pod as "
        "the berth.dev/placement annotation), all, or a comma list of Placed, HadNoChoice, FinalCandidates, "
        "HighestAffinity. Refusals and invalid specifications are always events",
    )
    srv.add_argument(
        "--follow-lease",
        metavar="NAMESPACE/NAME",
        help="the Lease the kube-scheduler beside berth leads by: filter is answered only while it holds "
        "it (after listing the cluster again when it takes it) and bind is refused once it no longer does",
    )
    srv.add_argument(
        "--identity",
        metavar="NAME",
        help="with --follow-lease: the scheduler's identity in the Lease, before its '_' (default: this "
        "host's name, which kube-scheduler uses)",
    )
    srv.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve /metrics (to bearer tokens the API server allows to get /metrics) and /healthz "
        "/livez /readyz (to anyone) over HTTPS on this port too; never the verbs (default 0: off)",
    )
    srv.add_argument(
        "--metrics-host", default="0.0.0.0", help="address of the metrics port (default 0.0.0.0)"
    )
    srv.add_argument(
        "--metrics-auth",
        choices=("delegated", "none"),
        default="delegated",
        help="delegated (default): TokenReview and SubjectAccessReview, as kube-scheduler; none: local runs",
    )
    srv.add_argument(
        "--metrics-cert", metavar="FILE", help="certificate of the metrics port (default: self-signed)"
    )
    srv.add_argument("--metrics-key", metavar="FILE")
    srv.set_defaults(func=cmd_serve)

    op = sub.add_parser(
        "operator",
        help="run the operator: PlacementPolicy status and admission webhooks",
        description="Compile every PlacementPolicy and write its Ready condition, observedGeneration and "
        "governed pod count; serve the admission webhooks that refuse pods, workloads and policies with "
        "invalid berth specifications (HTTPS).",
        epilog=_examples(prog, "operator --standalone --webhook-self-signed --manage-webhooks"),
    )
    add_kubeconfig_args(op)
    op.add_argument("--namespace", action="append", default=[], help="watch only this namespace (repeatable)")
    peers = op.add_mutually_exclusive_group()
    peers.add_argument("--peering", default="berth", help="kopf peering name: several replicas, one active")
    peers.add_argument("--standalone", action="store_true", help="one replica, no peering objects")
    op.add_argument(
        "--priority",
        type=int,
        default=0,
        help="peering priority (default: drawn at random, so one replica is active)",
    )
    op.add_argument(
        "--config",
        metavar="FILE",
        help=CONFIG_HELP + ": the one berth serve schedules with, so that the webhook refuses a pod naming "
        "a package it does not define, or whose limits break the package's RAM bounds",
    )
    op.add_argument("--webhook-addr", default="0.0.0.0", help="address the webhook listens on")
    op.add_argument("--webhook-port", type=int, default=9443)
    op.add_argument("--webhook-host", help="host name the API server uses to reach the webhook")
    op.add_argument("--webhook-cert", metavar="FILE", help="serving certificate (e.g. from cert-manager)")
    op.add_argument("--webhook-key", metavar="FILE")
    op.add_argument("--webhook-ca", metavar="FILE", help="CA bundle for a managed webhook configuration")
    op.add_argument(
        "--webhook-self-signed", action="store_true", help="generate a CA and certificate (local runs)"
    )
    op.add_argument(
        "--manage-webhooks",
        action="store_true",
        help="create the ValidatingWebhookConfiguration (local runs)",
    )
    op.add_argument(
        "--liveness", metavar="URL", help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz"
    )
    op.set_defaults(func=cmd_operator)

    val = sub.add_parser(
        "validate",
        help="check berth annotations in manifests without a cluster",
        description="Check the berth annotations of pods and workloads, PlacementPolicies and allocator "
        "configurations in manifest files. Prints every problem and every warning (berth annotations "
        "that will not apply: misspelt, deprecated, outside the pod template, on pods another scheduler "
        "places; a file with nothing for berth). Exit 2 when there is any problem, 1 with --strict when "
        "there is a warning, else 0.",
        epilog=_examples(prog, "validate deploy/*.yaml", "validate --config allocator.yaml app-1.yaml"),
    )
    val.add_argument("files", nargs="+", metavar="FILE", help="manifest files; - reads standard input")
    val.add_argument(
        "--config", metavar="FILE", help="an allocator configuration whose packages the pods may name"
    )
    val.add_argument(
        "--scheduler-name",
        default=DEFAULT_SCHEDULER,
        metavar="NAME",
        help="the scheduler berth runs as, which pods with berth rules must name "
        f"(default {DEFAULT_SCHEDULER})",
    )
    val.add_argument("--strict", action="store_true", help="fail (exit 1) on warnings too")
    val.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: the objects checked, the errors and the warnings, each with file, object, field and rule",
    )
    val.set_defaults(func=cmd_validate)

    ver = sub.add_parser(
        "version",
        help="berth's version and the commit it was built from",
        description="Print berth's version and the git commit it was built from (the image's build "
        "argument BERTH_COMMIT, or the checkout berth runs from; unknown otherwise).",
        epilog=_examples(prog, "version", "version -o json"),
    )
    ver.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    ver.set_defaults(func=cmd_version)

    comp = sub.add_parser(
        "completion",
        help="the shell completion script for bash, zsh or fish",
        description="Print a script that completes berth's commands and options in the shell.",
        epilog=_examples(
            prog,
            "completion bash > ~/.local/share/bash-completion/completions/berth",
            'completion zsh > "${fpath[1]}/_berth"',
            "completion fish > ~/.config/fish/completions/berth.fish",
        ),
    )
    comp.add_argument("shell", choices=SHELLS)
    comp.set_defaults(func=lambda args: cmd_completion(args, parser))
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "berth") -> int:
    args = build_parser(prog).parse_args(argv)
    if args.command not in LONG_RUNNING and hasattr(signal, "SIGPIPE"):
        # `berth simulate ... | head` ends quietly. Never for the servers: a client that hangs up
        # mid-answer would kill them.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return args.func(args)
    except BerthError as exc:
        lines = getattr(exc, "errors", None) or [exc.message]
        for line in lines if len(lines) > 1 else [exc.message]:
            print(f"berth: {_one_line(line)}", file=sys.stderr)
        return EXIT_INVALID
    except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
        if args.command in LONG_RUNNING or os.environ.get(TRACEBACK_ENV):
            raise
        # An object of an input with a field of an unexpected type that no check named: one line, as
        # for any bad input; BERTH_TRACEBACK=1 shows where it was found.
        print(
            f"berth: {args.command}: cannot use the input: {type(exc).__name__}: {_one_line(str(exc))} "
            f"({TRACEBACK_ENV}=1 shows where)",
            file=sys.stderr,
        )
        return EXIT_INVALID


TRACEBACK_ENV = "BERTH_TRACEBACK"


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text else text


if __name__ == "__main__":
    sys.exit(main())
