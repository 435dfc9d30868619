"""PlacementPolicy objects compiled once per change into a small predicate tree.

A compiled policy holds its label selector, the predicate tree the engine asks per node, and, when the
object is invalid, every problem with its field path (the policy is then not Ready and a pod it governs
is refused with those problems: fail closed).

Drove's automatic NO_TAG: ANY, ONE_PER_HOST, MAX_N_PER_HOST, NO_TAG alone, and a COMPOSITE none of whose
descendants is MATCH_TAG or RULE_BASED, are ANDed with NO_TAG, so they skip specialised nodes (nodes with
any tag besides their hostname). Only MATCH_TAG and RULE_BASED can reach a specialised node.

Every predicate answers for one node (`check`) and for a set of candidates at once (`failures`, which
must agree with `check`): the per-host counts look only at the nodes running the app, and what depends
on the node record alone (MATCH_TAG, NO_TAG, a rule that reads only the node) is worked out once per
node record and kept by the view until a node changes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

import berth.vocab.policy.schema as m
from berth.cluster.selectors import Selector
from berth.cluster.topology import per_domain, short
from berth.errors import InvalidPolicy
from berth.vocab.policy.cel import CompiledRule, check_rule
from berth.vocab.policy.combine import and_failures, first_failure


class Failure(NamedTuple):
    """Why a policy rejects a node: the sub-policy type, a message naming the rule and the pod-side
    values, whether an eviction could free the node, and the node-side values."""

    type: str
    message: str
    exhausted: bool
    values: dict[str, Any]


class Probe(Protocol):
    """What a predicate may ask about the pod being placed (built once per pod by the step)."""

    app: str  # "app web version 1.0"
    view: Any  # the ClusterView

    def app_count(self, state: Any) -> int: ...

    def app_nodes(self) -> Mapping[str, int]: ...

    def domain_counts(self, key: str) -> Mapping[str, int]: ...

    def domain_pods(self, key: str, value: str, first: int) -> list[str]: ...

    def rule_context(self, state: Any, rule: CompiledRule) -> dict[str, Any]: ...

    def session_key(self, state: Any, rule: CompiledRule) -> Any: ...


Failures = dict[str, Failure]  # node name -> why the predicate rejects it


def _specialised(state: Any) -> list[str]:
    return sorted(state.node.tags)


def _each(predicate: Any, cands: Mapping[str, Any], probe: Probe) -> Failures:
    """`check` node by node."""
    out = {}
    for name, state in cands.items():
        failure = predicate.check(state, probe)
        if failure is not None:
            out[name] = failure
    return out


def _per_node_record(predicate: Any, cands: Mapping[str, Any], probe: Probe) -> Failures:
    """The failures of a predicate that reads only the node record: worked out for every node once,
    kept by the view until a node changes."""
    view = probe.view
    every = view.node_memo(
        ("policy/failures", predicate), lambda: _each(predicate, view.states_by_name(), probe)
    )
    return {n: f for n, f in every.items() if n in cands}


@dataclass(frozen=True, slots=True)
class AnyNode:
    type = m.ANY
    node_only = True

    def check(self, state: Any, probe: Probe) -> Failure | None:
        return None

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        return {}


def _on_app_nodes(cands: Mapping[str, Any], probe: Probe, fails: Callable[[int], Failure | None]) -> Failures:
    """A per-host count's failures: only nodes running the app can fail one; nodes with the same
    count share one Failure."""
    out = {}
    by_count: dict[int, Failure | None] = {}
    for name, count in probe.app_nodes().items():
        if name not in cands:
            continue
        if count not in by_count:
            by_count[count] = fails(count)
        failure = by_count[count]
        if failure is not None:
            out[name] = failure
    return out


def _on_app_domains(
    cands: Mapping[str, Any], probe: Probe, key: str, fails: Callable[[int, str], Failure | None], kind: str
) -> Failures:
    """A per-domain count's failures: the nodes of the domains whose count fails, and the nodes
    without the label; one Failure per domain."""
    domains = probe.view.domains(key)
    out: Failures = {}
    for value, count in probe.domain_counts(key).items():
        failure = fails(count, value)
        if failure is not None:
            for name in domains.members.get(value, ()):
                if name in cands:
                    out[name] = failure
    if domains.unlabelled:
        unlabelled = _unlabelled(kind, key)
        for name in domains.unlabelled:
            if name in cands:
                out[name] = unlabelled
    return out


def _unlabelled(kind: str, key: str) -> Failure:
    """A per-domain count on a node without the label: the count cannot be shown to hold there."""
    return Failure(kind, f"the node has no label {key}, the topologyKey the policy counts by", False, {})


def _domain(key: str, value: str) -> str:
    return f"{short(key)} {value} ({key})"


def _pods_in(probe: Probe, key: str, value: str, count: int) -> str:
    """The pods of the app in a domain, as a message names them: "web-1, web-2 and 3 more"."""
    pods = probe.domain_pods(key, value, 3)
    return ", ".join(pods) + (f" and {count - len(pods)} more" if count > len(pods) else "")


@dataclass(frozen=True, slots=True)
class OnePerHost:
    topology: str | None = None
    type = m.ONE_PER_HOST
    node_only = False

    def check(self, state: Any, probe: Probe) -> Failure | None:
        if self.topology is None:
            return self._verdict(probe.app_count(state), probe)
        value = probe.view.domains(self.topology).of.get(state.node.name)
        if value is None:
            return _unlabelled(self.type, self.topology)
        return self._in_domain(probe.domain_counts(self.topology).get(value, 0), value, probe)

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        if self.topology is not None:
            return _on_app_domains(
                cands, probe, self.topology, lambda c, v: self._in_domain(c, v, probe), self.type
            )
        return _on_app_nodes(cands, probe, lambda count: self._verdict(count, probe))

    def _verdict(self, count: int, probe: Probe) -> Failure | None:
        if not count:
            return None
        return Failure(self.type, f"a pod of {probe.app} is already on the node", True, {"pods": count})

    def _in_domain(self, count: int, value: str, probe: Probe) -> Failure | None:
        if not count:
            return None
        key = self.topology or ""
        return Failure(
            self.type,
            f"{_domain(key, value)} already runs {_pods_in(probe, key, value, count)} of {probe.app}",
            True,
            {"pods": count, "topologyKey": key, "domain": value},
        )


@dataclass(frozen=True, slots=True)
class MaxNPerHost:
    max: int
    topology: str | None = None
    type = m.MAX_N_PER_HOST
    node_only = False

    def check(self, state: Any, probe: Probe) -> Failure | None:
        if self.topology is None:
            return self._verdict(probe.app_count(state), probe)
        value = probe.view.domains(self.topology).of.get(state.node.name)
        if value is None:
            return _unlabelled(self.type, self.topology)
        return self._in_domain(probe.domain_counts(self.topology).get(value, 0), value, probe)

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        if self.max <= 0:  # every node is at its maximum
            return _each(self, cands, probe)
        if self.topology is not None:
            return _on_app_domains(
                cands, probe, self.topology, lambda c, v: self._in_domain(c, v, probe), self.type
            )
        return _on_app_nodes(cands, probe, lambda count: self._verdict(count, probe))

    def _verdict(self, count: int, probe: Probe) -> Failure | None:
        if count < self.max:
            return None
        return Failure(
            self.type,
            f"the node already holds the maximum of {self.max} pod(s) of {probe.app}",
            True,
            {"pods": count},
        )

    def _in_domain(self, count: int, value: str, probe: Probe) -> Failure | None:
        if count < self.max:
            return None
        key = self.topology or ""
        return Failure(
            self.type,
            f"{_domain(key, value)} already holds the maximum of {self.max} pod(s) of {probe.app}: "
            f"{_pods_in(probe, key, value, count)}",
            True,
            {"pods": count, "topologyKey": key, "domain": value},
        )


@dataclass(frozen=True, slots=True)
class MatchTag:
    tag: str
    type = m.MATCH_TAG
    node_only = True

    def check(self, state: Any, probe: Probe) -> Failure | None:
        node = state.node
        if self.tag == node.name or self.tag in node.tags:
            return None
        return Failure(
            self.type, f"the node does not carry tag {self.tag!r}", False, {"tags": sorted(node.all_tags)}
        )

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        return _per_node_record(self, cands, probe)


@dataclass(frozen=True, slots=True)
class NoTag:
    # The type the NO_TAG was added to automatically, "" when the user wrote it.
    added_to: str = ""
    type = m.NO_TAG
    node_only = True

    def check(self, state: Any, probe: Probe) -> Failure | None:
        tags = _specialised(state)
        if not tags:
            return None
        label = f"{self.type} (added to {self.added_to})" if self.added_to else self.type
        message = "the node is specialised: it carries tags besides its hostname"
        return Failure(label, message, False, {"tags": tags})

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        return _per_node_record(self, cands, probe)


@dataclass(frozen=True, slots=True)
class Rule:
    rule: CompiledRule
    type = m.RULE_BASED

    @property
    def node_only(self) -> bool:
        return self.rule.node_only

    def check(self, state: Any, probe: Probe) -> Failure | None:
        rule = self.rule
        verdict = rule.evaluate_node(
            state.node, lambda: probe.rule_context(state, rule), probe.session_key(state, rule)
        )
        if verdict.ok:
            return None
        return Failure(self.type, verdict.why, False, {})

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        return _each(self, cands, probe)


@dataclass(frozen=True, slots=True)
class Composite:
    children: tuple[Predicate, ...]
    combiner: str = "AND"
    type = m.COMPOSITE

    @property
    def node_only(self) -> bool:
        return all(child.node_only for child in self.children)

    def check(self, state: Any, probe: Probe) -> Failure | None:
        if self.combiner == "OR":
            failures = []
            for child in self.children:
                failure = child.check(state, probe)
                if failure is None:
                    return None
                failures.append(failure)
            return self._none_holds(failures)
        return first_failure((child.check(state, probe) for child in self.children), _hopeless)

    def _none_holds(self, failures: list[Failure]) -> Failure:
        detail = "; ".join(f"{f.type}: {f.message}" for f in failures)
        values: dict[str, Any] = {}
        for f in failures:
            values.update(f.values)
        return Failure(
            f"{self.type} OR",
            f"no policy of the OR holds ({detail})",
            any(f.exhausted for f in failures),
            values,
        )

    def failures(self, cands: Mapping[str, Any], probe: Probe) -> Failures:
        if self.node_only:
            return _per_node_record(self, cands, probe)
        if self.combiner == "OR":
            # A node fails only if every child fails it: each child looks only at the nodes that
            # failed every child before it.
            each: list[Failures] = []
            among = cands
            for child in self.children:
                found = child.failures(among, probe)
                if not found:
                    return {}
                each.append(found)
                among = {n: among[n] for n in found}
            return {n: self._none_holds([f[n] for f in each]) for n in among}
        parts = [functools.partial(_failures_of, child, probe=probe) for child in self.children]
        return and_failures(parts, cands, _hopeless)


def _failures_of(child: Predicate, among: Mapping[str, Any], *, probe: Probe) -> Failures:
    return child.failures(among, probe)


def _hopeless(failure: Failure) -> bool:
    """No eviction can help this failure."""
    return not failure.exhausted


Predicate = AnyNode | OnePerHost | MaxNPerHost | MatchTag | NoTag | Rule | Composite


def walk(predicate: Predicate) -> list[Predicate]:
    """The predicate and every descendant."""
    out: list[Predicate] = [predicate]
    if isinstance(predicate, Composite):
        for child in predicate.children:
            out.extend(walk(child))
    return out


def allows_specialised(policy: m.Policy) -> bool:
    """Drove's shouldAllowCombiningOfPolicy: MATCH_TAG, RULE_BASED, or a COMPOSITE holding one."""
    if isinstance(policy, m.MatchTagPolicy | m.RuleBasedPolicy):
        return True
    if isinstance(policy, m.CompositePolicy):
        return any(allows_specialised(p) for p in policy.policies)
    return False


