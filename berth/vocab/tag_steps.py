"""The engine steps of tag affinity: two hard filters and the affinity tier.

Each also works on the whole candidate set through the view's index of the nodes where pods of a
namespace carry a tag: require_without_tag and prefer_* concern only those nodes, and
require_with_tag keeps only those nodes, so none of them looks at every node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from berth.cluster.topology import FIELD as TOPOLOGY_KEY
from berth.cluster.topology import short
from berth.cluster.view import NodeState
from berth.engine.step import Kept, MemoKey, NodeFilter, Noted, PodContext, Removals, Skipped, Tier, skip
from berth.engine.types import Event, Kind, Reason, StepTrace
from berth.json_annotation import show
from berth.vocab import step_names
from berth.vocab.tag_affinity import PREFER_WITH, PREFER_WITHOUT, REQUIRE_WITH, REQUIRE_WITHOUT, TagAffinity

REQUIRE_WITH_STEP = step_names.REQUIRE_WITH_TAG
REQUIRE_WITHOUT_STEP = step_names.REQUIRE_WITHOUT_TAG
TAG_AFFINITY_STEP = step_names.TAG_AFFINITY


def _affinity(ctx: PodContext) -> TagAffinity:
    return ctx.spec.tags.affinity


def _holding_every(holders: list[Mapping[str, int]]) -> list[str]:
    """The nodes in every one of these holder maps (node -> pods carrying the tag)."""
    return [n for n in min(holders, key=len) if all(n in h for h in holders)]


class RequireWithTag(NodeFilter[tuple[str, ...]]):
    """Removes nodes where no pod of the pod's namespace carries a required tag (with a topologyKey:
    on no node of the node's domain, and the nodes without the label)."""

    name = REQUIRE_WITH_STEP
    summary = "hard: every require_with_tag tag is carried by a pod of the namespace on the node"
    shared_reason = True

    def prepare(self, ctx: PodContext) -> tuple[str, ...] | Skipped:
        tags = _affinity(ctx).require_with
        return tags or skip("no require_with_tag")

    def check(self, state: NodeState, prepared: tuple[str, ...], ctx: PodContext) -> Reason | None:
        key = _affinity(ctx).topology
        domain = ctx.domain_of(state, key) if key is not None else None
        if key is not None and domain is None:
            return _unlabelled(self.name, key, REQUIRE_WITH)
        missing = [t for t in prepared if ctx.neighbour_tag_count(state, t, key) == 0]
        return self._reason(missing, prepared, ctx, domain) if missing else None

    def accepted(self, prepared: tuple[str, ...], ctx: PodContext) -> list[str] | None:
        if _affinity(ctx).topology is not None:
            return None  # every node of a domain that holds the tags: not listed here
        return _holding_every([ctx.tag_holders(t) for t in prepared])

    def removals(
        self, cands: Mapping[str, NodeState], prepared: tuple[str, ...], ctx: PodContext
    ) -> Mapping[str, Reason]:
        # Only nodes holding every tag stay; the others are most nodes, their reasons made when read.
        key = _affinity(ctx).topology
        if key is not None:
            return self._per_domain(cands, prepared, ctx, key)
        holders = [ctx.tag_holders(t) for t in prepared]
        if len(prepared) > 1:
            # The reasons are made when read, maybe once the view has changed: what each node missed
            # is read from the holders as they are now. (With one tag, every node removed missed it.)
            holders = [dict(h) for h in holders]
        keep = {n for n in _holding_every(holders) if n in cands}
        if len(keep) == len(cands):
            return {}
        kept = {n: s for n, s in cands.items() if n in keep} if keep else {}
        by_missing: dict[tuple[str, ...], Reason] = {}

        def reason(name: str) -> Reason:
            if len(prepared) == 1:
                missing: tuple[str, ...] = prepared
            else:
                missing = tuple(t for t, h in zip(prepared, holders, strict=True) if name not in h)
            if missing not in by_missing:
                by_missing[missing] = self._reason(list(missing), prepared, ctx)
            return by_missing[missing]

        first = next(n for n in cands if n not in keep)
        return Removals.all_but(cands, kept, reason, reason(first))

    def _per_domain(
        self, cands: Mapping[str, NodeState], prepared: tuple[str, ...], ctx: PodContext, key: str
    ) -> Mapping[str, Reason]:
        """Worked out per domain (a few), then read for the nodes of the domains missing a tag and the
        nodes without the label: nothing is done per node of a domain that holds every tag."""
        view, namespace = ctx.view, ctx.pod.namespace
        domains = view.domains(key)
        counts = [view.domain_tag_counts(key, namespace, t) for t in prepared]
        out: list[tuple[str, Reason]] = []
        for value, members in domains.members.items():
            missing = [t for t, c in zip(prepared, counts, strict=True) if not c.get(value)]
            if missing:
                reason = self._reason(missing, prepared, ctx, value)
                out.extend((name, reason) for name in members if name in cands)
        if domains.unlabelled:
            unlabelled = _unlabelled(self.name, key, REQUIRE_WITH)
            out.extend((name, unlabelled) for name in domains.unlabelled if name in cands)
        return Removals(out) if out else {}

    def _reason(
        self, missing: list[str], prepared: tuple[str, ...], ctx: PodContext, domain: str | None = None
    ) -> Reason:
        affinity = _affinity(ctx)
        namespace = ctx.pod.namespace
        if affinity.topology is None or domain is None:
            return Reason(
                self.name,
                Kind.UNMET,
                f"pods of namespace {namespace} on the node do not carry every required tag "
                f"{show(list(prepared))}",
                {"missing": missing},
            )
        key = affinity.topology
        return Reason(
            self.name,
            Kind.UNMET,
            f"no pod of namespace {namespace} in {short(key)} {domain} ({key}) carries "
            f"{show(missing[0]) if len(missing) == 1 else 'every required tag of ' + show(list(prepared))}",
            {"missing": missing, "topologyKey": key, "domain": domain},
        )

    def constraint(self, prepared: tuple[str, ...]) -> str | None:
        return f"the affinity constraint {REQUIRE_WITH}={show(list(prepared))}"


