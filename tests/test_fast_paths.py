"""Every fast path against the rule it copies.

The steps answer for a whole candidate set at once (`removals`, `select_among`, `values`, `raws`),
through the view's indexes, columns and memos kept across decisions; the per-node methods (`check`,
`select`, `value`, `raw`) are the rules. The engine's plain path (berth.engine.chain.plain_path) asks
only the rules. Here both decide the same seeded bursts over the same random clusters, each on a view
of its own, with pods landing and leaving and nodes changing between decisions, and every Decision
must be the same to the byte: the chosen node, every node's reasons and score parts, the traces, the
events. The chains are drawn from every step a configuration can name (berth.configure.REGISTRY and the
allocator's registry), so a step added later is drawn too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bench.identity import TINY, decision_bytes, digests
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.configure import KUBE, REGISTRY, build_pipeline
from berth.engine import Decision, Phase, decide, flatten
from berth.engine.chain import plain_path
from berth.errors import InvalidConfig
from berth.vocab.alloc.config import parse_config
from berth.vocab.alloc.registry import ALGORITHMS
from berth.vocab.tag_steps import RequireWithoutTag
from tests.alloc_helpers import cn, vm
from tests.policy_builders import app, placement_policy

TAGS = ["web", "db", "cache"]
NAMESPACES = ["default", "other"]
APPS = [("web", "1.0"), ("web", "2.0"), ("db", "1.0")]
# Every name a chain may hold: the allocator's algorithms and berth's other steps.
NAMES = sorted({*ALGORITHMS, *REGISTRY})
# Steps that only make sense wrapped as [or, step, identity] (they may leave no node).
WRAPPED = {"hard-filter-large-servers", "hard-filter-reservoir"}
NOW = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)

TAINTS = [
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
]
POLICIES = [
    {"type": "ANY"},
    {"type": "ONE_PER_HOST"},
    {"type": "MAX_N_PER_HOST", "max": 2},
    {"type": "MATCH_TAG", "tag": "gpu"},
    {"type": "NO_TAG"},
    {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [{"type": "MATCH_TAG", "tag": "gpu"}, {"type": "NO_TAG"}],
    },
    {"type": "COMPOSITE", "policies": [{"type": "ONE_PER_HOST"}, {"type": "MATCH_TAG", "tag": "n1"}]},
    {"type": "RULE_BASED", "rule": 'ctx.allocation.node.metadata["zone"] != "z-b"'},
    {"type": "RULE_BASED", "rule": "ctx.session.nodes[?ctx.allocation.node.hostname].orValue(0) < 2"},
    {"type": "RULE_BASED", "rule": "ctx.session.count < 3 || ctx.allocation.node.hostname == 'n0'"},
    {"type": "ONE_PER_HOST", "topologyKey": "topology.kubernetes.io/zone"},
    {"type": "MAX_N_PER_HOST", "max": 2, "topologyKey": "zone"},
    {
        "type": "COMPOSITE",
        "combiner": "OR",
        "policies": [{"type": "ONE_PER_HOST", "topologyKey": "zone"}, {"type": "MATCH_TAG", "tag": "ssd"}],
    },
]


ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _selector(draw: st.DrawFn) -> dict[str, Any]:
    app_name = draw(st.sampled_from([a for a, _ in APPS]))
    return draw(
        st.sampled_from(
            [
                {"matchLabels": {"app.kubernetes.io/name": app_name}},
                {
                    "matchExpressions": [
                        {"key": "app.kubernetes.io/version", "operator": "In", "values": ["1.0"]}
                    ]
                },
                {},
            ]
        )
    )


@st.composite
def affinity_terms(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": _selector(draw),
        "topologyKey": draw(st.sampled_from([HOST, ZONE])),
    }
    pick = draw(st.integers(0, 5))
    if pick == 0:
        term["namespaces"] = ["default", "other"]
    elif pick == 1:
        term["namespaceSelector"] = {}
    elif pick == 2:
        term["matchLabelKeys"] = ["app.kubernetes.io/version"]
    return term


@st.composite
def kube_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What a pod may ask of kube-scheduler: pod (anti-)affinity, spreading, host ports, preferred
    node affinity, tolerations."""
    spec: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        section: dict[str, Any] = {}
        if draw(st.integers(0, 4)) == 0:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = [draw(affinity_terms())]
        if draw(st.integers(0, 3)) == 0:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": draw(st.integers(1, 100)), "podAffinityTerm": draw(affinity_terms())}
            ]
        if section:
            affinity[kind] = section
    if draw(st.integers(0, 4)) == 0:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": draw(st.integers(1, 50)),
                    "preference": {
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z-a"]}]
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 4)) == 0:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": draw(st.integers(1, 3)),
                "topologyKey": draw(st.sampled_from([HOST, ZONE])),
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                "labelSelector": _selector(draw),
                **({"minDomains": 3} if draw(st.integers(0, 3)) == 0 else {}),
                **({"nodeTaintsPolicy": "Honor"} if draw(st.integers(0, 3)) == 0 else {}),
            }
        ]
    if draw(st.integers(0, 6)) == 0:
        spec["hostPorts"] = [8080]
    if draw(st.integers(0, 3)) == 0:
        spec["requests"] = {
            "cpu": draw(st.sampled_from(["100m", "1"])),
            "memory": draw(st.sampled_from(["128Mi", "2Gi"])),
        }
    return spec


