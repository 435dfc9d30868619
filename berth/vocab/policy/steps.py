"""The engine step of placement policies: every PlacementPolicy governing the pod must accept the node.

`prepare` finds the governing policies once per pod (ClusterView.policies_for) and refuses the pod as a
whole when one is not Ready (400, with the policy's own errors) or when a per-host count has no app to
count by. `check` asks each policy's predicate tree about one node; the Reason names the policy, the
sub-policy type that failed and why. `removals` asks the trees about every candidate at once (see
compile.py), and keeps the Reasons of a policy that reads only node records until a node changes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berth import annotations as ann
from berth.cluster.view import NodeState, app_key
from berth.engine.step import NodeFilter, PodContext, Removals, Skipped, skip
from berth.engine.types import Event, Kind, Reason, StepTrace
from berth.errors import InvalidPolicy
from berth.vocab import step_names
from berth.vocab.policy.cel import CompiledRule, node_context, pod_context, session_context
from berth.vocab.policy.combine import and_failures, first_failure
from berth.vocab.policy.compile import CompiledPolicy, Failure

POLICY_STEP = step_names.PLACEMENT_POLICY


class _Probe:
    """What the predicates ask about the pod, built once per pod."""

    def __init__(self, ctx: PodContext, *, session: bool) -> None:
        self.ctx = ctx
        self.view = ctx.view
        _, self.app_name, self.app_version = app_key(ctx.pod)
        version = f"version {self.app_version}" if self.app_version else "without a version label"
        self.app = f"app {self.app_name} {version}"
        self._pod: dict[str, Any] | None = None
        self._app_nodes: dict[str, int] | None = None
        self._session = session_context(self.app_nodes()) if session else None
        self._nodes: dict[str, dict[str, Any]] = {}

    def app_nodes(self) -> Mapping[str, int]:
        """Node -> pods of the pod's namespace, app name and version on it."""
        if self._app_nodes is None:
            self._app_nodes = self._session_nodes()
        return self._app_nodes

    def _session_nodes(self) -> dict[str, int]:
        return dict(self.ctx.view.app_nodes(app_key(self.ctx.pod)))

    def app_count(self, state: NodeState) -> int:
        return self.ctx.app_count(state)

    def domain_counts(self, key: str) -> Mapping[str, int]:
        """Domain of `key` -> pods of the pod's namespace, app name and version on its nodes."""
        return self.view.domain_app_counts(key, app_key(self.ctx.pod))

    def domain_pods(self, key: str, value: str, first: int) -> list[str]:
        """The names of the first few pods of the app on the nodes of one domain, in the view's order."""
        app = app_key(self.ctx.pod)
        on = self.view.app_nodes(app)
        names: list[str] = []
        for node in self.view.domains(key).members.get(value, ()):
            if node in on and (state := self.view.state(node)) is not None:
                names.extend(p.name for p in state.pods.values() if app_key(p) == app)
                if len(names) >= first:
                    return names[:first]
        return names

    def rule_context(self, state: NodeState, rule: CompiledRule) -> dict[str, Any]:
        name = state.node.name
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = node_context(state.node)
        if self._pod is None:
            self._pod = pod_context(self.ctx.pod, self.app_name, self.app_version)
        out: dict[str, Any] = {"allocation": {"node": node}, "pod": self._pod}
        if self._session is not None:
            if rule.session_by_host:  # all the rule can read of it: this node's entry and the count
                count = self.app_nodes().get(name)
                out["session"] = {"nodes": {name: count} if count else {}, "count": self._session["count"]}
            else:
                out["session"] = self._session
        return out

    def session_key(self, state: NodeState, rule: CompiledRule) -> Any:
        """The session values `rule` reads for this node (with the node, what its verdict depends on)."""
        if not rule.session_by_host or self._session is None:
            return None
        entry = self.app_nodes().get(state.node.name, 0)
        return (entry, self._session["count"]) if rule.reads_count else entry


@dataclass
class Governing:
    """The step's per-pod state: the policies that govern the pod, in order."""

    policies: tuple[CompiledPolicy, ...]
    probe: _Probe
    # The policies that removed at least one node (named by a 409).
    refused: dict[str, CompiledPolicy] = field(default_factory=dict)


def _missing_reason(policy: CompiledPolicy) -> str:
    return (
        f"PlacementPolicy {policy.ref} named by annotation {ann.PLACEMENT_POLICY} does not exist in "
        f"namespace {policy.namespace}"
    )