def _build(policy: m.Policy, path: str, problems: list[str]) -> Predicate:
    if isinstance(policy, m.AnyPolicy):
        return AnyNode()
    if isinstance(policy, m.OnePerHostPolicy):
        return OnePerHost(per_domain(policy.topologyKey))
    if isinstance(policy, m.MaxNPerHostPolicy):
        return MaxNPerHost(policy.max, per_domain(policy.topologyKey))
    if isinstance(policy, m.MatchTagPolicy):
        return MatchTag(policy.tag)
    if isinstance(policy, m.NoTagPolicy):
        return NoTag()
    if isinstance(policy, m.RuleBasedPolicy):
        rule, found = check_rule(policy.rule)
        problems.extend(f"{path}.rule: {p}" for p in found)
        return Rule(rule) if rule is not None else AnyNode()
    children = tuple(_build(p, f"{path}.policies[{i}]", problems) for i, p in enumerate(policy.policies))
    return Composite(children, policy.combiner or "AND")


def effective(policy: m.Policy, path: str, problems: list[str]) -> Predicate:
    """The predicate tree of a policy, with Drove's automatic NO_TAG."""
    tree = _build(policy, path, problems)
    if allows_specialised(policy) or isinstance(policy, m.NoTagPolicy):
        return tree
    # NO_TAG first: it is cheap, and its "no" is one no eviction can help.
    return Composite((NoTag(added_to=policy.type), tree), "AND")