def _unlabelled(step: str, key: str, constraint: str) -> Reason:
    """A hard per-domain rule on a node without the label: it cannot be shown to hold there."""
    return Reason(
        step,
        Kind.UNMET,
        f"the node has no label {key}, the topologyKey {constraint} counts by",
        {"topologyKey": key},
    )


# Up to this many holders changed since the removals were made: they are mended, not made again.
CHANGED_IN_PLACE = 32


class RequireWithoutTag(NodeFilter[tuple[str, ...]]):
    """Removes nodes where a pod of the pod's namespace carries an excluded tag."""

    name = REQUIRE_WITHOUT_STEP
    summary = "hard: no pod of the namespace on the node carries a require_without_tag tag"

    def prepare(self, ctx: PodContext) -> tuple[str, ...] | Skipped:
        tags = _affinity(ctx).require_without
        return tags or skip("no require_without_tag")

    def check(self, state: NodeState, prepared: tuple[str, ...], ctx: PodContext) -> Reason | None:
        key = _affinity(ctx).topology
        domain = ctx.domain_of(state, key) if key is not None else None
        if key is not None and domain is None:
            return _unlabelled(self.name, key, REQUIRE_WITHOUT)
        found = tuple((t, n) for t in prepared if (n := ctx.neighbour_tag_count(state, t, key)))
        where = (key, domain) if key is not None and domain is not None else None
        return self._found(found, self._message(prepared, ctx, domain), {}, where) if found else None

    def memo_key(self, prepared: tuple[str, ...], ctx: PodContext) -> MemoKey:
        # The same candidates and holders give the same removals: kept with the candidates until a pod
        # of the namespace carrying one of the tags comes or goes (per domain: or a node changes).
        namespace = ctx.pod.namespace
        key = _affinity(ctx).topology
        versions = tuple(ctx.view.tag_version(namespace, t) for t in prepared)
        if key is not None:
            versions += (ctx.view.node_generation,)
        return (namespace, prepared, key), versions

    def removals(
        self, cands: Mapping[str, NodeState], prepared: tuple[str, ...], ctx: PodContext
    ) -> Mapping[str, Reason] | Noted:
        # Only the nodes holding an excluded tag can fail; nodes with the same counts share a Reason.
        key = _affinity(ctx).topology
        if key is not None:
            return self._per_domain(cands, prepared, ctx, key)
        holders = [ctx.tag_holders(t) for t in prepared]
        message = self._message(prepared, ctx)
        # node -> (tag, count) of each excluded tag it holds, in the order of the tags
        found: dict[str, list[tuple[str, int]]] = {}
        for tag, held in zip(prepared, holders, strict=True):
            for name, count in held.items():
                if name in cands:
                    found.setdefault(name, []).append((tag, count))
        made: dict[tuple, Reason] = {}
        removed = Removals((name, self._found(tuple(pairs), message, made)) for name, pairs in found.items())
        if len(prepared) > 1:
            return removed
        # What mend() needs: the Reasons by counts, and the holders these removals were made from.
        return Noted(removed, (made, dict(holders[0])))

    def _per_domain(
        self, cands: Mapping[str, NodeState], prepared: tuple[str, ...], ctx: PodContext, key: str
    ) -> Removals:
        """The nodes of the domains holding an excluded tag, and the nodes without the label; one Reason
        per domain."""
        view, namespace = ctx.view, ctx.pod.namespace
        domains = view.domains(key)
        counts = [view.domain_tag_counts(key, namespace, t) for t in prepared]
        by_domain: dict[str, Reason] = {}
        for value in dict.fromkeys(v for c in counts for v in c):
            pairs = tuple((t, c[value]) for t, c in zip(prepared, counts, strict=True) if c.get(value))
            by_domain[value] = self._found(pairs, self._message(prepared, ctx, value), {}, (key, value))
        out: list[tuple[str, Reason]] = []
        for value, reason in by_domain.items():
            out.extend((name, reason) for name in domains.members.get(value, ()) if name in cands)
        if domains.unlabelled:
            unlabelled = _unlabelled(self.name, key, REQUIRE_WITHOUT)
            out.extend((name, unlabelled) for name in domains.unlabelled if name in cands)
        return Removals(out)

    def mend(
        self, before: Kept, cands: Mapping[str, NodeState], prepared: tuple[str, ...], ctx: PodContext
    ) -> Noted | None:
        # One tag, a few holders changed since (the pods placed meanwhile): the removals before, with
        # those nodes' entries made again. A dict keeps the order its keys came in, so the removals
        # keep the holders' order, as when made from scratch.
        if before.notes is None:
            return None
        made, seen = before.notes
        held = ctx.tag_holders(prepared[0])
        changed = {name for name, _ in held.items() ^ seen.items()}
        if len(changed) > CHANGED_IN_PLACE:
            return None
        message = self._message(prepared, ctx)
        given = dict(before.answer.given)
        for name in changed:
            count = held.get(name)
            if count is None or name not in cands:
                given.pop(name, None)
            else:
                given[name] = self._found(((prepared[0], count),), message, made)
        return Noted(Removals(given), (made, dict(held)))

    def _found(
        self,
        pairs: tuple[tuple[str, int], ...],
        message: str,
        made: dict[tuple, Reason],
        where: tuple[str, str] | None = None,
    ) -> Reason:
        """The Reason for a node holding these (tag, count) pairs; nodes with the same counts share one.
        Evicting the neighbours would free the node: a capacity-like "no" (FailedNodes). `where` is the
        (topology key, domain) of a per-domain rule."""
        reason = made.get(pairs)
        if reason is None:
            values: dict = {"found": dict(pairs)}
            if where is not None:
                values |= {"topologyKey": where[0], "domain": where[1]}
            reason = made[pairs] = Reason(self.name, Kind.EXHAUSTED, message, values)
        return reason

    def _message(self, prepared: tuple[str, ...], ctx: PodContext, domain: str | None = None) -> str:
        key = _affinity(ctx).topology
        if key is None or domain is None:
            return (
                f"a pod of namespace {ctx.pod.namespace} on the node carries an excluded tag of "
                f"{show(list(prepared))}"
            )
        return (
            f"a pod of namespace {ctx.pod.namespace} in {short(key)} {domain} ({key}) carries an "
            f"excluded tag of {show(list(prepared))}"
        )

    def constraint(self, prepared: tuple[str, ...]) -> str | None:
        return f"the affinity constraint {REQUIRE_WITHOUT}={show(list(prepared))}"