class PlacementPolicyStep(NodeFilter[Governing]):
    """Removes nodes that a PlacementPolicy governing the pod does not accept."""

    name = POLICY_STEP
    summary = "hard: every PlacementPolicy governing the pod accepts the node"

    def prepare(self, ctx: PodContext) -> Governing | Skipped:
        # The annotation's own shape was checked with the pod's other annotations (berth.vocab.pod).
        policies = ctx.view.policies_for(ctx.pod)
        if not policies:
            return skip("no PlacementPolicy governs the pod")
        broken = [p for p in policies if not p.missing and not p.ready]
        if broken:
            if len(broken) == 1:
                raise broken[0].invalid()
            errors = [e for p in broken for e in p.invalid().errors]
            raise InvalidPolicy.from_problems(errors, field=broken[0].invalid().field)
        counting = [p for p in policies if p.counts_app]
        if counting and not ctx.pod.labels.get(ann.APP_NAME):
            field_ = f"metadata.labels[{ann.APP_NAME}]"
            raise InvalidPolicy(
                f"PlacementPolicy {counting[0].ref} ({counting[0].type}) counts pods per {ann.APP_NAME} "
                f"and {ann.APP_VERSION}, and the pod has no label {ann.APP_NAME}",
                field=field_,
            )
        session = any(p.reads_session for p in policies)
        return Governing(policies=tuple(policies), probe=_Probe(ctx, session=session))

    def check(self, state: NodeState, prepared: Governing, ctx: PodContext) -> Reason | None:
        # Every policy of the pod must hold: their AND (berth.vocab.policy.combine).
        owner: dict[int, CompiledPolicy] = {}
        found = first_failure(
            (self._policy_reason(p, state, prepared, owner) for p in prepared.policies), _hopeless
        )
        if found is not None:
            policy = owner[id(found)]
            prepared.refused[policy.ref] = policy
        return found

    def _policy_reason(
        self,
        policy: CompiledPolicy,
        state: NodeState,
        prepared: Governing,
        owner: dict[int, CompiledPolicy],
    ) -> Reason | None:
        if policy.missing:
            reason = Reason(self.name, Kind.UNMET, _missing_reason(policy))
        else:
            assert policy.predicate is not None  # prepare() let only Ready policies through
            failure = policy.predicate.check(state, prepared.probe)
            if failure is None:
                return None
            reason = self._reason(policy, failure)
        owner[id(reason)] = policy
        return reason

    def removals(
        self, cands: Mapping[str, NodeState], prepared: Governing, ctx: PodContext
    ) -> Mapping[str, Reason]:
        owner: dict[int, CompiledPolicy] = {}
        parts = [
            functools.partial(self._refusing, policy, prepared=prepared, ctx=ctx, owner=owner)
            for policy in prepared.policies
        ]
        found = and_failures(parts, cands, _hopeless)
        # The 409 names the policies whose reasons the nodes got, not one every node failed sooner.
        for reason in found.values():
            policy = owner[id(reason)]
            prepared.refused[policy.ref] = policy
        return Removals(found)

    def _refusing(
        self,
        policy: CompiledPolicy,
        among: Mapping[str, NodeState],
        *,
        prepared: Governing,
        ctx: PodContext,
        owner: dict[int, CompiledPolicy],
    ) -> Mapping[str, Reason]:
        found = self._policy_reasons(policy, among, prepared, ctx)
        for reason in found.values():
            owner[id(reason)] = policy
        return found

    def _policy_reasons(
        self, policy: CompiledPolicy, among: Mapping[str, NodeState], prepared: Governing, ctx: PodContext
    ) -> Mapping[str, Reason]:
        if policy.missing:
            return dict.fromkeys(among, Reason(self.name, Kind.UNMET, _missing_reason(policy)))
        predicate = policy.predicate
        assert predicate is not None  # prepare() let only Ready policies through
        if predicate.node_only:  # the same Reasons for every pod until a node changes
            every = ctx.view.node_memo(
                (self.name, policy),
                lambda: self._reasons(policy, predicate.failures(ctx.view.states_by_name(), prepared.probe)),
            )
            return {n: r for n, r in every.items() if n in among}
        return self._reasons(policy, predicate.failures(among, prepared.probe))

    def _reasons(self, policy: CompiledPolicy, failures: dict[str, Failure]) -> dict[str, Reason]:
        made: dict[int, Reason] = {}  # nodes that share a Failure share its Reason
        out = {}
        for name, failure in failures.items():
            reason = made.get(id(failure))
            if reason is None:
                reason = made[id(failure)] = self._reason(policy, failure)
            out[name] = reason
        return out

    def _reason(self, policy: CompiledPolicy, failure: Failure) -> Reason:
        return Reason(
            self.name,
            Kind.EXHAUSTED if failure.exhausted else Kind.UNMET,
            f"PlacementPolicy {policy.ref}: {failure.type}: {failure.message}",
            failure.values,
        )

    def constraint(self, prepared: Governing) -> str | None:
        if not isinstance(prepared, Governing) or not prepared.refused:
            return None
        names = []
        for policy in (p for p in prepared.policies if p.ref in prepared.refused):
            if policy.missing:
                names.append(f"the PlacementPolicy {policy.ref} (it does not exist)")
            else:
                names.append(f"the PlacementPolicy {policy.ref} ({policy.type})")
        return "; ".join(names)

    def has_event(self, prepared: Governing) -> bool:
        return isinstance(prepared, Governing)

    def event(self, trace: StepTrace, prepared: Governing, ctx: PodContext) -> Event | None:
        if not isinstance(prepared, Governing):
            return None
        names = ", ".join(f"{p.ref} ({p.type})" for p in prepared.policies)
        accepted = trace.remaining_count()
        total = accepted + len(trace.removed)
        return Event(
            "Normal",
            "PlacementPolicy",
            f"governed by PlacementPolicy {names}: {accepted} of {total} nodes accepted",
        )


STEPS = (PlacementPolicyStep,)


def _hopeless(reason: Reason) -> bool:
    """No eviction can help the node: kube-scheduler does not preempt for it."""
    return reason.kind is not Kind.EXHAUSTED
