"""Locality hints and affinity rules: what a pod writes, and the nodes that satisfy it.

`berth.dev/locality` is sdc-designation's `{"near": ..., "far": ..., "strict": bool}`; a target is a pod's
name (or `namespace/name` with the pod's own namespace), its uid, or a prefix of its uid of at least 8
characters. Only the pods of the pod's own namespace are seen (the allocator counts only the owner's
own instances): a target naming a pod of another namespace is as if that pod did not exist, so a pod
cannot probe other namespaces. A target named both near and far is far only: sdc-designation's "allocating
a new VM far from other VMs take precedence over near VMs".

`berth.dev/affinity-rules` is sdc-designation's list of `{key, operator, value, valueType, isSoft}`; key
`instance` or `container` matches pod names in the pod's namespace (an exact value also matches a uid
or uid prefix), any other key matches that label of the pods of the pod's namespace; `==` asks for a
node that hosts at least one matching pod, `!=` for a node that hosts none.

Both become hints, each strict or soft on its own: a rule's isSoft says which, the locality's `strict`
covers all its targets. Resolving a hint against the cluster view yields the nodes hosting a matching
pod; it runs once per pod and reads the view's indexes (pod by name, uid, uid prefix, label value),
never every pod of the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from berth.cluster.model import Pod
from berth.cluster.topology import FIELD as TOPOLOGY_KEY
from berth.cluster.topology import key_problem, per_domain, short
from berth.cluster.view import UID_PREFIX
from berth.engine.step import PodContext
from berth.errors import InvalidAnnotation
from berth.json_annotation import json_type, show
from berth.vocab.alloc import patterns

LOCALITY_KEYS = ("near", "far", "strict", TOPOLOGY_KEY)
RULE_KEYS = ("key", "operator", "value", "valueType", "isSoft")
INSTANCE_KEYS = ("instance", "container")
MAX_TARGETS = 64
MAX_RULES = 64
MAX_VALUE = patterns.MAX_PATTERN
_TARGET = re.compile(r"^(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$")
_UID_CHARS = re.compile(r"^[0-9a-f-]+$")
HINTS_KEY = "alloc/.hints"


@dataclass(frozen=True, slots=True)
class Locality:
    near: tuple[str, ...] = ()
    far: tuple[str, ...] = ()
    strict: bool = False
    # near means the targets' domain of this node label, far another domain; None: the node itself
    topology: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.near:
            out["near"] = list(self.near)
        if self.far:
            out["far"] = list(self.far)
        out["strict"] = self.strict
        if self.topology is not None:
            out[TOPOLOGY_KEY] = self.topology
        return out


@dataclass(frozen=True, slots=True)
class AffinityRule:
    key: str
    operator: str
    value: str
    value_type: str
    soft: bool
    matches: Callable[[str], bool] = field(compare=False, repr=False)

    @property
    def instance(self) -> bool:
        return self.key in INSTANCE_KEYS

    def __str__(self) -> str:
        """sdc-designation's printed form: key, operator, `~` when soft, value (`container==database-*`)."""
        return f"{self.key}{self.operator}{'~' if self.soft else ''}{self.value}"


def _targets(value: Any, where: str) -> tuple[tuple[str, ...], list[str]]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return (), [f"{where} should be a target or a list of targets, not {json_type(value)}"]
    if len(items) > MAX_TARGETS:
        return (), [f"{where}: at most {MAX_TARGETS} targets are allowed, found {len(items)}"]
    for item in items:
        if not isinstance(item, str) or not _TARGET.match(item):
            return (), [
                f"{where}: {show(item)} should be a pod name, namespace/name, a pod uid or a uid prefix "
                f"of at least {UID_PREFIX} characters"
            ]
    return tuple(dict.fromkeys(items)), []


def parse_locality(value: Any) -> tuple[Locality | None, list[str]]:
    if not isinstance(value, dict):
        return None, [f"value should be a JSON object with near, far and strict, not {json_type(value)}"]
    problems = [
        f"unknown key {show(k)} (near, far, strict and {TOPOLOGY_KEY} are read)"
        for k in value
        if k not in LOCALITY_KEYS
    ]
    near, found = _targets(value.get("near", []), "near")
    problems += found
    far, found = _targets(value.get("far", []), "far")
    problems += found
    strict = value.get("strict", False)
    if not isinstance(strict, bool):
        problems.append(f"strict should be true or false, not {json_type(strict)}")
    topology = value.get(TOPOLOGY_KEY)
    if TOPOLOGY_KEY in value and (problem := key_problem(topology)):
        problems.append(f"{TOPOLOGY_KEY}: {problem}")
    if problems:
        return None, problems
    # Far takes precedence over near (sdc-designation): a target named in both is kept away from only.
    near = tuple(t for t in near if t not in far)
    return Locality(near=near, far=far, strict=bool(strict), topology=per_domain(topology)), []