def _selector(selector: m.LabelSelector) -> Selector:
    return Selector(
        labels=tuple(sorted((selector.matchLabels or {}).items())),
        expressions=tuple(
            (r.key, r.operator, frozenset(r.values or ())) for r in selector.matchExpressions or ()
        ),
    )


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    """One PlacementPolicy, ready for the engine, or not Ready with its problems."""

    namespace: str
    name: str
    # The root type as written ("" when the tree is invalid).
    type: str = ""
    predicate: Predicate | None = None
    # None: the policy selects no pod by labels (only pods that name it in berth.dev/placement-policy).
    selector: Selector | None = None
    errors: tuple[str, ...] = ()
    generation: int | None = None
    # The spec as canonical JSON: an unchanged spec is not compiled again.
    source: str = ""
    # How messages name it: "namespace/name", or the file a bare policy tree came from.
    label: str = ""
    # The named policy does not exist: every node is refused, naming it.
    missing: bool = False
    rules: tuple[CompiledRule, ...] = field(default=(), repr=False)

    @property
    def ref(self) -> str:
        return self.label or f"{self.namespace}/{self.name}"

    @property
    def ready(self) -> bool:
        return not self.errors and not self.missing and self.predicate is not None

    @property
    def counts_app(self) -> bool:
        """The policy counts pods per app name and version (per-host limits or ctx.session)."""
        if self.predicate is None:
            return False
        return any(
            isinstance(p, OnePerHost | MaxNPerHost) or (isinstance(p, Rule) and p.rule.reads_session)
            for p in walk(self.predicate)
        )

    @property
    def per_domain(self) -> bool:
        """A count of the policy is per topology domain (it reads the other nodes of a node's domain)."""
        if self.predicate is None:
            return False
        return any(
            isinstance(p, OnePerHost | MaxNPerHost) and p.topology is not None for p in walk(self.predicate)
        )

    @property
    def reads_session(self) -> bool:
        return any(r.reads_session for r in self.rules)

    def invalid(self) -> InvalidPolicy:
        """The 400 a pod governed by this not-Ready policy gets."""
        head = f"PlacementPolicy {self.ref} is not Ready"
        lines = [f"{head}: {e}" for e in self.errors]
        message = lines[0] if len(lines) == 1 else f"{head}: " + "; ".join(self.errors)
        field_ = self.errors[0].split(":", 1)[0] if self.errors else "spec"
        return InvalidPolicy(message, field=field_, errors=lines)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _compile_tree(
    raw: Any, prefix: str, problems: list[str]
) -> tuple[str, Predicate | None, tuple[CompiledRule, ...]]:
    policy, found = m.parse_policy(raw, prefix)
    if policy is None:
        # Every problem at once: the rules of an otherwise invalid tree are checked too.
        rule_problems = _raw_rule_problems(raw, prefix) if m.shape_ok(raw) else []
        problems.extend(sorted([*found, *rule_problems], key=_field_order))
        return "", None, ()
    before = len(problems)
    predicate = effective(policy, prefix, problems)
    if len(problems) > before:
        return policy.type, None, ()
    rules = tuple(p.rule for p in walk(predicate) if isinstance(p, Rule))
    return policy.type, predicate, rules