def _apply_kube(obj: dict[str, Any], spec: dict[str, Any], owner: str | None) -> dict[str, Any]:
    body = obj["spec"]
    container = body["containers"][0]
    if "affinity" in spec:
        body["affinity"] = spec["affinity"]
    if "topologySpreadConstraints" in spec:
        body["topologySpreadConstraints"] = spec["topologySpreadConstraints"]
    if "hostPorts" in spec:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in spec["hostPorts"]]
    if "requests" in spec:
        container.setdefault("resources", {})["requests"] = spec["requests"]
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "controller": True, "uid": owner}
        ]
    return obj


@st.composite
def nodes(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if draw(st.booleans()):
        labels["zone"] = draw(st.sampled_from(["z-a", "z-b", "z-c"]))
    if draw(st.integers(0, 3)):
        labels[ZONE] = draw(st.sampled_from(["eu-1a", "eu-1b", "eu-1c"]))
    for label, value in (
        ("berth.dev/reserved", "true"),
        ("node-role.kubernetes.io/control-plane", ""),
        ("berth.dev/reservoir", "true"),
        ("berth.dev/virtual", "true"),
        ("berth.dev/platform", "20240131T120000Z"),
    ):
        if draw(st.integers(0, 7)) == 0:
            labels[label] = value
    for tag in draw(st.lists(st.sampled_from(["gpu", "ssd"]), max_size=2, unique=True)):
        labels[f"tag.berth.dev/{tag}"] = ""
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        annotations["berth.dev/traits"] = draw(
            st.sampled_from(['{"ssd": true}', '{"ssd": false, "rack": "r1"}', '{"rack": "r2"}', "{"])
        )
    if draw(st.integers(0, 3)) == 0:
        annotations["berth.dev/nic-tags"] = '["external"]'
    if draw(st.integers(0, 2)) == 0:
        days = draw(st.integers(-10, 400))  # at noon: far from a week's boundary whenever the test runs
        annotations["berth.dev/next-reboot"] = draw(
            st.sampled_from([(NOW + timedelta(days=days, hours=12)).isoformat(), "soon"])
        )
    if draw(st.integers(0, 3)) == 0:
        annotations["berth.dev/overprovision-ratios"] = draw(
            st.sampled_from(['{"cpu": 2, "ram": 1.5}', '{"ram": 1}', '{"cpu": 8, "ram": 2, "disk": 3}'])
        )
    obj = cn(
        name,
        memory=f"{draw(st.sampled_from([1, 2, 4, 8, 16, 64]))}Gi",
        cpu=draw(st.sampled_from(["1", "2", "4", "16"])),
        disk=draw(st.sampled_from([None, "20Gi", "200Gi"])),
        labels=labels,
        ready=draw(st.integers(0, 7)) > 0,
        kubelet=draw(st.sampled_from([None, "v1.34.2", "v1.36.3"])),
    )
    notes = obj["metadata"].setdefault("annotations", {})
    notes.update(annotations)
    obj["status"]["allocatable"]["pods"] = draw(st.sampled_from(["3", "110"]))
    if draw(st.integers(0, 9)) == 0:
        obj["spec"]["unschedulable"] = True
    if draw(st.integers(0, 4)) == 0:
        obj["spec"]["taints"] = [draw(st.sampled_from(TAINTS))]
    return obj


@st.composite
def running_pods(draw: st.DrawFn, name: str, node_names: list[str]) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if draw(st.booleans()):
        app_name, version = draw(st.sampled_from(APPS))
        labels = app(app_name, version)
    obj = vm(
        name,
        namespace=draw(st.sampled_from(NAMESPACES)),
        node=draw(st.sampled_from(node_names)),
        memory=draw(st.sampled_from([None, "512Mi", "4Gi"])),
        cpu=draw(st.sampled_from([None, "250m", "2"])),
        disk=draw(st.sampled_from([None, "1Gi"])),
        labels=labels,
        uid=f"{abs(hash(name)) % 10**8:08d}-0000-4000-8000-{len(name):012d}",
    )
    tags = draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))
    if tags:
        obj["metadata"]["annotations"]["berth.dev/tags"] = json.dumps(tags)
    owner = f"rs-{labels['app.kubernetes.io/name']}" if labels and draw(st.booleans()) else None
    return _apply_kube(obj, draw(kube_specs()), owner)


