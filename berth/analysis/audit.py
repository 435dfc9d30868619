"""`berth audit`: the bound pods evaluated against their own rules, as the cluster is now.

A pod is audited when it is bound to a node of the view and carries a berth rule (an annotation other
than its instance tags) or a PlacementPolicy governs it. Each one is asked about through the engine's
decide(), which takes it off its node in the view for the question (it is never its own neighbour):

1. on the node it is on: the hard rules that node breaks now, each with the text the extender would
   give (the chain stops at the first rule that removes a node, so the audit asks again without that
   rule until the node passes, to name every rule the pod breaks there);
2. only when the node it is on breaks a rule (otherwise that node would take it again): on every node,
   and a pod that no node satisfies is refused at its next reschedule, with the rules that refuse it;
3. what decide() says of the specification itself: invalid (400) or on the deprecated weighted form.

Only the chain's hard steps run: soft filters, the tag-affinity tier and scorers never refuse a node
that is the only one asked about, nor make a placeable pod unplaceable. The operator counts the pods
that violate one PlacementPolicy with `policy_counts`, through the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from berth import annotations as ann
from berth.cluster.model import Pod
from berth.cluster.view import ClusterView, NodeState
from berth.engine.chain import Member, Or, Pipe, flatten
from berth.engine.decide import decide
from berth.engine.decision import Decision
from berth.engine.pipeline import Pipeline
from berth.engine.types import Kind, Phase
from berth.vocab.policy.compile import CompiledPolicy
from berth.vocab.policy.steps import PlacementPolicyStep

# The annotations that ask something of the node or the neighbours (berth.dev/tags only describes the
# pod to others; berth.dev/placement records a decision).
RULE_ANNOTATIONS = tuple(a for a in ann.POD_ANNOTATIONS if a != ann.TAGS)
DEPRECATED_EVENT = "DeprecatedAffinity"
AUDIT_SEED = 0  # only feasibility is read: the seed breaks ties between scores, which are not asked


@dataclass(frozen=True, slots=True)
class Violation:
    """A hard rule the node the pod is on breaks now."""

    pod: str
    node: str
    rule: str  # the step name: tags/require_with_tag, policy/placement-policy, alloc/hard-filter-traits
    reason: str  # what the extender says of that node (kube-scheduler counts this text)
    kind: str  # unmet (no eviction can help) or exhausted (an eviction could)
    values: dict[str, Any] = field(default_factory=dict)
    # The pods of its namespace on its node whose presence makes the node break the rule.
    collides_with: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "node": self.node, "rule": self.rule}
        out |= {"reason": self.reason, "kind": self.kind}
        if self.values:
            out["values"] = self.values
        if self.collides_with:
            out["collidesWith"] = list(self.collides_with)
        return out


@dataclass(frozen=True, slots=True)
class Refusal:
    """A pod that no node satisfies now: its next reschedule would be refused."""

    pod: str
    node: str
    rules: tuple[str, ...]  # the steps that removed nodes
    message: str  # the 409 text

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "rules": list(self.rules), "message": self.message}


@dataclass(frozen=True, slots=True)
class Note:
    """A finding about the specification itself: deprecated or invalid."""

    pod: str
    node: str
    message: str
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "node": self.node, "message": self.message}
        if len(self.errors) > 1:
            out["errors"] = list(self.errors)
        return out


# The kinds of finding, as --fail-on names them.
FINDING_KINDS = ("violation", "refused", "deprecated", "invalid")


@dataclass
class AuditReport:
    checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    deprecated: list[Note] = field(default_factory=list)
    invalid: list[Note] = field(default_factory=list)
    # Not findings: what the reader should know about the audit itself (a what-if that governs nothing).
    warnings: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.violations or self.refused or self.deprecated or self.invalid)

    def of_kind(self, kind: str) -> list[Any]:
        return {
            "violation": self.violations,
            "refused": self.refused,
            "deprecated": self.deprecated,
            "invalid": self.invalid,
        }[kind]

    def fails(self, kinds: Iterable[str]) -> bool:
        """Whether any finding is of one of these kinds (audit --fail-on: exit 1)."""
        return any(self.of_kind(k) for k in kinds)

    def pods_found(self) -> list[str]:
        """The pods with any finding, by namespace/name."""
        return sorted({f.pod for k in FINDING_KINDS for f in self.of_kind(k)})

    def findings(self) -> int:
        return len(self.violations) + len(self.refused) + len(self.deprecated) + len(self.invalid)

    def by_rule(self) -> dict[str, list[Violation]]:
        """The violations grouped by rule, rules by name."""
        groups: dict[str, list[Violation]] = {}
        for v in sorted(self.violations, key=lambda v: (v.rule, v.pod)):
            groups.setdefault(v.rule, []).append(v)
        return groups

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "clean": self.clean,
            "violations": {rule: [v.to_dict() for v in vs] for rule, vs in self.by_rule().items()},
            "refusedOnReschedule": [r.to_dict() for r in self.refused],
            "deprecated": [n.to_dict() for n in self.deprecated],
            "invalid": [n.to_dict() for n in self.invalid],
            "warnings": list(self.warnings),
        }


IDENTITY = "alloc/identity"


def hard_only(pipeline: Pipeline, *, one_node: bool = False) -> Pipeline:
    """The pipeline with only its hard steps, in the same `pipe`/`or` structure. For a decision about
    one node (`one_node`), an `or` with an identity member is left out too: given one node, it always
    hands that node on (over many, its first member may keep only some, which later steps then see)."""
    chain = _keep(pipeline.chain, lambda name, phase: phase is Phase.HARD, drop_identity_or=one_node)
    return Pipeline(chain=chain or Pipe(()), compile_pod=pipeline.compile_pod)


def _keep(member: Member, wanted: Any, *, drop_identity_or: bool = False) -> Member | None:
    if isinstance(member, Or) and drop_identity_or and any(_is_identity(m) for m in member.members):
        return None
    if isinstance(member, Pipe | Or):
        found = (_keep(m, wanted, drop_identity_or=drop_identity_or) for m in member.members)
        kept = tuple(k for k in found if k is not None)
        if not kept:
            return None
        return Pipe(kept) if isinstance(member, Pipe) else Or(kept)
    return member if wanted(member.name, member.phase) else None


def _is_identity(member: Member) -> bool:
    return not isinstance(member, Pipe | Or) and member.name == IDENTITY


def _without(pipeline: Pipeline, step: str) -> Pipeline | None:
    """The pipeline without the step named `step` (None when nothing is left to ask)."""
    chain = _keep(pipeline.chain, lambda name, phase: name != step)
    if chain is None or not flatten(chain):
        return None
    return Pipeline(chain=chain, compile_pod=pipeline.compile_pod)


def is_subject(pod: Pod, view: ClusterView) -> bool:
    """A bound pod on a node of the view with a berth rule or a PlacementPolicy."""
    if not pod.node_name or view.state(pod.node_name) is None:
        return False
    return any(a in pod.annotations for a in RULE_ANNOTATIONS) or bool(view.policies_for(pod))


def subjects(view: ClusterView, namespaces: Iterable[str] = ()) -> list[Pod]:
    """The pods to audit, by namespace/name; only those of `namespaces` when any are given."""
    wanted = set(namespaces)
    pods = (p for ns in sorted(wanted) for p in view.namespace_pods(ns)) if wanted else view.pods()
    return sorted((p for p in pods if is_subject(p, view)), key=lambda p: p.key)


@dataclass
class PodFindings:
    violations: list[Violation] = field(default_factory=list)
    refusal: Refusal | None = None
    deprecated: Note | None = None
    invalid: Note | None = None


def audit_pod(
    view: ClusterView, pipeline: Pipeline, pod: Pod, *, reschedule: Pipeline | None = None
) -> PodFindings:
    """What the audit finds about one bound pod: `pipeline` asks about the node it is on (hard steps
    only, see hard_only), `reschedule` (when given) about every node when that node breaks a rule."""
    out = PodFindings()
    first = decide(pod, view, pipeline, candidates=[pod.node_name], seed=AUDIT_SEED)
    if first.error is not None and first.error.code == 400:
        out.invalid = Note(pod.key, pod.node_name, first.error.message, first.error.errors)
        return out
    out.deprecated = _deprecated(pod, first)
    if first.error is None:
        return out
    out.violations = _violations(view, pipeline, pod, first)
    if reschedule is not None:
        anywhere = decide(pod, view, reschedule, seed=AUDIT_SEED)
        if anywhere.error is not None and anywhere.error.code == 409:
            rules = sorted({r.step for r in anywhere.failures().values() if r.kind is not Kind.SET_ASIDE})
            out.refusal = Refusal(pod.key, pod.node_name, tuple(rules), anywhere.error.message)
    return out


def _deprecated(pod: Pod, decision: Decision) -> Note | None:
    event = next((e for e in decision.events if e.reason == DEPRECATED_EVENT), None)
    return Note(pod.key, pod.node_name, event.message) if event is not None else None


def _violations(view: ClusterView, pipeline: Pipeline, pod: Pod, first: Decision) -> list[Violation]:
    """Every hard rule the pod's node breaks: the first one's, then again without it, and so on."""
    found: list[Violation] = []
    decision: Decision | None = first
    asked: Pipeline | None = pipeline
    while decision is not None and decision.error is not None and asked is not None:
        reason = decision.failures().get(pod.node_name)
        if reason is None or decision.error.code != 409:
            break
        node = pod.node_name
        found.append(Violation(pod.key, node, reason.step, reason.short(), reason.kind, reason.values))
        asked = _without(asked, reason.step)
        decision = decide(pod, view, asked, candidates=[node], seed=AUDIT_SEED) if asked else None
    return found


def audit(view: ClusterView, pipeline: Pipeline, *, namespaces: Iterable[str] = ()) -> AuditReport:
    """Every subject pod of the view (of `namespaces` when given) audited with `pipeline`'s hard
    steps. A pod's rules see only its own namespace, so auditing one namespace needs nothing else.
    Of the pods that break a rule together, only those beyond what the rule allows are reported (see
    `_excess`), each naming the pods it collides with."""
    here, anywhere = hard_only(pipeline, one_node=True), hard_only(pipeline)
    report = AuditReport()
    pods = subjects(view, namespaces)
    found = {pod.key: audit_pod(view, here, pod, reschedule=anywhere) for pod in pods}
    report.checked = len(pods)
    excess = _excess(view, here, [p for p in pods if found[p.key].violations], found)
    for pod in pods:
        findings = found[pod.key]
        # A pod within what its rules allow, once the pods beyond it are counted, has no violation.
        report.violations.extend(excess.get(pod.key, ()))
        if findings.refusal is not None and pod.key in excess:
            report.refused.append(findings.refusal)
        if findings.deprecated is not None:
            report.deprecated.append(findings.deprecated)
        if findings.invalid is not None:
            report.invalid.append(findings.invalid)
    return report


def youngest_first(pods: Iterable[Pod]) -> list[Pod]:
    """The last started first (a pod not started yet is the youngest), then by name, last first."""
    return sorted(pods, key=lambda p: (p.start_time or "~", p.key), reverse=True)


def _excess(
    view: ClusterView, pipeline: Pipeline, violators: list[Pod], found: dict[str, PodFindings]
) -> dict[str, list[Violation]]:
    """The violating pods beyond what their rules allow, with the violations they still have: three
    pods of a ONE_PER_HOST policy on one node are two pods too many, not three. Taken youngest first,
    a pod still breaking one of its rules with the pods already found excess taken off is excess too,
    and is taken off in turn; a pod that no longer breaks any (the oldest of the three) is not reported.
    A rule that does not depend on other pods (a node trait) keeps every pod that breaks it. The view is
    as it was when this returns."""
    out: dict[str, list[Violation]] = {}
    taken: list[Pod] = []
    try:
        for pod in youngest_first(violators):
            broken = found[pod.key].violations
            if taken:  # ask again without the pods found excess so far
                rules = {v.rule for v in broken}
                first = decide(pod, view, pipeline, candidates=[pod.node_name], seed=AUDIT_SEED)
                broken = [v for v in _violations(view, pipeline, pod, first) if v.rule in rules]
            broken = [_with_collisions(view, pipeline, pod, v) for v in broken]
            if broken:
                out[pod.key] = broken
                view.remove_pod(pod.key)
                taken.append(pod)
    finally:
        for pod in taken:
            view.put_back(pod)
    return out


def _neighbours(view: ClusterView, state: NodeState, violation: Violation) -> Iterator[Pod]:
    """The pods a rule broken on this node may count: the node's own, or with a per-domain rule (its
    reason names the topologyKey and the domain) the pods on every node of the domain."""
    key, domain = violation.values.get("topologyKey"), violation.values.get("domain")
    if not key or domain is None:
        yield from state.pods.values()
        return
    for name in view.domains(key).members.get(domain, ()):
        held = view.state(name)
        if held is not None:
            yield from held.pods.values()


def _with_collisions(view: ClusterView, pipeline: Pipeline, pod: Pod, violation: Violation) -> Violation:
    """The violation naming the pods of the pod's namespace on its node (on the nodes of its domain, for
    a per-domain rule) that make it break the rule:
    all of them off, the rule holds; each put back, oldest first, and kept off again when the rule
    breaks with it back (kube's way of choosing victims). Nothing is named when the rule breaks with
    all of them off (it is about the node, or pods elsewhere)."""
    only = _keep(pipeline.chain, lambda name, phase: name == violation.rule)
    state = view.state(pod.node_name)
    if only is None or state is None:
        return violation
    asked = Pipeline(chain=only, compile_pod=pipeline.compile_pod)

    def holds() -> bool:
        decision = decide(pod, view, asked, candidates=[pod.node_name], seed=AUDIT_SEED)
        return decision.chosen == pod.node_name

    others = sorted(
        (p for p in _neighbours(view, state, violation) if p.namespace == pod.namespace and p.key != pod.key),
        key=lambda p: (p.start_time or "~", p.key),
    )
    if not others:
        return violation
    colliding: list[str] = []
    off = list(others)
    for other in off:
        view.remove_pod(other.key)
    try:
        if not holds():
            return violation
        for other in others:
            view.put_back(other)
            off.remove(other)
            if not holds():
                view.remove_pod(other.key)
                off.append(other)
                colliding.append(other.key)
    finally:
        for other in off:
            view.put_back(other)
    return replace(violation, collides_with=tuple(colliding))


# -- one PlacementPolicy: what the operator writes in its status -----------------------------------------
@dataclass(frozen=True, slots=True)
class PolicyCounts:
    governed: int  # bound pods the policy governs
    violating: int  # of them, those whose node the policy refuses now


def governed_pods(view: ClusterView, policy: CompiledPolicy) -> Iterator[Pod]:
    """The bound pods of the policy's namespace that it governs (by selector, or named by annotation)."""
    for pod in view.namespace_pods(policy.namespace):
        if not pod.node_name or view.state(pod.node_name) is None:
            continue
        if any(p.name == policy.name and p.namespace == policy.namespace for p in view.policies_for(pod)):
            yield pod


def policy_counts(view: ClusterView, policy: CompiledPolicy, compile_pod: Any) -> PolicyCounts:
    """How many bound pods `policy` governs in the view, and how many of them it alone refuses where
    they are (the other policies a pod may have are not asked)."""
    pods = sorted(governed_pods(view, policy), key=lambda p: p.key)
    if not policy.ready:
        return PolicyCounts(governed=len(pods), violating=0)
    pipeline = Pipeline(chain=Pipe((PlacementPolicyStep(),)), compile_pod=compile_pod)
    view.override_policies([policy])
    try:
        found = {pod.key: audit_pod(view, pipeline, pod) for pod in pods}
        # As `berth audit` counts: the pods beyond what the policy allows.
        violating = len(_excess(view, pipeline, [p for p in pods if found[p.key].violations], found))
    finally:
        view.override_policies(None)
    return PolicyCounts(governed=len(pods), violating=violating)