def parse_rules(value: Any) -> tuple[tuple[AffinityRule, ...], list[str]]:
    if not isinstance(value, list):
        return (), [f"value should be a JSON list of affinity rules, not {json_type(value)}"]
    if len(value) > MAX_RULES:
        return (), [f"at most {MAX_RULES} affinity rules are allowed, found {len(value)}"]
    rules, problems = [], []
    for i, raw in enumerate(value, 1):
        rule, found = _rule(raw, f"rule {i}")
        problems += found
        if rule is not None:
            rules.append(rule)
    return tuple(rules), problems


def _rule(raw: Any, where: str) -> tuple[AffinityRule | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"{where}: should be an object with key, operator, value, valueType and isSoft"]
    problems = [
        f"{where}: unknown key {show(k)} ({', '.join(RULE_KEYS)} are read)" for k in raw if k not in RULE_KEYS
    ]
    key, operator, value = raw.get("key"), raw.get("operator"), raw.get("value")
    value_type, soft = raw.get("valueType", "exact"), raw.get("isSoft", False)
    for name, item in (("key", key), ("value", value)):
        if not isinstance(item, str) or not item:
            problems.append(f"{where}: {name} should be a non-empty string, found {show(item)}")
        elif len(item) > MAX_VALUE:
            problems.append(f"{where}: {name} is longer than {MAX_VALUE} characters")
    if operator not in ("==", "!="):
        problems.append(f'{where}: operator should be "==" or "!=", found {show(operator)}')
    if value_type not in ("exact", "glob", "re"):
        problems.append(f'{where}: valueType should be "exact", "glob" or "re", found {show(value_type)}')
    if not isinstance(soft, bool):
        problems.append(f"{where}: isSoft should be true or false, found {show(soft)}")
    if problems:
        return None, problems
    assert isinstance(key, str) and isinstance(operator, str) and isinstance(value, str)  # as checked
    printed = f"{key}{operator}{'~' if soft else ''}{value}"
    try:
        matcher = {"exact": patterns.exact, "glob": patterns.glob, "re": patterns.regex}[value_type](value)
    except patterns.PatternError as exc:
        return None, [f"{where} ({printed}): {exc}"]
    return AffinityRule(key, operator, value, value_type, soft, matcher), []


# -- resolution against the cluster view -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hint:
    """One near or far wish, with the nodes that host a pod it names."""

    text: str  # sdc-designation's printed form: inst==web-0, container==database-*, disabled!=yes
    near: bool
    strict: bool
    nodes: frozenset[str]
    matched: int  # pods the hint names, placed or not
    words: str = ""  # the user's own words when they differ from `text`: near web-0, far db-1
    # Per domain (berth.dev/locality's topologyKey): `nodes` are every node of the targets' domains,
    # `domains` those domains, `unlabelled` the nodes without the label (no domain to be near or far).
    topology: str | None = None
    domains: tuple[str, ...] = ()
    unlabelled: frozenset[str] = frozenset()

    @property
    def shown(self) -> str:
        """How a reason names the hint: the user's words, then sdc-designation's form
        (near web-0 (inst==web-0))."""
        return f"{self.words} ({self.text})" if self.words else self.text

    @property
    def where(self) -> str:
        """What a reason says the hint's nodes are: "hosts a pod", or "is in the zone of a pod"."""
        if self.topology is None:
            return "hosts a pod"
        return f"is in the {short(self.topology)} ({', '.join(self.domains) or 'none'}) of a pod"


@dataclass(frozen=True, slots=True)
class Hints:
    hints: tuple[Hint, ...] = ()

    def of(self, *, strict: bool) -> tuple[Hint, ...]:
        return tuple(h for h in self.hints if h.strict == strict)

    def summary(self) -> str:
        if not self.hints:
            return "no locality or affinity rules"
        parts = [
            f"{h.shown} ({'strict' if h.strict else 'soft'}, {len(h.nodes)} node(s))"
            for h in sorted(self.hints, key=lambda h: h.near)  # far first, as they are applied
        ]
        return "; ".join(parts)