def _raw_rule_problems(raw: Any, path: str) -> list[str]:
    """The problems of every RULE_BASED rule written in a tree the model refused."""
    if not isinstance(raw, dict):
        return []
    out: list[str] = []
    rule = raw.get("rule")
    if raw.get("type") == m.RULE_BASED and isinstance(rule, str) and 0 < len(rule) <= m.MAX_RULE_CHARS:
        out.extend(f"{path}.rule: {p}" for p in check_rule(rule)[1])
    children = raw.get("policies")
    if isinstance(children, list):
        for i, child in enumerate(children):
            out.extend(_raw_rule_problems(child, f"{path}.policies[{i}]"))
    return out


def _field_order(problem: str) -> list[Any]:
    """Problems in the order their fields appear in the tree (policies[2] before policies[10])."""
    field_ = problem.split(":", 1)[0]
    return [int(p) if p.isdigit() else p for p in re.split(r"\[(\d+)\]", field_)]


SPEC_FIELDS = ("selector", "policy")


def load_policy(obj: Mapping[str, Any]) -> CompiledPolicy:
    """A PlacementPolicy object compiled; never raises (an invalid one carries its errors)."""
    problems: list[str] = []
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    name = name if isinstance(name, str) else ""
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    namespace = namespace or "default"
    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else None
    api = obj.get("apiVersion")
    if api is not None and api != m.API_VERSION:
        problems.append(f"apiVersion: must be {m.API_VERSION}, found {api!r}")
    if not name:
        problems.append("metadata.name: is required")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec: is required" if spec is None else "spec: must be an object")
        return CompiledPolicy(namespace, name, errors=tuple(problems), generation=generation)
    for key in spec:
        if key not in SPEC_FIELDS:
            problems.append(
                f"spec.{key}: is not a field of a PlacementPolicy spec (it takes {', '.join(SPEC_FIELDS)})"
            )
    selector_model, found = m.parse_selector(spec.get("selector"))
    problems.extend(found)
    kind, predicate, rules = _compile_tree(spec.get("policy"), "spec.policy", problems)
    return CompiledPolicy(
        namespace=namespace,
        name=name,
        type=kind,
        predicate=predicate if not problems else None,
        selector=_selector(selector_model) if selector_model is not None else None,
        errors=tuple(problems),
        generation=generation,
        source=_canonical(spec),
        rules=rules,
    )


