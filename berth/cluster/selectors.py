"""Kubernetes label selectors, compiled once: every matchLabels pair and every expression must hold.

One evaluator for every selector berth reads: a PlacementPolicy's `spec.selector`, the label selectors
of pod affinity terms and topology spread constraints, and the default spreading selector kube-scheduler
derives from a pod's Services and controller (berth.vocab.kube.spread). Node selector terms (node
affinity, with Gt and Lt and fields) are another vocabulary (berth.vocab.kube.node_affinity).

As in k8s.io/apimachinery: a selector with nothing in it (`{}`) matches every pod; a missing one (nil)
matches none (`NOTHING`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class Selector(msgspec.Struct, frozen=True, gc=False):
    """A compiled label selector."""

    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()
    nothing: bool = False  # the nil selector: matches no pod

    @property
    def empty(self) -> bool:
        """Selects every pod (kube's Selector.Empty(); a count over it is 0 for kube's spreading)."""
        return not self.nothing and not self.labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True

    def with_labels(self, extra: Mapping[str, str]) -> Selector:
        """This selector and every pair of `extra` (matchLabelKeys merged in, a Service's selector)."""
        if self.nothing or not extra:
            return self
        # Every pair must hold: a key given two values matches nothing, as kube's merge does.
        return Selector(
            labels=tuple(sorted(set(self.labels) | set(extra.items()))), expressions=self.expressions
        )

    def with_expressions(self, expressions: tuple[tuple[str, str, frozenset[str]], ...]) -> Selector:
        if self.nothing or not expressions:
            return self
        return Selector(labels=self.labels, expressions=self.expressions + expressions)


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def parse_selector(raw: Any, field: str) -> tuple[Selector, list[str]]:
    """A `metav1.LabelSelector` as written (None is NOTHING), and the problems that make it invalid,
    each naming its field."""
    if raw is None:
        return NOTHING, []
    if not isinstance(raw, Mapping):
        return NOTHING, [f"{field}: should be a label selector (an object), not {type(raw).__name__}"]
    problems: list[str] = []
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        problems.append(f"{field}.matchLabels: should map label keys to string values")
        labels = {}
    expressions = []
    for i, expr in enumerate(raw.get("matchExpressions") or []):
        where = f"{field}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            problems.append(f"{where}: should be an object with key, operator and values")
            continue
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not key:
            problems.append(f"{where}.key: is required")
            continue
        if operator not in OPERATORS:
            problems.append(f"{where}.operator: should be one of {', '.join(OPERATORS)}, not {operator!r}")
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.append(f"{where}.values: should be a list of strings")
            continue
        if operator in ("In", "NotIn") and not values:
            problems.append(f"{where}.values: must list at least one value for operator {operator}")
            continue
        if operator in ("Exists", "DoesNotExist") and values:
            problems.append(f"{where}.values: must be empty for operator {operator}")
            continue
        expressions.append((key, operator, frozenset(values)))
    return Selector(labels=tuple(sorted(labels.items())), expressions=tuple(expressions)), problems


def selector_of_set(labels: Mapping[str, str]) -> Selector:
    """The selector of a plain label map (a Service's or a ReplicationController's `spec.selector`)."""
    return Selector(labels=tuple(sorted(labels.items())))