@st.composite
def incoming(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A pod to place, with any of berth's annotations."""
    notes: dict[str, Any] = {}
    affinity = draw(
        st.fixed_dictionaries(
            {},
            optional={
                key: st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True)
                for key in (
                    "require_with_tag",
                    "require_without_tag",
                    "prefer_with_tag",
                    "prefer_without_tag",
                )
            },
        )
    )
    contradicts = set(affinity.get("require_with_tag", ())) & set(affinity.get("require_without_tag", ()))
    if affinity and not contradicts:
        if draw(st.integers(0, 2)) == 0:  # per domain: the nodes of a zone count together
            affinity["topologyKey"] = draw(st.sampled_from([ZONE, "zone", HOST]))
        notes["berth.dev/affinity"] = affinity
    tags = draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))
    if tags:
        notes["berth.dev/tags"] = tags
    if draw(st.integers(0, 3)) == 0:
        notes["berth.dev/traits"] = draw(st.sampled_from([{"ssd": True}, {"rack": "r1"}]))
    if draw(st.integers(0, 3)) == 0:
        notes["berth.dev/locality"] = {
            "near": draw(st.lists(st.sampled_from(["p0", "p1"]), max_size=1)),
            "far": draw(st.lists(st.sampled_from(["p2", "p3"]), max_size=1)),
            "strict": draw(st.booleans()),
        }
        if draw(st.booleans()):
            notes["berth.dev/locality"]["topologyKey"] = draw(st.sampled_from([ZONE, "zone"]))
    if draw(st.integers(0, 5)) == 0:
        notes["berth.dev/affinity-rules"] = [
            {
                "key": "app.kubernetes.io/name",
                "operator": draw(st.sampled_from(["==", "!="])),
                "value": "db",
                "isSoft": draw(st.booleans()),
            }
        ]
    if draw(st.integers(0, 4)) == 0:
        notes["berth.dev/package"] = draw(st.sampled_from(["small", "spread"]))
    if draw(st.integers(0, 5)) == 0:
        notes["berth.dev/image"] = {"requirements": {"min_platform": {"1.35": "1.35.0"}}}
    if draw(st.integers(0, 5)) == 0:
        notes["berth.dev/nic-tags"] = ["external"]
    app_name, version = draw(st.sampled_from(APPS))
    labels = app(app_name, version)
    if draw(st.integers(0, 2)) == 0:
        labels["governed"] = "yes"
    obj = vm(
        name,
        namespace=draw(st.sampled_from(NAMESPACES)),
        memory=draw(st.sampled_from([None, "1Gi", "8Gi"])),
        cpu=draw(st.sampled_from([None, "500m", "4"])),
        disk=draw(st.sampled_from([None, "10Gi"])),
        annotations=notes,
        labels=labels,
        uid=f"{abs(hash(name)) % 10**8:08d}-1111-4000-8000-{len(name):012d}",
    )
    if draw(st.integers(0, 4)) == 0:
        obj["spec"]["tolerations"] = [
            draw(
                st.sampled_from(
                    [{"key": "dedicated", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}]
                )
            )
        ]
    owner = f"rs-{app_name}" if draw(st.booleans()) else None
    return _apply_kube(obj, draw(kube_specs()), owner)