def resolve(ctx: PodContext) -> Hints:
    """The pod's hints resolved on the view, once per pod (shared by the three locality steps)."""
    cached = ctx.prepared.get(HINTS_KEY)
    if cached is None:
        cached = ctx.prepared[HINTS_KEY] = _resolve(ctx)
    return cached


def _resolve(ctx: PodContext) -> Hints:
    alloc = getattr(ctx.spec, "alloc", None)
    if alloc is None:
        return Hints()
    hints = []
    locality = alloc.locality
    if locality is not None:
        for near, targets in ((False, locality.far), (True, locality.near)):
            for target in targets:
                which = "near" if near else "far"
                pods = _target_pods(ctx, target, which)
                text = f"inst{'==' if near else '!='}{target}"
                hint = _hint(text, near, locality.strict, pods, words=f"{which} {target}")
                if locality.topology is not None:
                    hint = _per_domain(ctx, hint, locality.topology)
                hints.append(hint)
    for rule in alloc.rules:
        pods = _rule_pods(ctx, rule)
        hints.append(_hint(str(rule), rule.operator == "==", not rule.soft, pods))
    return Hints(tuple(hints))


def _hint(text: str, near: bool, strict: bool, pods: list[Pod], *, words: str = "") -> Hint:
    nodes = frozenset(p.node_name for p in pods if p.node_name)
    return Hint(text, near, strict, nodes, len(pods), words)


def _per_domain(ctx: PodContext, hint: Hint, key: str) -> Hint:
    """The hint over the domains of the nodes hosting its pods."""
    domains = ctx.view.domains(key)
    values = sorted({domains.of[n] for n in hint.nodes if n in domains.of})
    return replace(
        hint,
        nodes=frozenset(domains.nodes_of(set(values))),
        topology=key,
        domains=tuple(values),
        unlabelled=frozenset(domains.unlabelled),
    )


def _not_self(ctx: PodContext, pods: list[Pod]) -> list[Pod]:
    return [p for p in pods if not p.same_pod(ctx.pod)]


def _target_pods(ctx: PodContext, target: str, which: str) -> list[Pod]:
    """The pods of the pod's own namespace a near or far target names (none in another namespace)."""
    view, namespace = ctx.view, ctx.pod.namespace
    if "/" in target:
        target_namespace = target.split("/", 1)[0]
        named = view.pod(target) if target_namespace == namespace else None
        return _not_self(ctx, [named]) if named is not None else []
    named = view.pod(f"{namespace}/{target}")
    if named is not None:
        return _not_self(ctx, [named])
    return _not_self(ctx, _by_uid(ctx, target, f"{which} target {show(target)}", namespace=namespace))


def _by_uid(ctx: PodContext, value: str, what: str, *, namespace: str | None) -> list[Pod]:
    view = ctx.view
    exact = view.pod_by_uid(value)
    if exact is not None:
        return [exact] if namespace in (None, exact.namespace) else []
    if len(value) < UID_PREFIX or not _UID_CHARS.match(value):
        return []
    found = [p for p in view.pods_by_uid_prefix(value) if namespace in (None, p.namespace)]
    found = _not_self(ctx, found)
    if len(found) > 1:
        raise InvalidAnnotation(
            f"{what} matches {len(found)} pods by uid prefix ({', '.join(p.key for p in found[:5])}); "
            "write more of the uid",
            field="berth.dev/locality" if what.startswith(("near", "far")) else "berth.dev/affinity-rules",
        )
    return found


def _rule_pods(ctx: PodContext, rule: AffinityRule) -> list[Pod]:
    view, namespace = ctx.view, ctx.pod.namespace
    if rule.instance:
        if rule.value_type == "exact":
            named = view.pod(f"{namespace}/{rule.value}")
            if named is not None:
                return _not_self(ctx, [named])
            return _not_self(ctx, _by_uid(ctx, rule.value, f"affinity rule {rule}", namespace=namespace))
        return _not_self(ctx, [p for p in view.namespace_pods(namespace) if rule.matches(p.name)])
    by_value = view.label_values(namespace, rule.key)
    keys: set[str] = set()
    if rule.value_type == "exact":
        keys = set(by_value.get(rule.value, ()))
    else:
        for label_value, holders in by_value.items():
            if rule.matches(label_value):
                keys |= holders
    pods = [p for k in sorted(keys) if (p := view.pod(k)) is not None]
    return _not_self(ctx, pods)
