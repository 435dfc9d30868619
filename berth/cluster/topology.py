"""Topology domains: the nodes grouped by the value of one node label, kube's `topologyKey`.

A rule with a topology key counts the pods of a whole domain (every node whose label has the same
value) instead of the node's own: "one per zone" is ONE_PER_HOST with `topology.kubernetes.io/zone`.
Without a key, or with `kubernetes.io/hostname`, a rule counts per node as it always did (berth does not
read the hostname label for that: the node is its own domain).

A node without the label belongs to no domain. A hard rule refuses it (kube's topology spread does the
same with DoNotSchedule: the rule cannot be shown to hold there); a soft rule gives it nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FIELD = "topologyKey"

# A qualified name, as Kubernetes validates label keys: an optional DNS-subdomain prefix and "/", then
# a name of at most 63 characters (alphanumerics, "-", "_", "." inside).
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
MAX_PREFIX = 253
MAX_NAME = 63
MAX_KEY = MAX_PREFIX + 1 + MAX_NAME
# The same rule for the CRD's schema (the prefix's length is checked by berth itself).
KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def key_problem(value: object) -> str | None:
    """What is wrong with a topology key, or None: it must be a node label key."""
    if not isinstance(value, str):
        return f"must be a node label key (a string), not {type(value).__name__}"
    if not value:
        return "must be a node label key, not empty"
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_PREFIX or not _PREFIX.match(prefix)):
        return (
            f"{value!r} is not a valid label key: the prefix before '/' must be a DNS subdomain "
            f"(lowercase letters, digits, '-' and '.', at most {MAX_PREFIX} characters)"
        )
    if not name or len(name) > MAX_NAME or not _NAME.match(name):
        return (
            f"{value!r} is not a valid label key: the name must be at most {MAX_NAME} characters, "
            "alphanumerics with '-', '_' or '.' inside"
        )
    return None


def per_domain(key: str | None) -> str | None:
    """The key a rule counts by, None for per node (absent, or the hostname label)."""
    return None if key in (None, "", HOSTNAME) else key


@dataclass(frozen=True, slots=True, eq=False)
class Domains:
    """The nodes of a view grouped by one label: each node's domain, each domain's nodes (in the view's
    order), and the nodes without the label."""

    key: str
    of: Mapping[str, str]  # node -> the label's value
    members: Mapping[str, tuple[str, ...]]  # value -> its nodes
    unlabelled: tuple[str, ...]  # in the view's order

    @classmethod
    def build(cls, key: str, labels: Iterator[tuple[str, Mapping[str, str]]]) -> Domains:
        of: dict[str, str] = {}
        members: dict[str, list[str]] = {}
        unlabelled = []
        for name, node_labels in labels:
            value = node_labels.get(key)
            if value is None:
                unlabelled.append(name)
                continue
            of[name] = value
            members.setdefault(value, []).append(name)
        return cls(key, of, {v: tuple(n) for v, n in members.items()}, tuple(unlabelled))

    def nodes_of(self, values: Mapping[str, int] | set[str] | frozenset[str]) -> set[str]:
        """Every node of these domains."""
        out: set[str] = set()
        for value in values:
            out.update(self.members.get(value, ()))
        return out


def short(key: str) -> str:
    """How a message names a key: `zone` for topology.kubernetes.io/zone."""
    return key.rsplit("/", 1)[-1]


class SpreadOverNodes(Mapping[str, int]):
    """Domain counts read per node: node -> the count of its domain, for the nodes of the domains whose
    count is not 0 (so that a step's fast path reads it as it reads a per-node index)."""

    __slots__ = ("counts", "domains")

    def __init__(self, domains: Domains, counts: Mapping[str, int]) -> None:
        self.domains = domains
        self.counts = counts

    def __getitem__(self, node: str) -> int:
        value = self.domains.of.get(node)
        count = self.counts.get(value, 0) if value is not None else 0
        if not count:
            raise KeyError(node)
        return count

    def __contains__(self, node: object) -> bool:
        value = self.domains.of.get(node)  # type: ignore[call-overload]
        return value is not None and bool(self.counts.get(value))

    def __iter__(self) -> Iterator[str]:
        members = self.domains.members
        for value, count in self.counts.items():
            if count:
                yield from members.get(value, ())

    def __len__(self) -> int:
        members = self.domains.members
        return sum(len(members.get(v, ())) for v, c in self.counts.items() if c)
