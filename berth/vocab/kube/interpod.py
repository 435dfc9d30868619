"""kube-scheduler's InterPodAffinity: the required terms as a filter (offline), the preferred ones and
the running pods' terms as a score (berth.vocab.kube.score).

Filter (kube's PreFilter and Filter): a node passes when
- for every required affinity term, the node has the term's topology label and a pod the terms select
  runs in that domain (or no pod anywhere matches and the pod matches its own terms: the first of a
  group);
- for every required anti-affinity term, no pod the term selects runs in the node's domain;
- no running pod's required anti-affinity term selects this pod within its domain (symmetry).

Score (kube's PreScore and Score): per topology domain, + the weight of each preferred affinity term
and - the weight of each preferred anti-affinity term of the pod, for each running pod it selects there;
and the same for the running pods' preferred terms that select this pod, their required affinity terms
counting 1 (hardPodAffinityWeight). A node's raw score is the sum over its domains, normalised by
min and max over the candidates.

Counts come from the view's per-selector indexes and its list of pods with affinity terms, grouped by
their terms, never from a scan of every pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from berth.cluster.model import AffinityTerm, PodAffinity
from berth.cluster.view import ClusterView, NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.vocab import step_names
from berth.vocab.kube.terms import term_namespaces, term_nodes, term_selects, term_slots

Pairs = Counter  # (topology key, value) -> pods


def _pairs(nodes: Mapping[str, int], key: str, view: ClusterView, into: Pairs | None = None) -> Pairs:
    out = into if into is not None else Counter()
    value_of = view.domains(key).of.get
    for name, count in nodes.items():
        value = value_of(name)
        if value is not None:
            out[key, value] += count
    return out


def _all_terms_nodes(terms: tuple[AffinityTerm, ...], ctx: PodContext) -> Counter:
    """Node -> placed pods that every term selects (kube's podMatchesAllAffinityTerms)."""
    if len(terms) == 1:
        return term_nodes(terms[0], ctx.view)
    view = ctx.view
    namespaces = set(term_namespaces(terms[0], view))
    out: Counter = Counter()
    for namespace in sorted(namespaces):
        for pod in view.namespace_pods(namespace):
            placed = pod.node_name and view.state(pod.node_name) is not None
            if placed and all(term_selects(t, pod, view) for t in terms):
                out[pod.node_name] += 1
    return out


def existing_anti(ctx: PodContext) -> Pairs:
    """(key, value) -> running pods whose required anti-affinity terms select this pod, by the
    domain of their node."""
    out: Pairs = Counter()
    view = ctx.view
    for affinity, nodes in view.pods_with_affinity().items():
        for term in affinity.required_anti:
            if term_selects(term, ctx.pod, view):
                _pairs(nodes, term.topology_key, view, out)
    return out


@dataclass
class Required:
    """The pod's required terms and what the running pods count towards them."""

    affinity: tuple[AffinityTerm, ...]
    anti: tuple[AffinityTerm, ...]
    affinity_counts: Pairs
    anti_counts: Pairs
    existing: Pairs
    matches_own: bool  # the pod matches all its own affinity terms


class InterPodAffinity(NodeFilter[Required]):
    name = step_names.KUBE_INTER_POD_AFFINITY
    summary = (
        "hard: the pod's required pod (anti-)affinity holds, and no running pod's anti-affinity excludes it"
    )

    def prepare(self, ctx: PodContext) -> Required | Skipped:
        affinity = ctx.pod.affinity
        required = affinity.required if affinity else ()
        anti = affinity.required_anti if affinity else ()
        existing = existing_anti(ctx)
        if not required and not anti and not existing:
            return skip("no required pod (anti-)affinity, and no running pod's anti-affinity selects the pod")
        view = ctx.view
        affinity_counts: Pairs = Counter()
        if required:
            nodes = _all_terms_nodes(required, ctx)
            for term in required:
                _pairs(nodes, term.topology_key, view, affinity_counts)
        anti_counts: Pairs = Counter()
        for term in anti:
            nodes = term_nodes(term, view)
            _pairs(nodes, term.topology_key, view, anti_counts)
        matches_own = bool(required) and all(term_selects(t, ctx.pod, view) for t in required)
        return Required(required, anti, +affinity_counts, +anti_counts, +existing, matches_own)

    def check(self, state: NodeState, prepared: Required, ctx: PodContext) -> Reason | None:
        labels = state.node.labels
        exist = True
        for term in prepared.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return self._unmet(
                    f"node has no label {term.topology_key} a required affinity term spreads over"
                )
            if prepared.affinity_counts.get((term.topology_key, value), 0) <= 0:
                exist = False
        if not exist and not (not prepared.affinity_counts and prepared.matches_own):
            return self._unmet("node didn't match pod affinity rules")
        for term in prepared.anti:
            value = labels.get(term.topology_key)
            if value is not None and prepared.anti_counts.get((term.topology_key, value), 0) > 0:
                return Reason(
                    self.name,
                    Kind.EXHAUSTED,
                    "node didn't match pod anti-affinity rules",
                    {"topology": f"{term.topology_key}={value}"},
                )
        if prepared.existing:
            for key, value in labels.items():
                if prepared.existing.get((key, value), 0) > 0:
                    return Reason(
                        self.name,
                        Kind.EXHAUSTED,
                        "node didn't satisfy existing pods anti-affinity rules",
                        {"topology": f"{key}={value}"},
                    )
        return None

    def _unmet(self, message: str) -> Reason:
        return Reason(self.name, Kind.UNMET, message)

    def constraint(self, prepared: Required) -> str | None:
        if isinstance(prepared, Required) and (prepared.affinity or prepared.anti):
            return "the pod's required pod affinity and anti-affinity"
        return None


HARD_POD_AFFINITY_WEIGHT = 1  # kube's InterPodAffinityArgs default


# What kube's PreScore counts for one pod, before it is summed by domain: topology key -> (weight,
# placed pods by slot that a term with that weight selects) for every term that counts.
Weighed = dict[str, list[tuple[int, np.ndarray]]]


def topology_score(ctx: PodContext) -> Weighed:
    """kube's PreScore, the terms that count for the pod: its own preferred terms with the pods they
    select, and the running pods' terms that select it with those pods' nodes, each by slot (the
    view keeps them so). A domain's score is the sum of weight x pods over the nodes of the domain
    (berth.vocab.kube.score sums them by slot)."""
    view = ctx.view
    out: Weighed = {}

    def add(term: AffinityTerm, weight: int, nodes: np.ndarray | None) -> None:
        if nodes is not None:
            out.setdefault(term.topology_key, []).append((weight, nodes))

    affinity = ctx.pod.affinity
    if affinity is not None:
        for weighted, sign in [(w, 1) for w in affinity.preferred] + [
            (w, -1) for w in affinity.preferred_anti
        ]:
            term = weighted.term
            add(term, sign * weighted.weight, term_slots(term, view))
    for terms, term, weight in _selecting(ctx):
        add(term, weight, view.affinity_slots(terms))
    return out


SELECTING = "kube/inter-pod/selecting"
SELECTING_KEPT = 1024  # pods' namespaces and label sets whose selecting terms are kept


def _selecting(ctx: PodContext) -> list[tuple[PodAffinity, AffinityTerm, int]]:
    """The placed pods' terms that select the pod, each with its set of terms and its weight (a
    required term counts HARD_POD_AFFINITY_WEIGHT, a preferred anti-affinity term its weight negated),
    in the order of pods_with_affinity(). Which terms select a pod depends on its namespace and labels,
    the namespaces' labels and the distinct sets of terms placed pods carry: kept for the pods that ask
    the same (a workload's, one after the other) until a set of terms appears or leaves or a namespace
    changes. Matched at every decision, each set of terms costs a few selector matches cold."""
    view, pod = ctx.view, ctx.pod
    generations = (view.affinity_terms_generation, view.workload_generation)
    kept: dict[Any, Any] = view.node_memo(SELECTING, dict)
    if kept.get("generations") != generations or len(kept) > SELECTING_KEPT:
        kept.clear()
        kept["generations"] = generations
    key = (pod.namespace, tuple(sorted(pod.labels.items())))
    found = kept.get(key)
    if found is None:
        found = kept[key] = []
        for terms in view.pods_with_affinity():
            for term in terms.required:
                if term_selects(term, pod, view):
                    found.append((terms, term, HARD_POD_AFFINITY_WEIGHT))
            for weighted in terms.preferred:
                if term_selects(weighted.term, pod, view):
                    found.append((terms, weighted.term, weighted.weight))
            for weighted in terms.preferred_anti:
                if term_selects(weighted.term, pod, view):
                    found.append((terms, weighted.term, -weighted.weight))
    return found
