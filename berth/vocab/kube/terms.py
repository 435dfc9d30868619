"""What pod affinity terms select, as kube-scheduler reads them (k8s.io/kube-scheduler/framework
AffinityTerm.Matches, InterPodAffinity's mergeAffinityTermNamespacesIfNotEmpty).

A term looks at the pods of its namespaces: those it names, the pod's own when it names none and has
no namespaceSelector, and those its namespaceSelector selects by their labels (`{}` selects every
namespace). This is kube's own rule, applied to kube's own fields; berth's rules stay within the pod's
namespace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

from berth.cluster.model import AffinityTerm, Pod
from berth.cluster.view import ClusterView


def selects_namespace(term: AffinityTerm, namespace: str, view: ClusterView) -> bool:
    if namespace in term.namespaces:
        return True
    chosen = term.namespace_selector
    return chosen is not None and (chosen.empty or chosen.matches(view.namespace_labels(namespace)))


def term_selects(term: AffinityTerm, pod: Pod, view: ClusterView) -> bool:
    """The term selects the pod: its namespace and its labels."""
    return selects_namespace(term, pod.namespace, view) and term.selector.matches(pod.labels)


def term_namespaces(term: AffinityTerm, view: ClusterView) -> Iterable[str]:
    chosen = term.namespace_selector
    if chosen is None:
        return term.namespaces
    return sorted(ns for ns in view.namespace_names() if selects_namespace(term, ns, view))


def term_nodes(term: AffinityTerm, view: ClusterView) -> Counter:
    """Node -> placed pods the term selects there."""
    out: Counter = Counter()
    for namespace in term_namespaces(term, view):
        out.update(view.selected_nodes(namespace, term.selector))
    return out


def by_domain(nodes: Mapping[str, int], key: str, view: ClusterView) -> Counter:
    """Per node counts summed by the nodes' value of the label `key` (nodes without it left out)."""
    out: Counter = Counter()
    value_of = view.domains(key).of.get
    for name, count in nodes.items():
        value = value_of(name)
        if value is not None:
            out[value] += count
    return out


def term_slots(term: AffinityTerm, view: ClusterView) -> np.ndarray | None:
    """term_nodes by slot (read-only), None when the term selects no placed pod."""
    out = None
    for namespace in term_namespaces(term, view):
        array = view.selected_slots(namespace, term.selector)
        if array is not None:
            out = array if out is None else out + array
    return out