def configs() -> st.SearchStrategy[dict[str, Any]]:
    defaults = st.fixed_dictionaries(
        # weight_num_owner_zones is never 0: package `spread` orders nodes with its scorer.
        {"weight_num_owner_zones": st.sampled_from([0.5, 1.0, -2.0])},
        optional={
            "disable_override_overprovisioning": st.booleans(),
            "filter_capness": st.booleans(),
            "filter_large_servers": st.booleans(),
            "filter_vm_limit": st.integers(1, 6),
            "minimum_free_disk": st.sampled_from([0, 10_000, 100_000]),
            "weight_unreserved_ram": st.sampled_from([0.0, 2.0, -1.0]),
            "weight_unreserved_disk": st.sampled_from([0.0, 1.0, -0.5]),
            "weight_current_platform": st.sampled_from([0.0, 1.0]),
            "weight_next_reboot": st.sampled_from([0.0, 0.5, -1.0]),
            "weight_uniform_random": st.sampled_from([0.0, 0.5]),
            # (rarely: it leaves kube's scores out of the default chain)
            "server_spread": st.sampled_from(["min-ram", "max-ram", "min-owner", "random", None]),
        },
    )
    packages = st.just(
        {
            "small": {"max_physical_memory": 2048, "cpu_cap": 100, "overprovision_memory": 1.5},
            "spread": {"alloc_server_spread": "min-owner", "quota": 5000, "overprovision_cpu": 2},
        }
    )
    defaults = defaults.map(lambda d: {k: v for k, v in d.items() if v is not None})
    return st.fixed_dictionaries({"defaults": defaults, "packages": packages})


@st.composite
def chains(draw: st.DrawFn) -> list[Any] | None:
    """None (berth's default chain) or a pipe of steps drawn from every name a chain may hold."""
    pick = draw(st.integers(0, 6))
    if pick == 0:
        return None
    if pick == 1:  # the tag-affinity vocabulary alone, whose memos live across a burst
        return ["pipe", "tags/require_with_tag", "tags/require_without_tag", "tags/tag-affinity"]
    if pick == 2:  # kube-scheduler's own filters and scores, as simulate runs them without berth's rules
        return ["pipe", *KUBE, "kube/preferences", "kube/default-score", "score-uniform-random"]
    members: list[Any] = ["pipe"]
    if draw(st.booleans()):
        members.append("calculate-locality-hints")
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=10)):
        if name in WRAPPED or draw(st.integers(0, 6)) == 0:
            members.append(["or", name, "identity"])
        else:
            members.append(name)
    return members


@dataclass
class World:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    policies: list[dict[str, Any]]
    config: dict[str, Any]
    kube_filters: bool
    workloads: list[dict[str, Any]]
    # ("decide", pod, asked node indexes or None, node index the pod already sits on or None)
    # ("land", pod) ("leave", pod key) ("node", node)
    script: list[tuple[Any, ...]]


