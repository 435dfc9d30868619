"""`berth check`: whether berth works on the cluster of the kubeconfig, one line a check.

Modelled on `linkerd check` and `cilium status`: each line is a check with ok, warn or fail and, when not
ok, what to do. The checks, in the order a problem in one explains the next:
- the PlacementPolicy CRD is installed, established, and serves what this berth reads;
- the operator's webhooks are registered and answer (a server-side dry run of a pod with a broken berth
  annotation must be refused);
- berth-scheduler runs: its Deployment's pods are ready, both containers (the extender's readiness is its
  cache having listed the cluster), or it runs outside the cluster and says so on its Deployment
  (`make try`); its Lease is held and renewed;
- the profiles' sample settings are those berth serve was told (`--kube-sample` against the scheduler's
  configuration);
- no pod carries berth rules while naming a scheduler berth does not serve;
- no pod has waited on berth-scheduler for longer than PENDING_FOR, else each is named with what holds it.
Exit 0 when nothing fails (warnings included), 1 when something does.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml

from berth import annotations as ann
from berth.cli.options import add_kubeconfig_args, examples
from berth.cluster.kubeapi import ApiError, KubeClient, load_credentials
from berth.vocab.policy.schema import TYPES

PENDING_FOR = dt.timedelta(minutes=3)
SHOWN_AT_MOST = 5
CRD = "placementpolicies.berth.dev"
VERSION = "v1alpha1"
# On a berth Deployment whose processes run outside the cluster (`make try`): where they run.
RUNS_ELSEWHERE = "berth.dev/runs-elsewhere"
PROBE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "berth-check-", "annotations": {ann.TAGS: "["}},
    "spec": {
        "schedulerName": "berth-scheduler",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause"}],
    },
}


@dataclass(frozen=True)
class CheckLine:
    status: str  # ok, warn, fail
    check: str
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<5} {self.check:<10} {self.message}"
        return text + (f"\n{'':17}{self.fix}" if self.fix else "")


def add_parser(sub: Any, prog: str) -> None:
    chk = sub.add_parser(
        "check",
        help="say whether berth works on the cluster",
        description="Check berth on the cluster of the kubeconfig: its CRD, the operator's webhooks, "
        "berth-scheduler and its extender, the sample settings, pods whose berth rules no berth scheduler "
        "reads, and pods waiting on berth-scheduler. One line a check (ok, warn, fail) with what to do; "
        "exit 1 when a check fails.",
        epilog=examples(prog, "check", "check --namespace berth-system -o json"),
    )
    add_kubeconfig_args(chk)
    chk.add_argument(
        "-n", "--namespace", default="berth-system", help="where berth is installed (default berth-system)"
    )
    chk.add_argument("--scheduler-name", default="berth-scheduler", help="berth-scheduler's name")
    chk.add_argument(
        "--probe-namespace",
        default="default",
        help="the namespace of the webhook's dry-run probe (nothing is stored; default: default)",
    )
    chk.add_argument("-o", "--output", choices=("text", "json"), default="text")
    chk.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    creds = load_credentials(args.kubeconfig, args.context)
    findings = asyncio.run(
        check(KubeClient(creds), args.namespace, args.scheduler_name, args.probe_namespace)
    )
    failed = any(f.status == "fail" for f in findings)
    if args.output == "json":
        print(json.dumps({"ok": not failed, "checks": [f.__dict__ for f in findings]}, indent=2))
    else:
        print("\n".join(f.line() for f in findings))
        print("berth works on this cluster" if not failed else "berth does not work on this cluster (above)")
    return 1 if failed else 0


async def check(client: KubeClient, namespace: str, scheduler: str, probe_namespace: str) -> list[CheckLine]:
    steps: list[Callable[[], Awaitable[list[CheckLine]]]] = [
        lambda: _crd(client),
        lambda: _webhooks(client, probe_namespace),
        lambda: _scheduler(client, namespace, scheduler),
    ]
    out: list[CheckLine] = []
    try:
        for step in steps:
            out += await _guarded(step)
        profiles, sample = await _profiles(client, namespace, scheduler)
        out += await _guarded(lambda: _sample(client, namespace, scheduler, profiles, sample))
        out += await _guarded(lambda: _pods(client, profiles))
    finally:
        await client.aclose()
    return out


async def _guarded(step: Callable[[], Awaitable[list[CheckLine]]]) -> list[CheckLine]:
    try:
        return await step()
    except ApiError as exc:
        return [
            CheckLine("warn", "access", f"could not ask the API server: {exc.message}", "check your rights")
        ]


async def _get(client: KubeClient, path: str) -> dict[str, Any] | None:
    try:
        return await client.get(path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


async def _crd(client: KubeClient) -> list[CheckLine]:
    crd = await _get(client, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    fix = "install the chart's CRDs: kubectl apply -f charts/berth/crds/ (helm install does it)"
    if crd is None:
        return [CheckLine("fail", "crd", f"the CRD {CRD} is not installed", fix)]
    conditions = (crd.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
        return [
            CheckLine("fail", "crd", f"the CRD {CRD} is not established yet", "wait, or see its conditions")
        ]
    versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
    if not (versions.get(VERSION) or {}).get("served"):
        return [CheckLine("fail", "crd", f"the CRD {CRD} does not serve {VERSION}, which berth reads", fix)]
    schema = ((versions[VERSION].get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
    policy = ((schema.get("spec") or {}).get("properties") or {}).get("policy") or {}
    known = set(((policy.get("properties") or {}).get("type") or {}).get("enum") or TYPES)
    missing = [t for t in TYPES if t not in known]
    if missing:
        why = f"the CRD {CRD} is older than this berth: it does not know {', '.join(missing)}"
        return [CheckLine("warn", "crd", why, "upgrade the CRDs with the chart (helm does not upgrade CRDs)")]
    return [CheckLine("ok", "crd", f"{CRD} established, serving {VERSION}")]


async def _webhooks(client: KubeClient, namespace: str) -> list[CheckLine]:
    configs = await client.get("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations")
    ours = [
        c["metadata"]["name"]
        for c in configs.get("items") or []
        if any(str(w.get("name", "")).endswith("berth.dev") for w in c.get("webhooks") or [])
    ]
    if not ours:
        fix = "install the chart with webhook.enabled (the default), or run berth operator --manage-webhooks"
        return [
            CheckLine("fail", "webhooks", "no ValidatingWebhookConfiguration of berth is registered", fix)
        ]
    try:
        await client.post(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", PROBE)
    except ApiError as exc:
        if ann.TAGS in exc.message:
            return [
                CheckLine("ok", "webhooks", f"{', '.join(ours)} registered; a broken annotation is refused")
            ]
        return [
            CheckLine("warn", "webhooks", f"the dry-run probe was refused for another reason: {exc.message}")
        ]
    fix = "kubectl -n berth-system get pods -l app.kubernetes.io/component=operator; see its log"
    return [
        CheckLine(
            "fail",
            "webhooks",
            f"{', '.join(ours)} registered, but a pod with a broken berth annotation was admitted: the "
            "operator does not answer (the pods' webhook fails open)",
            fix,
        )
    ]


async def _scheduler(client: KubeClient, namespace: str, scheduler: str) -> list[CheckLine]:
    deployment = await _get(client, f"/apis/apps/v1/namespaces/{namespace}/deployments/{scheduler}")
    out: list[CheckLine] = []
    elsewhere = ((deployment or {}).get("metadata") or {}).get("annotations", {}).get(RUNS_ELSEWHERE)
    if deployment is None:
        fix = f"install the chart (helm install berth charts/berth -n {namespace}), else give -n"
        return [CheckLine("fail", "scheduler", f"no Deployment {namespace}/{scheduler}", fix)]
    if elsewhere:
        out.append(CheckLine("ok", "scheduler", f"runs outside the cluster: {elsewhere}"))
    else:
        out += await _scheduler_pods(client, namespace, deployment)
    lease = await _get(client, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{scheduler}")
    if lease is None:
        if deployment.get("spec", {}).get("replicas", 1) > 1 and not elsewhere:
            fix = "the scheduler has not taken its Lease: see the kube-scheduler container's log"
            out.append(CheckLine("fail", "leader", f"no Lease {namespace}/{scheduler}", fix))
        return out
    spec = lease.get("spec") or {}
    holder, renewed = spec.get("holderIdentity") or "", spec.get("renewTime") or ""
    age = _age(renewed)
    duration = spec.get("leaseDurationSeconds") or 15
    if not holder or age is None or age.total_seconds() > 2 * duration:
        fix = "no replica renews the Lease: see the kube-scheduler containers' logs"
        out.append(
            CheckLine(
                "fail", "leader", f"the Lease {scheduler} is not held (renewed {renewed or 'never'})", fix
            )
        )
    else:
        out.append(
            CheckLine(
                "ok", "leader", f"{holder.split('_')[0]} leads, renewed {age.total_seconds():.0f} s ago"
            )
        )
    return out


async def _scheduler_pods(client: KubeClient, namespace: str, deployment: dict[str, Any]) -> list[CheckLine]:
    labels = (deployment.get("spec") or {}).get("selector", {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    pods = (await client.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector})).get(
        "items"
    ) or []
    ready = []
    for pod in pods:
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        if all((statuses.get(c) or {}).get("ready") for c in ("kube-scheduler", "extender")):
            ready.append(pod["metadata"]["name"])
    if ready:
        return [
            CheckLine(
                "ok",
                "scheduler",
                f"{len(ready)} of {len(pods)} pod(s) ready: kube-scheduler and its extender",
            )
        ]
    why = _why_not_ready(pods)
    fix = f"kubectl -n {namespace} describe pods -l {selector}\n{'':17}"
    fix += f"kubectl -n {namespace} logs -l {selector} -c extender"
    return [CheckLine("fail", "scheduler", f"no berth-scheduler pod is ready{why}", fix)]


def _why_not_ready(pods: list[dict[str, Any]]) -> str:
    for pod in pods:
        status = pod.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("status") == "False" and condition.get("message"):
                return f" ({pod['metadata']['name']}: {condition.get('type')}: {condition['message']})"
        for container in status.get("containerStatuses") or []:
            if not container.get("ready"):
                return f" ({pod['metadata']['name']}: container {container.get('name')} not ready)"
    return " (no pod)" if not pods else ""


async def _profiles(client: KubeClient, namespace: str, scheduler: str) -> tuple[dict[str, int], str | None]:
    """The profiles of berth-scheduler's configuration with their percentageOfNodesToScore, and the
    `--kube-sample` its extender was given (None when not known)."""
    config_map = await _get(client, f"/api/v1/namespaces/{namespace}/configmaps/{scheduler}-config")
    profiles: dict[str, int] = {}
    if config_map is not None:
        for text in (config_map.get("data") or {}).values():
            config = yaml.safe_load(text) or {}
            default = config.get("percentageOfNodesToScore") or 0
            for profile in config.get("profiles") or []:
                profiles[profile.get("schedulerName")] = profile.get("percentageOfNodesToScore", default) or 0
    deployment = await _get(client, f"/apis/apps/v1/namespaces/{namespace}/deployments/{scheduler}")
    sample = None
    for container in ((deployment or {}).get("spec", {}).get("template", {}).get("spec") or {}).get(
        "containers"
    ) or []:
        for arg in container.get("args") or []:
            if str(arg).startswith("--kube-sample="):
                sample = str(arg).split("=", 1)[1]
    return profiles or {scheduler: 0, f"{scheduler}-exhaustive": 100}, sample


async def _sample(
    client: KubeClient, namespace: str, scheduler: str, profiles: dict[str, int], sample: str | None
) -> list[CheckLine]:
    if sample is None:
        return [CheckLine("warn", "sample", "could not read berth serve's --kube-sample to compare")]
    told = dict(part.split("=", 1) for part in sample.split(",") if "=" in part)
    wrong = [
        f"{p}: {pct} in the configuration, {told.get(p, 'absent')} for berth serve"
        for p, pct in profiles.items()
        if told.get(p) != str(pct)
    ]
    if wrong:
        fix = "install the chart again: it renders both from scheduler.percentageOfNodesToScore"
        return [CheckLine("fail", "sample", "; ".join(wrong), fix)]
    shown = ", ".join(f"{p}={pct}" for p, pct in profiles.items())
    return [CheckLine("ok", "sample", f"berth serve knows the profiles' percentageOfNodesToScore ({shown})")]


async def _pods(client: KubeClient, profiles: dict[str, int]) -> list[CheckLine]:
    misnamed: list[str] = []
    waiting: list[str] = []
    now = dt.datetime.now(dt.UTC)
    async for items, _ in client.pages("/api/v1/pods", {"fieldSelector": "status.phase=Pending"}):
        for pod in items:
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            scheduler = spec.get("schedulerName") or "default-scheduler"
            rules = [k for k in (meta.get("annotations") or {}) if k in ann.POD_ANNOTATIONS]
            if scheduler not in profiles and rules:
                misnamed.append(f"{key} ({scheduler})")
            if scheduler in profiles and not spec.get("nodeName"):
                created = _age(meta.get("creationTimestamp") or "", now)
                if created is not None and created > PENDING_FOR:
                    waiting.append(f"{key}: {_held_by(pod)}")
    out = []
    if misnamed:
        names = "; ".join(misnamed[:SHOWN_AT_MOST]) + (
            f"; {len(misnamed) - SHOWN_AT_MOST} more" if len(misnamed) > SHOWN_AT_MOST else ""
        )
        fix = f"their berth rules are ignored: set spec.schedulerName to one of {', '.join(profiles)}"
        out.append(
            CheckLine(
                "warn",
                "names",
                f"{len(misnamed)} pending pod(s) with berth rules name another scheduler: {names}",
                fix,
            )
        )
    else:
        out.append(CheckLine("ok", "names", "no pending pod with berth rules names another scheduler"))
    if waiting:
        minutes = int(PENDING_FOR.total_seconds() // 60)
        shown = "\n".join(f"{'':17}{w}" for w in waiting[:SHOWN_AT_MOST])
        more = f"\n{'':17}and {len(waiting) - SHOWN_AT_MOST} more" if len(waiting) > SHOWN_AT_MOST else ""
        fix = "berth explain POD --live says why node by node; docs/troubleshooting.md, Why is my pod Pending"
        out.append(
            CheckLine(
                "warn",
                "pending",
                f"{len(waiting)} pod(s) waiting on berth for over {minutes} min:\n{shown}{more}",
                fix,
            )
        )
    else:
        out.append(
            CheckLine(
                "ok",
                "pending",
                f"no pod has waited on berth for over {int(PENDING_FOR.total_seconds() // 60)} min",
            )
        )
    return out


def _held_by(pod: dict[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return "not tried yet (is berth-scheduler running?)"


def _age(stamp: str, now: dt.datetime | None = None) -> dt.timedelta | None:
    try:
        at = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return (now or dt.datetime.now(dt.UTC)) - at