class TagAffinityTier(Tier[TagAffinity]):
    """+1 per neighbour per prefer_with_tag tag it carries, -1 per prefer_without_tag tag, summed;
    only the nodes with the highest sum go on. Without prefer_* every node is at 0."""

    name = TAG_AFFINITY_STEP
    summary = "tier: only the nodes with the highest prefer_* sum go on"
    shared_reason = True

    def prepare(self, ctx: PodContext) -> TagAffinity:
        return _affinity(ctx)

    def value(self, state: NodeState, prepared: TagAffinity, ctx: PodContext) -> int:
        total = 0
        key = prepared.topology
        for tag in prepared.prefer_with:
            total += ctx.neighbour_tag_count(state, tag, key)
        for tag in prepared.prefer_without:
            total -= ctx.neighbour_tag_count(state, tag, key)
        return total

    def values(
        self, cands: Mapping[str, NodeState], prepared: TagAffinity, ctx: PodContext
    ) -> Mapping[str, int]:
        # Only nodes holding a preferred tag have a value other than 0.
        totals: Counter = Counter()
        for tags, sign in ((prepared.prefer_with, 1), (prepared.prefer_without, -1)):
            for tag in tags:
                for name, count in ctx.tag_holders(tag, prepared.topology).items():
                    if name in cands:
                        totals[name] += sign * count
        return {n: v for n, v in totals.items() if v}

    def set_aside(self, value: int, best: int, prepared: TagAffinity) -> Reason:
        return Reason(
            self.name,
            Kind.SET_ASIDE,
            "lower tag affinity than the highest-affinity nodes",
            {"affinity": value, "highest": best},
        )

    def has_event(self, prepared: TagAffinity) -> bool:
        return bool(getattr(prepared, "prefers", False))

    def event(self, trace: StepTrace, prepared: TagAffinity, ctx: PodContext) -> Event | None:
        if not prepared.prefers:
            return None
        best = trace.highest_raw()
        remaining = trace.remaining
        top = ", ".join(remaining[:10]) + (" ..." if len(remaining) > 10 else "")
        form = prepared.constraint_form()
        wanted: dict = {k: v for k, v in form.items() if k in (PREFER_WITH, PREFER_WITHOUT)}
        if prepared.topology is not None:
            wanted[TOPOLOGY_KEY] = prepared.topology
        return Event(
            "Normal",
            "HighestAffinity",
            f"schedule have highest affinity: {int(best):+d} on {top} ({len(remaining)} of "
            f"{len(trace.scores)} feasible nodes; {show(wanted)})",
        )