@st.composite
def worlds(draw: st.DrawFn, chain: Any = None) -> World:
    count = draw(st.integers(1, 8))
    templates = [draw(nodes(f"n{i}")) for i in range(count)]
    # Copies of the drawn nodes make clusters big enough for the paths that change with size.
    copies = draw(st.sampled_from([1, 1, 1, 4, 40]))
    node_objs = []
    for c in range(copies):
        for i, template in enumerate(templates):
            obj = json.loads(json.dumps(template))
            name = f"n{i}" if c == 0 else f"n{i}-{c}"
            obj["metadata"]["name"] = name
            obj["metadata"]["labels"]["kubernetes.io/hostname"] = name
            node_objs.append(obj)
    names = [o["metadata"]["name"] for o in node_objs]
    pods = [draw(running_pods(f"p{j}", names)) for j in range(draw(st.integers(0, 14)))]
    policies = []
    for k, policy in enumerate(draw(st.lists(st.sampled_from(POLICIES), max_size=2))):
        selector = draw(st.sampled_from([{}, {"matchLabels": {"governed": "yes"}}, None]))
        policies.append(placement_policy(f"policy-{k}", policy, namespace="default", selector=selector))
    config = draw(configs())
    if chain is None:
        chain = draw(chains())
    if chain is not None:
        config["allocationDescription"] = chain
    try:
        build_pipeline(parse_config(config), kube_filters=True)
    except InvalidConfig:  # a spread whose scorer is weighted 0, a chain of data steps alone
        assume(False)
    script: list[tuple[Any, ...]] = []
    base = draw(incoming("new"))
    for i in range(draw(st.integers(1, 6))):
        new = base if draw(st.integers(0, 2)) else draw(incoming(f"new-{i}"))
        new = json.loads(json.dumps(new))
        new["metadata"]["name"] = f"{new['metadata']['name']}-{i}"
        new["metadata"]["uid"] = f"{i:08d}-2222-4000-8000-000000000000"
        if policies and draw(st.integers(0, 3)) == 0:
            new["metadata"]["annotations"]["berth.dev/placement-policy"] = "policy-0"
        asked = None
        if draw(st.integers(0, 3)) == 0:
            asked = draw(st.lists(st.integers(0, len(names) - 1), min_size=1, max_size=len(names)))
        # The pod already on a node (a bind checked again, audit): it is never its own neighbour.
        already = draw(st.integers(0, len(names) - 1)) if draw(st.integers(0, 3)) == 0 else None
        script.append(("decide", new, asked, already))
        for _ in range(draw(st.integers(0, 2))):
            if pods and draw(st.booleans()):
                gone = draw(st.sampled_from(pods))["metadata"]
                script.append(("leave", f"{gone['namespace']}/{gone['name']}"))
            elif draw(st.booleans()):
                script.append(("land", draw(running_pods(f"q{i}-{len(script)}", names))))
            else:
                changed = json.loads(json.dumps(draw(st.sampled_from(node_objs))))
                fresh = draw(nodes(changed["metadata"]["name"]))
                script.append(("node", fresh))
    workloads = [
        {
            "kind": "ReplicaSet",
            "metadata": {"name": f"rs-{a}", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": a}}},
        }
        for a in sorted({a for a, _ in APPS})  # in a fixed order: the same worlds under every hash seed
        for ns in NAMESPACES
        if draw(st.integers(0, 3))
    ]
    if draw(st.booleans()):
        workloads.append(
            {
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"app.kubernetes.io/name": "web"}},
            }
        )
    workloads.append({"kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "b"}}})
    return World(node_objs, pods, policies, config, draw(st.booleans()), workloads, script)


def _view(world: World) -> ClusterView:
    view = ClusterView([node_from_k8s(o) for o in world.nodes], [pod_from_k8s(o) for o in world.pods])
    for policy in world.policies:
        view.upsert_policy(policy)
    for workload in world.workloads:
        view.upsert_workload(workload)
    return view


def _decisions(world: World, *, plain: bool) -> Iterator[tuple[int, Decision]]:
    """The world's script on a view of its own, each decision as it was made; the chosen node gets
    the pod before the script goes on."""
    view = _view(world)
    pipeline = build_pipeline(parse_config(world.config), kube_filters=world.kube_filters)
    names = [o["metadata"]["name"] for o in world.nodes]
    with plain_path() if plain else nullcontext():
        for i, (action, *args) in enumerate(world.script):
            if action == "land":
                view.add_pod(pod_from_k8s(args[0]))
            elif action == "leave":
                view.remove_pod(args[0])
            elif action == "node":
                view.upsert_node(node_from_k8s(args[0]))
            else:
                obj, asked, already = args
                pod = pod_from_k8s(obj)
                if already is not None:
                    view.add_pod(msgspec.structs.replace(pod, node_name=names[already]))
                candidates = [names[a] for a in asked] if asked is not None else None
                decision = decide(pod, view, pipeline, candidates=candidates, seed=i)
                yield i, decision
                if decision.chosen:
                    view.remove_pod(pod.key)
                    view.add_pod(msgspec.structs.replace(pod, node_name=decision.chosen))


def assert_same_decisions(world: World) -> None:
    fast = list(_decisions(world, plain=False))
    plain = list(_decisions(world, plain=True))
    assert len(fast) == len(plain)
    for (i, a), (_, b) in zip(fast, plain, strict=True):
        left, right = decision_bytes(a), decision_bytes(b)
        if left != right:
            at = next(k for k in range(min(len(left), len(right))) if left[k] != right[k])
            raise AssertionError(
                f"decision {i} of the script differs between the fast and the plain path at byte {at}:\n"
                f"fast:  ...{left[max(0, at - 400) : at + 200].decode(errors='replace')}\n"
                f"plain: ...{right[max(0, at - 400) : at + 200].decode(errors='replace')}\n"
                f"chain: {world.config.get('allocationDescription')}, kube filters {world.kube_filters}"
            )


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(worlds())
def test_every_fast_path_decides_as_the_per_node_rules_do(world: World) -> None:
    assert_same_decisions(world)


# One chain with every step a configuration can name, each once: none is left to chance.
EVERY_STEP: list[Any] = [
    "pipe",
    "calculate-locality-hints",
    *[["or", n, "identity"] if n in WRAPPED else n for n in NAMES if n != "calculate-locality-hints"],
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(chain=EVERY_STEP))
def test_a_chain_of_every_step_decides_as_the_per_node_rules_do(world: World) -> None:
    assert_same_decisions(world)


def test_the_benchmark_bursts_decide_on_the_fast_path_as_on_the_plain_one() -> None:
    """The bursts the fast paths were made for: every scenario and chain of the benchmarks, on two
    generated clusters, with pods carrying the excluded and preferred tags landing and leaving."""
    fast = list(digests(TINY))
    with plain_path():
        plain = list(digests(TINY))
    assert len(fast) == len(plain) > 0
    differ = [f"{a} (plain: {b.rsplit(' ', 1)[1]})" for a, b in zip(fast, plain, strict=True) if a != b]
    assert not differ, f"{len(differ)} decisions differ, the first: {differ[:3]}"


def test_the_chains_drawn_can_hold_every_step_a_configuration_names() -> None:
    pipeline = build_pipeline(parse_config({"allocationDescription": EVERY_STEP}), kube_filters=True)
    built = {type(s) for s in flatten(pipeline.chain)}
    assert built >= {*ALGORITHMS.values(), *REGISTRY.values()}
    # Each phase class's set-level method is one the plain path goes around.
    phases = {s.phase for s in flatten(pipeline.chain)}
    assert {Phase.HARD, Phase.SOFT, Phase.TIER, Phase.SCORE} <= phases


def _planted_world() -> World:
    """A burst where require_without_tag removes nodes: a node holding the excluded tag."""
    nodes_ = [cn("n0"), cn("n1"), cn("n2")]
    db = vm(
        "db-0", node="n1", annotations={"berth.dev/tags": ["db"]}, uid="00000000-0000-4000-8000-000000000001"
    )
    new = vm(
        "new",
        annotations={"berth.dev/affinity": {"require_without_tag": ["db"]}},
        uid="00000000-0000-4000-8000-000000000002",
    )
    chain = ["pipe", "tags/require_without_tag", "score-unreserved-ram"]
    return World(nodes_, [db], [], {"allocationDescription": chain}, True, [], [("decide", new, None, None)])


def test_a_fast_path_changed_on_its_own_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _planted_world()
    assert_same_decisions(world)  # as the tree stands

    def forgets_a_holder(self: Any, cands: Any, prepared: Any, ctx: Any) -> Any:
        return {}  # a fast path that no longer sees the holders of an excluded tag

    monkeypatch.setattr(RequireWithoutTag, "removals", forgets_a_holder)
    with pytest.raises(AssertionError, match="differs between the fast and the plain path"):
        assert_same_decisions(world)


def _held_where(view: ClusterView) -> list[Any]:
    """What the steps read of the pods on each node: which pods, what they request and limit, their
    tags, owners and affinity groups."""
    return [
        (
            state.node.name,
            sorted(state.pods),
            sorted(state.requested.items()),
            sorted(state.limited.items()),
            sorted(state.owners.items()),
            sorted(repr(k) for k, v in view.pods_with_affinity().items() if state.node.name in v),
        )
        for state in view.states()
    ]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_a_pod_asked_about_where_it_sits_decides_as_if_it_were_not_there(world: World) -> None:
    """A pod is never its own neighbour: asked about again on a view that already holds it on a node
    (a bind checked again, audit, explain), it is decided as on the same view without it, to the
    byte, by every step drawn; and the view holds it where it was afterwards."""
    pipeline = build_pipeline(parse_config(world.config), kube_filters=world.kube_filters)
    names = [o["metadata"]["name"] for o in world.nodes]
    for i, (action, *args) in enumerate(world.script):
        if action != "decide":
            continue
        obj, asked, already = args
        pod = pod_from_k8s(obj)
        candidates = [names[a] for a in asked] if asked is not None else None
        holding, without = _view(world), _view(world)
        holding.add_pod(msgspec.structs.replace(pod, node_name=names[already or 0]))
        before = _held_where(holding)
        there = decide(pod, holding, pipeline, candidates=candidates, seed=i)
        assert _held_where(holding) == before
        absent = decide(pod, without, pipeline, candidates=candidates, seed=i)
        assert decision_bytes(there) == decision_bytes(absent), f"decision {i}"