def reload_policy(current: CompiledPolicy | None, obj: Mapping[str, Any]) -> CompiledPolicy:
    """load_policy(), reusing `current` when the spec is unchanged (its compiled rules keep their
    per-node caches); only the generation is updated then."""
    spec = obj.get("spec")
    if current is not None and current.ready and current.source == _canonical(spec):
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        generation = meta.get("generation") if isinstance(meta.get("generation"), int) else None
        return current if current.generation == generation else replace(current, generation=generation)
    return load_policy(obj)


def load_tree(tree: Any, *, label: str, namespace: str = "default") -> CompiledPolicy:
    """A bare policy tree `{"type": ...}` (as `berth simulate --policy` reads it); paths start at
    `policy`."""
    problems: list[str] = []
    kind, predicate, rules = _compile_tree(tree, "policy", problems)
    return CompiledPolicy(
        namespace=namespace,
        name=label,
        type=kind,
        predicate=predicate if not problems else None,
        errors=tuple(problems),
        source=_canonical(tree),
        label=label,
        rules=rules,
    )


def compile_policy(obj: Mapping[str, Any]) -> CompiledPolicy:
    """load_policy(), raising InvalidPolicy listing every problem when the object is invalid."""
    policy = load_policy(obj)
    if policy.errors:
        raise _error(policy)
    return policy


def _error(policy: CompiledPolicy) -> InvalidPolicy:
    return InvalidPolicy.from_problems(list(policy.errors))


def missing_policy(namespace: str, name: str) -> CompiledPolicy:
    """The stand-in for a policy a pod names that does not exist."""
    return CompiledPolicy(namespace=namespace, name=name, missing=True)


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def name_problem(value: str) -> str | None:
    """What is wrong with a PlacementPolicy name in berth.dev/placement-policy, or None."""
    name = value.strip()
    if not name:
        return "no value specified"
    if len(name) > 253 or not _NAME.match(name):
        return f"{name!r} is not a valid object name (lowercase letters, digits, '-' and '.', at most 253)"
    return None


def is_policy_tree(obj: Any) -> bool:
    """A bare policy tree rather than a Kubernetes object."""
    return isinstance(obj, dict) and "type" in obj and "kind" not in obj
