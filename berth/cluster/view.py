"""The indexed cluster view: nodes, the pods placed on them, and per-node counters.

A rule asks a counter ("how many pods of namespace N carrying tag T are on this node"), never scans
pods, so a decision costs O(candidate nodes x rules). The snapshot loader fills a view once; the live
cache (and the extender's bind) keeps one up to date with add_pod / remove_pod / upsert_node.

Reverse indexes answer the other way round ("which nodes hold pods of namespace N carrying tag T"), so
a rule that concerns a few nodes costs O(those nodes): tag -> nodes per namespace, namespace -> nodes,
app -> nodes. Two caches serve steps that look at every node: `node_memo` keeps what depends on the
node records alone until a node changes, and `column` keeps a number per node (unreserved RAM, the pod
count) with its lowest and highest value, worked out again only for the nodes that changed.

Each node also has a slot, its place in the view's order (`slots()`); a column can be read as an array
by slot, so that a step that gives thousands of candidates a number gathers and combines arrays
instead of making a Python call per node. Slots change only when a node is added or removed.

The view also holds the PlacementPolicy objects, compiled once per change (upsert_policy /
remove_policy), and answers which of them govern a pod (policies_for).
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

import msgspec
import numpy as np

from berth import annotations as ann
from berth.cluster.model import Node, Pod, PodAffinity
from berth.cluster.name_table import NameTable
from berth.cluster.planned import PlannedTargets
from berth.cluster.selectors import Selector, parse_selector, selector_of_set
from berth.cluster.topology import Domains


@dataclass(slots=True)
class NodeState:
    """A node and the counters of the pods placed on it."""

    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)
    # namespace -> tag -> number of pods of that namespace on this node carrying the tag
    tags: dict[str, Counter] = field(default_factory=dict)
    # (namespace, app name, app version) -> pods
    apps: Counter = field(default_factory=Counter)
    # namespace (the allocator's owner) -> pods
    owners: Counter = field(default_factory=Counter)
    requested: Counter = field(default_factory=Counter)
    limited: Counter = field(default_factory=Counter)
    # kube's resource scoring: requests with 100m CPU / 200 MiB for containers that set none
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    # pods whose limits set no cpu: the allocator's "uncapped" instances (capness, min-cpu)
    uncapped: int = 0
    # bumped by every change of the node record or of the pods on it: a decision about this node made
    # at one generation still holds at the same generation (the extender's bind relies on it)
    generation: int = 0

    def _count(self, pod: Pod, sign: int) -> None:
        if pod.tags:
            per_ns = self.tags.setdefault(pod.namespace, Counter())
            for tag in pod.tags:
                per_ns[tag] += sign
                if not per_ns[tag]:
                    del per_ns[tag]
            if not per_ns:
                del self.tags[pod.namespace]
        for counter, key in ((self.apps, app_key(pod)), (self.owners, pod.namespace)):
            counter[key] += sign
            if not counter[key]:
                del counter[key]
        for counter, values in ((self.requested, pod.requests), (self.limited, pod.limits)):
            for name, value in values.items():
                counter[name] += sign * value
        if not pod.limits.get("cpu"):
            self.uncapped += sign
        self.nonzero_cpu += sign * pod.nonzero_cpu
        self.nonzero_memory += sign * pod.nonzero_memory

    def add(self, pod: Pod, key: str | None = None) -> None:
        self.pods[key or pod.key] = pod
        self._count(pod, +1)
        self.generation += 1

    def remove(self, key: str) -> Pod | None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._count(pod, -1)
            self.generation += 1
        return pod

    def tag_count(self, namespace: str, tag: str) -> int:
        per_ns = self.tags.get(namespace)
        return per_ns.get(tag, 0) if per_ns else 0


def _status_only(held: Pod, pod: Pod) -> bool:
    """`pod` is `held` but for its phase (neither terminal), start time and resourceVersion."""
    if pod.terminal or held.terminal or pod.node_name != held.node_name:
        return False
    return held == msgspec.structs.replace(
        pod, phase=held.phase, start_time=held.start_time, version=held.version
    )


# A uid prefix names a pod only from this many characters on (a short Docker-style id is 12).
# A compiled PlacementPolicy (berth.vocab.policy.compile.CompiledPolicy): the view holds them and reads
# their namespace, name and selector; how they compile is the policy vocabulary's.
Policy = Any


class PolicyCompiler(Protocol):
    def reload(self, current: Policy | None, obj: Mapping[str, Any]) -> Policy:
        """The object compiled, reusing `current` when its spec is unchanged."""

    def missing(self, namespace: str, name: str) -> Policy:
        """The stand-in for a policy a pod names that does not exist."""


_compiler: PolicyCompiler | None = None


def use_policy_compiler(compiler: PolicyCompiler) -> None:
    """The policy vocabulary hands the view its compiler when it is imported (berth.vocab.policy):
    the cluster layer never imports a vocabulary."""
    global _compiler
    _compiler = compiler


def _policy_compiler() -> PolicyCompiler:
    if _compiler is None:
        raise RuntimeError("no PlacementPolicy compiler: import berth.vocab.policy first")
    return _compiler


UID_PREFIX = 8
# A NodeColumn remembers this many of its latest changes (NodeColumn.changed_since).
COLUMN_LOG = 4096
# The changes of a namespace's owner nodes remembered (owners_changed_since): one log per namespace.
OWNER_LOG = 128  # twice what the spread mends at most (MENDED_AT_MOST)
# node_memo starts afresh beyond this many entries (a few per step and per PlacementPolicy in use).
NODE_MEMO_ENTRIES = 512
# Label selectors whose matching pods are counted per node, per namespace (the least used is dropped
# beyond this, and counted again from the namespace's pods if it is asked for again).
SELECTORS_KEPT = 256
# Counts by slot kept (selected_slots, affinity_slots), each store: an array holds a number per node
# (40 kB at 5000 nodes), so at most 5 MB each; asked for beyond that, they are all made again.
SLOT_COUNTS_KEPT = 128
# The workload kinds whose selector kube-scheduler's default spreading reads (helper.DefaultSelector).
CONTROLLER_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController")


@dataclass(frozen=True, slots=True, eq=False)
class Slots:
    """Every node's slot: its place in the view's order, for arrays with one entry per node."""

    generation: int  # the view's layout_generation these slots belong to
    names: list[str]  # slot -> node name
    index: dict[str, int]  # node name -> slot
    rank: np.ndarray  # slot -> the node's place among the names sorted
    by_rank: np.ndarray  # the other way round: place among the names sorted -> slot
    hashes: np.ndarray  # the names' Python hashes, sorted
    by_hash: np.ndarray  # place among the hashes sorted -> slot
    # No two names share a hash: a hash found names one node (guess() answers only then).
    hashes_distinct: bool = True

    @classmethod
    def of(cls, names: list[str], generation: int) -> Slots:
        by_rank = np.fromiter(sorted(range(len(names)), key=names.__getitem__), np.intp, len(names))
        rank = np.empty(len(names), dtype=np.intp)
        rank[by_rank] = np.arange(len(names))
        index = {name: slot for slot, name in enumerate(names)}
        hashes = np.fromiter(map(hash, names), np.int64, len(names))
        by_hash = np.argsort(hashes, kind="stable")
        hashes = hashes[by_hash]
        distinct = bool((hashes[1:] != hashes[:-1]).all())
        return cls(generation, names, index, rank, by_rank, hashes, by_hash, distinct)

    def find(self, names: list[str]) -> np.ndarray | None:
        """The slot of each name, in order; None when one is not a node's (or two nodes' names
        share a hash). Exact: guess(), then every name compared with the one held at its slot."""
        slots = self.guess(names)
        if slots is None or not self.named(names, slots):
            return None
        return slots

    def guess(self, names: list[str]) -> np.ndarray | None:
        """The slot of each name by its hash alone, in order; None when a hash is not a node's (or
        two nodes' names share one). A name the view does not hold whose 64-bit hash is a node's
        would be given that node's slot; Python keys its string hash at random per process, so that
        is about one such name in 2**64, and the caller checks what it answers with (named,
        named_at). Live, between two calls the other processes have the caches: a dict probe per
        name reads the table, the entry, the key held and the slot's int, one miss each, where this
        hashes the names (just decoded, in the cache) and finds the hashes in one sorted array."""
        if len(names) < 2 or not len(self.names) or not self.hashes_distinct:
            return None
        hashes = np.fromiter(map(hash, names), np.int64, len(names))
        # (the arrays' own methods and a comparison of bytes: numpy's functions of the same name
        # cost a Python call each, cold, for nothing here)
        at = self.hashes.searchsorted(hashes)
        np.minimum(at, len(self.hashes) - 1, out=at)
        if self.hashes.take(at).tobytes() != hashes.tobytes():
            return None
        return self.by_hash.take(at)

    def named(self, names: list[str], slots: np.ndarray) -> bool:
        """Every name is the one held at its slot (compared in C; cold, a cache miss a name)."""
        return len(names) == len(slots) and list(itemgetter(*slots.tolist())(self.names)) == names

    def named_at(self, names: list[str], slots: np.ndarray, slot: int) -> bool:
        """The name asked at the first place given `slot` is the one held there."""
        at = np.flatnonzero(slots == slot)
        return len(at) > 0 and names[int(at[0])] == self.names[slot]


# Counts by node laid out by slot: (the counts they were made from, the slots, the array).
SlotCounts = tuple[Mapping[str, int], Slots, np.ndarray]


class ChangeLog:
    """Changes in the order they were made, so that a reader can ask what changed since it last read:
    change number `version` is entries[version - base - 1]. The oldest are dropped in time; a reader
    that last read before them is told it cannot know (None)."""

    __slots__ = ("base", "entries", "limit")

    def __init__(self, limit: int = COLUMN_LOG) -> None:
        self.base = 0
        self.entries: list[Any] = []
        self.limit = limit

    @property
    def version(self) -> int:
        return self.base + len(self.entries)

    def extend(self, changes: Iterable[Any]) -> None:
        self.entries.extend(changes)
        if len(self.entries) > self.limit:
            drop = len(self.entries) // 2
            del self.entries[:drop]
            self.base += drop

    def since(self, version: int) -> list[Any] | None:
        if version < self.base:
            return None
        return self.entries[version - self.base :]

    def forget(self) -> None:
        """A change that is not kept, and every change before it dropped: whoever read before it
        has to start afresh."""
        self.base += len(self.entries) + 1
        self.entries.clear()


class NodeColumn:
    """A number worked out from each node and its pods, for every node of the view, with the lowest and
    highest value. Reading it works out again only the nodes that changed since the last read."""

    def __init__(self, compute: Callable[[NodeState], float], states: Mapping[str, NodeState]) -> None:
        self._compute = compute
        self.values: dict[str, float] = {name: compute(state) for name, state in states.items()}
        self.dirty: set[str] = set()
        self._low: float | None = None
        self._high: float | None = None
        # The values by slot (float64), and the nodes worked out again since it was last brought up
        # to date.
        self._array: np.ndarray | None = None
        self._array_slots: Slots | None = None  # the slots the array is laid out by
        self._stale: set[str] = set()
        self._log = ChangeLog()  # the nodes worked out again, in order
        self.layout: Slots | None = None  # the view's slots when it last handed the column out

    @property
    def version(self) -> int:
        return self._log.version

    def changed_since(self, version: int) -> list[str] | None:
        """The nodes worked out again since `version` (None when that is too long ago to say)."""
        return self._log.since(version)

    def refresh(self, states: Mapping[str, NodeState]) -> None:
        if not self.dirty:
            return
        values, low, high = self.values, self._low, self._high
        for name in self.dirty:
            state = states.get(name)
            old = values.pop(name, None) if state is None else values.get(name)
            if state is not None:
                new = values[name] = self._compute(state)
                self._stale.add(name)
                # The extremes stay known unless the node held one and moved off it.
                if low is not None and new < low:
                    low = new
                if high is not None and new > high:
                    high = new
            else:
                new = None
            if old is not None and new != old:
                if old == low:
                    low = None
                if old == high:
                    high = None
        self._log.extend(self.dirty)
        self.dirty.clear()
        self._low, self._high = low, high

    def array(self, slots: Slots) -> np.ndarray:
        """The values by slot, as float64 (read-only: gather from it, never write to it)."""
        if self._array is None or self._array_slots is not slots:
            values = self.values
            self._array = np.fromiter(map(values.__getitem__, slots.names), np.float64, len(slots.names))
            self._array_slots = slots
            self._stale.clear()
        elif self._stale:
            index, values, array = slots.index, self.values, self._array
            for name in self._stale:
                array[index[name]] = values[name]
            self._stale.clear()
        return self._array

    @property
    def low(self) -> float:
        if self._low is None:
            self._low = self._extreme(lowest=True)
        return self._low

    @property
    def high(self) -> float:
        if self._high is None:
            self._high = self._extreme(lowest=False)
        return self._high

    def _extreme(self, lowest: bool) -> float:
        """The lowest or highest value, worked out again when the node that held it moved off it (a
        pod lifted off that node for a bind checked again, and put back): from the array by slot of
        the view's current layout (ClusterView.column keeps it) in one numpy call, where min() over
        every node's value in the dict costs a Python step a node."""
        layout = self.layout
        if layout is not None and self.values and len(layout.names) == len(self.values):
            array = self.array(layout)
            value = float(array.min() if lowest else array.max())
            if not math.isnan(value):  # (a NaN would be ordered otherwise by min() and max())
                return value
        values = self.values.values()
        return min(values, default=math.inf) if lowest else max(values, default=-math.inf)


def app_key(pod: Pod) -> tuple[str, str, str]:
    """The scope placement policies count in: namespace, app name and app version."""
    return (pod.namespace, pod.labels.get(ann.APP_NAME, ""), pod.labels.get(ann.APP_VERSION, ""))


class ClusterView:
    """Nodes by name with their counters, and every non-terminal pod by namespace/name."""

    def __init__(self, nodes: Iterable[Node] = (), pods: Iterable[Pod] = ()) -> None:
        self._nodes: dict[str, NodeState] = {}
        self._pods: dict[str, Pod] = {}
        self._by_uid: dict[str, str] = {}
        # Pods bound to a node the view does not know (yet): attached when the node appears.
        self._orphans: dict[str, dict[str, Pod]] = {}
        # (namespace, app name, app version) -> node name -> pods placed there (ctx.session of rules)
        self._app_nodes: dict[tuple[str, str, str], Counter] = {}
        # namespace -> name -> compiled PlacementPolicy
        self._policies: dict[str, dict[str, Policy]] = {}
        # Policies that govern every pod regardless of selectors (`berth simulate --policy`).
        self._override: tuple[Policy, ...] | None = None
        # Lookups of the allocator's locality hints and affinity rules, kept with every pod change:
        # namespace -> pod key -> pod; uid prefix -> uids; namespace -> label key -> value -> pod keys.
        self._by_namespace: dict[str, dict[str, Pod]] = {}
        self._uid_prefix: dict[str, str | set[str]] = {}
        self._labels: dict[str, dict[str, dict[str, set[str]]]] = {}
        # The per-node counters the other way round, for rules that concern a few nodes:
        # namespace -> tag -> node -> pods carrying it; namespace -> node -> pods.
        self._tag_nodes: dict[str, dict[str, Counter]] = {}
        # (namespace, tag) -> when its holders last changed, for the tags some pod carries now
        self._tag_versions: dict[tuple[str, str], int] = {}
        self._tag_clock = 0
        self._owner_nodes: dict[str, Counter] = {}
        # namespace -> (node, pods of the namespace on it after the change), for every change
        self._owner_logs: dict[str, ChangeLog] = {}
        # The same two indexes per topology domain, for each topology key a rule has asked about:
        # key -> ((namespace, tag) -> domain -> pods, app -> domain -> pods); kept with every pod
        # placed or removed, dropped when a node changes (worked out again when next asked).
        self._domain_counts: dict[str, tuple[dict[tuple[str, str], Counter], dict[tuple, Counter]]] = {}
        # What depends on the node records alone (cleared when a node changes), and numbers per node.
        self._node_memo: dict[Hashable, Any] = {}
        self._columns: dict[Hashable, NodeColumn] = {}
        # Every node whose record or pods changed, in order (ClusterView.touched).
        self._touched = ChangeLog()
        # namespace -> label selector -> node -> placed pods of the namespace it matches (kube's
        # spreading and pod affinity count through these; each is kept up to date once asked for)
        self._selected: dict[str, dict[Selector, Counter]] = {}
        # namespace -> those selectors by their first label pair, and those without labels: a pod
        # placed or removed is tested only against the selectors it may match (each selector needs
        # its first pair), not against every one kept (made when needed, dropped when one comes or goes)
        self._selected_index: dict[str, tuple[dict[tuple[str, str], list[Selector]], list[Selector]]] = {}
        # The same counts by slot, for those asked for so (selected_slots, affinity_slots): key ->
        # (the counts, the slots they are laid out by, the array), kept up to date with the counts.
        self._selected_arrays: dict[tuple[str, Selector], SlotCounts] = {}
        self._affinity_arrays: dict[PodAffinity, SlotCounts] = {}
        # the pods with pod (anti-)affinity terms, by their terms: terms -> node -> pods placed there
        self._with_affinity: dict[PodAffinity, Counter] = {}
        self.affinity_generation = 0  # bumped when _with_affinity changes
        self.affinity_terms_generation = 0  # bumped when a set of terms appears in it or leaves it
        # What kube's default spreading reads: Services' selectors by namespace, and the selectors of
        # ReplicaSets, StatefulSets and ReplicationControllers by (namespace, kind, name); namespace
        # labels (namespaceSelector of pod affinity terms).
        self._services: dict[str, dict[str, dict[str, str]]] = {}
        self._controllers: dict[tuple[str, str, str], Selector] = {}
        self._namespace_labels: dict[str, dict[str, str]] = {}
        # PodDisruptionBudgets: namespace -> name -> (selector, status.disruptionsAllowed)
        self._budgets: dict[str, dict[str, tuple[Selector, int]]] = {}
        # Pending pods kube-scheduler nominated a node for (it made room there by preemption):
        # node -> pod key -> pod
        self._nominated: dict[str, dict[str, Pod]] = {}
        # Where `berth rebalance` planned the replacements of the pods it evicts to go.
        self.planned = PlannedTargets()
        # What the engine keeps of the candidate sets its decisions made from this view, by id (their
        # slots, parents and the steps' memos: berth.engine.slots); it goes with the view.
        self.candidate_sets: OrderedDict[int, Any] = OrderedDict()
        self.workload_generation = 0
        self._default_selectors: dict[tuple, Selector | None] = {}
        self._sorted_names: list[str] | None = None
        self._sorted_states: list[NodeState] | None = None
        self._slots: Slots | None = None
        self._name_table: NameTable | None = None
        self.layout_generation = 0  # bumped when a node is added or removed: the slots change
        self.generation = 0
        self.node_generation = 0
        self.policy_generation = 0  # bumped when a PlacementPolicy's compiled form changes
        for node in nodes:
            self.upsert_node(node)
        for pod in pods:
            self.add_pod(pod)

    # -- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._nodes)

    def node_names(self) -> list[str]:
        return list(self._nodes)

    def states(self) -> Iterator[NodeState]:
        return iter(self._nodes.values())

    def states_by_name(self) -> Mapping[str, NodeState]:
        """Node name -> its state, in the view's order; read-only."""
        return self._nodes

    def sorted_names(self) -> list[str]:
        """Every node name, sorted; read-only."""
        if self._sorted_names is None:
            self._sorted_names = sorted(self._nodes)
        return self._sorted_names

    def sorted_states(self) -> list[NodeState]:
        """Every node's state, in the order of sorted_names(); read-only."""
        if self._sorted_states is None:
            self._sorted_states = list(map(self._nodes.__getitem__, self.sorted_names()))
        return self._sorted_states

    def slots(self) -> Slots:
        """Every node's slot, for arrays by node; read-only."""
        if self._slots is None or self._slots.generation != self.layout_generation:
            self._slots = Slots.of(list(self._nodes), self.layout_generation)
        return self._slots

    def name_table(self) -> NameTable:
        """The node names of `slots()`, for finding thousands at once in a JSON array (names.py)."""
        layout = self.slots()
        if self._name_table is None or self._name_table.layout is not layout:
            self._name_table = NameTable(layout)
        return self._name_table

    def tag_nodes(self, namespace: str, tag: str) -> Mapping[str, int]:
        """Node -> pods of `namespace` on it carrying `tag` (only nodes with at least one); read-only."""
        return self._tag_nodes.get(namespace, {}).get(tag, {})

    def tag_version(self, namespace: str, tag: str) -> int:
        """A number that changes whenever tag_nodes(namespace, tag) does; 0 while no pod carries the
        tag (the numbers never repeat otherwise, so tags no pod carries any more are not kept)."""
        return self._tag_versions.get((namespace, tag), 0)

    def domains(self, key: str) -> Domains:
        """The nodes grouped by the node label `key` (a topology key); read-only."""
        return self.node_memo(
            ("domains", key), lambda: Domains.build(key, ((n, s.node.labels) for n, s in self._nodes.items()))
        )

    def _by_domain(self, key: str) -> tuple[dict[tuple[str, str], Counter], dict[tuple, Counter]]:
        held = self._domain_counts.get(key)
        if held is None:
            of = self.domains(key).of
            tags: dict[tuple[str, str], Counter] = {}
            apps: dict[tuple, Counter] = {}
            for namespace, per_tag in self._tag_nodes.items():
                for tag, nodes in per_tag.items():
                    counts: Counter = Counter()
                    for node, count in nodes.items():
                        if node in of:
                            counts[of[node]] += count
                    if counts:
                        tags[namespace, tag] = counts
            for app, nodes in self._app_nodes.items():
                counts = Counter()
                for node, count in nodes.items():
                    if node in of:
                        counts[of[node]] += count
                if counts:
                    apps[app] = counts
            held = self._domain_counts[key] = (tags, apps)
        return held

    def domain_tag_counts(self, key: str, namespace: str, tag: str) -> Mapping[str, int]:
        """Domain of `key` -> pods of `namespace` on its nodes carrying `tag` (only domains with at
        least one); read-only."""
        return self._by_domain(key)[0].get((namespace, tag), {})

    def domain_app_counts(self, key: str, app: tuple[str, str, str]) -> Mapping[str, int]:
        """Domain of `key` -> pods of the app (namespace, name, version) on its nodes; read-only."""
        return self._by_domain(key)[1].get(app, {})

    def owner_nodes(self, namespace: str) -> Mapping[str, int]:
        """Node -> pods of `namespace` on it (only nodes with at least one); read-only."""
        return self._owner_nodes.get(namespace, {})

    def owner_version(self, namespace: str) -> int:
        """A number that changes whenever owner_nodes(namespace) does."""
        log = self._owner_logs.get(namespace)
        return log.version if log is not None else 0

    def owners_changed_since(self, namespace: str, version: int) -> list[tuple[str, int]] | None:
        """The changes of owner_nodes(namespace) since owner_version gave `version`, in order: (node,
        its pods of the namespace after the change, 0 when it has none left); None when that is too
        long ago to say."""
        log = self._owner_logs.get(namespace)
        if log is None:
            return [] if version == 0 else None
        return log.since(version)

    def node_memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """`build()`, kept under `key` until a node is added, changed or removed: for what depends on
        the node records alone (which nodes are not Ready, which carry a trait)."""
        try:
            return self._node_memo[key]
        except KeyError:
            if len(self._node_memo) >= NODE_MEMO_ENTRIES:  # keys of replaced policies pile up otherwise
                self._node_memo.clear()
            value = self._node_memo[key] = build()
            return value

    @property
    def touched(self) -> ChangeLog:
        """Every node whose record or pods changed, in the order they changed (read-only): what a
        number kept per node must work out again since its reader last read `touched.version`."""
        return self._touched

    def column(self, key: Hashable, compute: Callable[[NodeState], float]) -> NodeColumn:
        """The NodeColumn of `compute` (a function of a node and its pods, named by `key`), up to date."""
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = NodeColumn(compute, self._nodes)
        else:
            column.refresh(self._nodes)
        column.layout = self.slots()
        return column

    def selected_nodes(self, namespace: str, selector: Selector) -> Mapping[str, int]:
        """Node -> the placed pods of `namespace` on it that `selector` matches (pods being deleted
        left out, as kube-scheduler counts for spreading); read-only. Counted from the namespace's
        pods the first time, then kept up to date with every pod placed or removed."""
        per_ns = self._selected.get(namespace)
        if per_ns is None:
            per_ns = self._selected[namespace] = {}
        counts = per_ns.get(selector)
        if counts is not None:
            per_ns[selector] = per_ns.pop(selector)  # the most recently used last
            return counts
        if len(per_ns) >= SELECTORS_KEPT:
            del per_ns[next(iter(per_ns))]
        counts = per_ns[selector] = Counter()
        self._selected_index.pop(namespace, None)
        for pod in self._by_namespace.get(namespace, {}).values():
            if pod.node_name in self._nodes and not pod.deleting and selector.matches(pod.labels):
                counts[pod.node_name] += 1
        return counts

    def selected_slots(self, namespace: str, selector: Selector) -> np.ndarray | None:
        """selected_nodes(namespace, selector) by slot (read-only), None when no placed pod matches:
        summed and weighed with arrays, the counts are not read node by node (each a cache miss on
        the node's name, live)."""
        counts = self.selected_nodes(namespace, selector)
        return self._by_slot(self._selected_arrays, (namespace, selector), counts) if counts else None

    def affinity_slots(self, terms: PodAffinity) -> np.ndarray:
        """pods_with_affinity()[terms] by slot (read-only; zeros when no placed pod carries them)."""
        return self._by_slot(self._affinity_arrays, terms, self._with_affinity.get(terms) or Counter())

    def _by_slot(
        self,
        held: dict[Any, SlotCounts],
        key: Any,
        counts: Mapping[str, int],
    ) -> np.ndarray:
        layout = self.slots()
        kept = held.get(key)
        if kept is not None and kept[0] is counts and kept[1] is layout:
            return kept[2]
        array = np.zeros(len(layout.names), np.int64)
        if counts:
            index = layout.index
            array[np.fromiter(map(index.__getitem__, counts), np.intp, len(counts))] = np.fromiter(
                counts.values(), np.int64, len(counts)
            )
        if len(held) >= SLOT_COUNTS_KEPT:
            held.clear()
        held[key] = (counts, layout, array)
        return array

    def pods_with_affinity(self) -> Mapping[PodAffinity, Mapping[str, int]]:
        """The placed pods that carry pod (anti-)affinity terms, by their terms: terms -> node ->
        pods placed there; read-only (kube's symmetry and its scoring of existing pods' terms)."""
        return self._with_affinity

    def budgets(self, namespace: str) -> Mapping[str, tuple[Selector, int]]:
        """The PodDisruptionBudgets of a namespace: name -> (selector, disruptionsAllowed); read-only."""
        return self._budgets.get(namespace, {})

    def nominated_nodes(self) -> list[str]:
        """The nodes some pending pod is nominated to."""
        return list(self._nominated)

    def nominated(self, node: str) -> Mapping[str, Pod]:
        """The pending pods nominated to `node` (kube-scheduler preempted for them there); read-only."""
        return self._nominated.get(node, {})

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self._namespace_labels.get(namespace, {})

    def namespace_names(self) -> set[str]:
        """Every namespace berth knows of: those with pods and the Namespace objects."""
        return set(self._by_namespace) | set(self._namespace_labels)

    def default_selector(self, pod: Pod) -> Selector | None:
        """kube-scheduler's default spreading selector for the pod (helper.DefaultSelector): the
        selectors of the Services of its namespace that select it, merged, and its controller's
        (ReplicaSet, StatefulSet, ReplicationController) when the view holds it; None when empty."""
        key = (pod.namespace, tuple(sorted(pod.labels.items())), pod.controller)
        if key in self._default_selectors:
            return self._default_selectors[key]
        merged: dict[str, str] = {}
        for _, chosen in sorted(self._services.get(pod.namespace, {}).items()):
            if chosen and all(pod.labels.get(k) == v for k, v in chosen.items()):
                merged.update(chosen)
        selector = selector_of_set(merged)
        if pod.controller is not None and pod.controller[0] in CONTROLLER_KINDS:
            owner = self._controllers.get((pod.namespace, *pod.controller))
            if owner is not None and pod.controller[0] == "ReplicationController":
                selector = selector.with_labels(dict(owner.labels))
            elif owner is not None and not owner.nothing:
                selector = Selector(
                    labels=tuple(sorted(set(selector.labels) | set(owner.labels))),
                    expressions=selector.expressions + owner.expressions,
                )
        found = None if selector.empty or selector.nothing else selector
        if len(self._default_selectors) >= SELECTORS_KEPT * 16:
            self._default_selectors.clear()
        self._default_selectors[key] = found
        return found

    def state(self, name: str) -> NodeState | None:
        return self._nodes.get(name)

    def node(self, name: str) -> Node | None:
        state = self._nodes.get(name)
        return state.node if state else None

    def pod(self, key: str) -> Pod | None:
        return self._pods.get(key)

    def pod_by_uid(self, uid: str) -> Pod | None:
        key = self._by_uid.get(uid)
        return self._pods.get(key) if key else None

    def pods(self) -> Iterator[Pod]:
        return iter(self._pods.values())

    def namespace_pods(self, namespace: str) -> Iterator[Pod]:
        """The non-terminal pods of one namespace, placed or not."""
        return iter(self._by_namespace.get(namespace, {}).values())

    def pods_by_uid_prefix(self, prefix: str) -> list[Pod]:
        """Pods whose uid starts with `prefix`, which has at least UID_PREFIX characters."""
        if len(prefix) < UID_PREFIX:
            return []
        held = self._uid_prefix.get(prefix[:UID_PREFIX], ())
        uids = (held,) if isinstance(held, str) else held
        pods = (self.pod_by_uid(uid) for uid in sorted(uids) if uid.startswith(prefix))
        return [p for p in pods if p is not None]

    def label_values(self, namespace: str, key: str) -> Mapping[str, set[str]]:
        """Label value -> keys of the pods of `namespace` carrying label `key` with it; read-only."""
        return self._labels.get(namespace, {}).get(key, {})

    def app_nodes(self, key: tuple[str, str, str]) -> Mapping[str, int]:
        """Node name -> pods of this (namespace, app name, app version) placed there; read-only."""
        return self._app_nodes.get(key, {})

    def policy(self, namespace: str, name: str) -> Policy | None:
        return self._policies.get(namespace, {}).get(name)

    def policies(self) -> Iterator[Policy]:
        for per_ns in self._policies.values():
            yield from per_ns.values()

    def policies_for(self, pod: Pod) -> list[Policy]:
        """The PlacementPolicies that govern the pod, all of which must hold: the one its annotation
        berth.dev/placement-policy names (a stand-in marked missing when there is none of that name),
        else every policy of its namespace whose selector matches its labels, by name."""
        if self._override is not None:
            return list(self._override)
        per_ns = self._policies.get(pod.namespace, {})
        named = pod.annotations.get(ann.PLACEMENT_POLICY)
        if named is not None:
            name = named.strip()
            return [per_ns.get(name) or _policy_compiler().missing(pod.namespace, name)]
        return [
            p for _, p in sorted(per_ns.items()) if p.selector is not None and p.selector.matches(pod.labels)
        ]

    # -- writing -------------------------------------------------------------------------------
    def upsert_node(self, node: Node) -> None:
        state = self._nodes.get(node.name)
        if state is not None and state.node == node:
            return  # a status heartbeat: nothing berth reads has changed
        self.generation += 1
        self._nodes_changed(node.name)
        if state is not None:
            state.node = node
            state.generation += 1
            return
        self._sorted_names = self._sorted_states = None
        self.layout_generation += 1
        state = NodeState(node=node)
        self._nodes[node.name] = state
        for key, pod in self._orphans.pop(node.name, {}).items():
            self._attach(state, pod, key)

    def remove_node(self, name: str) -> None:
        self.generation += 1
        state = self._nodes.pop(name, None)
        if state is None:
            return
        self._nodes_changed(name)
        self._sorted_names = self._sorted_states = None
        self.layout_generation += 1
        if state.pods:
            self._orphans[name] = dict(state.pods)
            for pod in state.pods.values():
                self._count_node(pod, name, -1)

    def _nodes_changed(self, name: str) -> None:
        self.node_generation += 1
        self._node_memo.clear()
        self._domain_counts.clear()
        self._touch(name)

    def _touch(self, name: str) -> None:
        self._touched.extend((name,))
        for column in self._columns.values():
            column.dirty.add(name)

    def add_pod(self, pod: Pod) -> None:
        """Add or replace a pod; terminal pods hold nothing and are dropped. A pod equal to the one
        held changes nothing, and the one held stays (the watch showing bound a pod berth reserved
        there, the bind of a pod reserved at filter)."""
        self._add_pod(pod, news=True)

    def put_back(self, pod: Pod) -> None:
        """A pod held again after remove_pod took it off for a question, or placed for one (a what-if,
        preemption's nominated pods). Unlike add_pod this is not news of the cluster: a planned
        rebalance target is neither noted nor used up by it."""
        self._add_pod(pod, news=False)

    @contextmanager
    def lifted(self, pod: Pod) -> Iterator[None]:
        """The view without `pod` for the block (a pod asked about again is never its own neighbour:
        kube's framework hands its plugins the node without the pod being scheduled), then with it
        again, as put_back holds it."""
        if self.remove_pod(pod.key) is None:
            yield
            return
        try:
            yield
        finally:
            self.put_back(pod)

    def _add_pod(self, pod: Pod, *, news: bool) -> None:
        key = pod.key  # one string for every index that holds the pod (pod.key makes a new one)
        held = self._pods.get(key)
        indexed = False
        if held is not None:
            if held == pod:
                return
            if held.version != pod.version and held == msgspec.structs.replace(pod, version=held.version):
                self._new_version(held, pod, key)
                return
            state = self._nodes.get(held.node_name) if held.node_name else None
            if state is not None and state.pods.get(key) is held and _status_only(held, pod):
                self._replace_on_node(state, pod, key)
                return
            # The same uid and labels (a pending pod reserved on a node, then bound): the indexes by
            # namespace, label and uid stay as they are; only where the pod is placed changes.
            indexed = not pod.terminal and held.uid == pod.uid and held.labels == pod.labels
        self.generation += 1
        if held is not None and indexed:
            self._unplace(held, key)
        else:
            self.remove_pod(key)
        if pod.deleting and news:
            self.planned.note(pod)
        if pod.terminal:
            return
        if news and pod.node_name and (held is None or not held.node_name):
            self.planned.bound(pod)
        self._pods[key] = pod
        if indexed:
            self._by_namespace[pod.namespace][key] = pod
        else:
            self._index(pod, add=True, key=key)
            if pod.uid:
                self._by_uid[pod.uid] = key
        if pod.node_name:
            state = self._nodes.get(pod.node_name)
            if state is not None:
                self._attach(state, pod, key)
            else:
                self._orphans.setdefault(pod.node_name, {})[key] = pod
        elif pod.nominated_node:
            self._nominated.setdefault(pod.nominated_node, {})[key] = pod

    def _new_version(self, held: Pod, pod: Pod, key: str) -> None:
        """The same record at a later resourceVersion (what changed is nothing berth reads, a
        condition or an IP): it takes the old one's places and nothing counts as changed."""
        self._pods[key] = pod
        self._by_namespace[pod.namespace][key] = pod
        if held.node_name:
            state = self._nodes.get(held.node_name)
            places = state.pods if state is not None else self._orphans.get(held.node_name)
        else:
            places = self._nominated.get(held.nominated_node) if held.nominated_node else None
        if places is not None and places.get(key) is held:
            places[key] = pod

    def _replace_on_node(self, state: NodeState, pod: Pod, key: str) -> None:
        """A pod on a node whose new record differs only in what no index or count reads (its
        kubelet started it: status.phase and startTime): the new record takes the old one's places.
        Taking it off and placing it again would count the node changed for every answer kept by
        node, for nothing."""
        state.pods[key] = pod
        state.generation += 1  # what read its pods (a preemption's victims, by start time) again
        self.generation += 1
        self._pods[key] = pod
        self._by_namespace[pod.namespace][key] = pod

    def remove_pod(self, key: str) -> Pod | None:
        pod = self._pods.pop(key, None)
        if pod is None:
            return None
        self.generation += 1
        self._index(pod, add=False)
        if pod.uid:
            self._by_uid.pop(pod.uid, None)
        self._unplace(pod, key)
        return pod

    def _unplace(self, pod: Pod, key: str) -> None:
        """Take the pod off its node (or its node's orphans, or the pods nominated to a node)."""
        if pod.node_name:
            state = self._nodes.get(pod.node_name)
            if state is not None and state.remove(key) is not None:
                self._count_node(pod, pod.node_name, -1)
            elif state is None:
                self._orphans.get(pod.node_name, {}).pop(key, None)
        elif pod.nominated_node:
            waiting = self._nominated.get(pod.nominated_node)
            if waiting is not None:
                waiting.pop(key, None)
                if not waiting:
                    del self._nominated[pod.nominated_node]

    def _index(self, pod: Pod, *, add: bool, key: str | None = None) -> None:
        pod_key = key or pod.key
        per_ns = self._by_namespace.setdefault(pod.namespace, {})
        if add:
            per_ns[pod_key] = pod
        else:
            per_ns.pop(pod_key, None)
        if not per_ns:
            del self._by_namespace[pod.namespace]
        if pod.uid and len(pod.uid) >= UID_PREFIX:
            self._index_uid(pod.uid, add=add)
        if pod.labels:
            by_key = self._labels.setdefault(pod.namespace, {})
            for key, value in pod.labels.items():
                by_value = by_key.setdefault(key, {})
                keys = by_value.setdefault(value, set())
                (keys.add if add else keys.discard)(pod_key)
                if not keys:
                    del by_value[value]
                if not by_value:
                    del by_key[key]
            if not by_key:
                del self._labels[pod.namespace]

    def _index_uid(self, uid: str, *, add: bool) -> None:
        """uid prefix -> the uid, or the set of uids when several share the prefix (rare: a set per
        pod would cost more than the pod's record)."""
        prefix = uid[:UID_PREFIX]
        held = self._uid_prefix.get(prefix)
        if add:
            if held is None:
                self._uid_prefix[prefix] = uid
            elif isinstance(held, str):
                if held != uid:
                    self._uid_prefix[prefix] = {held, uid}
            else:
                held.add(uid)
        elif held == uid:
            del self._uid_prefix[prefix]
        elif isinstance(held, set):
            held.discard(uid)
            if len(held) == 1:
                self._uid_prefix[prefix] = next(iter(held))

    def _attach(self, state: NodeState, pod: Pod, key: str | None = None) -> None:
        state.add(pod, key)
        self._count_node(pod, state.node.name, +1)

    def _count_node(self, pod: Pod, node: str, sign: int) -> None:
        """The reverse indexes of a pod placed on (+1) or taken off (-1) a node."""
        _bump(self._app_nodes, app_key(pod), node, sign)
        _bump(self._owner_nodes, pod.namespace, node, sign)
        if self._domain_counts:
            self._count_domains(pod, node, sign)
        log = self._owner_logs.get(pod.namespace)
        if log is None:
            log = self._owner_logs[pod.namespace] = ChangeLog(OWNER_LOG)
        owners = self._owner_nodes.get(pod.namespace)
        if owners is None:  # the namespace has no pod left: nothing to mend from
            log.forget()
        else:
            log.extend(((node, owners.get(node, 0)),))
        if pod.tags:
            per_tag = self._tag_nodes.setdefault(pod.namespace, {})
            for tag in pod.tags:
                _bump(per_tag, tag, node, sign)
                if tag in per_tag:
                    self._tag_clock += 1
                    self._tag_versions[pod.namespace, tag] = self._tag_clock
                else:
                    self._tag_versions.pop((pod.namespace, tag), None)
            if not per_tag:
                del self._tag_nodes[pod.namespace]
        selected = self._selected.get(pod.namespace)
        if selected and not pod.deleting:
            arrays = self._selected_arrays
            for selector in self._selectors_for(pod, selected):
                if selector.matches(pod.labels):
                    counts = selected[selector]
                    count = counts[node] + sign
                    if count > 0:
                        counts[node] = count
                    else:
                        del counts[node]
                    if arrays:
                        _bump_slot(arrays.get((pod.namespace, selector)), counts, node, sign)
        if pod.affinity is not None:
            distinct = len(self._with_affinity)
            _bump(self._with_affinity, pod.affinity, node, sign)
            self.affinity_generation += 1
            if len(self._with_affinity) != distinct:
                self.affinity_terms_generation += 1
            if self._affinity_arrays:
                _bump_slot(
                    self._affinity_arrays.get(pod.affinity), self._with_affinity.get(pod.affinity), node, sign
                )
        self._touch(node)

    def _selectors_for(self, pod: Pod, selected: dict[Selector, Counter]) -> list[Selector]:
        """The selectors of `selected` (the pod's namespace's) that may match the pod: those whose
        first label pair it carries, and those without labels."""
        index = self._selected_index.get(pod.namespace)
        if index is None:
            by_pair: dict[tuple[str, str], list[Selector]] = {}
            rest: list[Selector] = []
            for selector in selected:
                if selector.labels:
                    by_pair.setdefault(selector.labels[0], []).append(selector)
                else:
                    rest.append(selector)
            index = self._selected_index[pod.namespace] = (by_pair, rest)
        by_pair, rest = index
        found = [s for pair in pod.labels.items() for s in by_pair.get(pair, ())] if by_pair else []
        return found + rest if rest else found

    def _count_domains(self, pod: Pod, node: str, sign: int) -> None:
        for key, (tags, apps) in self._domain_counts.items():
            value = self.domains(key).of.get(node)
            if value is None:
                continue
            _bump(apps, app_key(pod), value, sign)
            for tag in pod.tags:
                _bump(tags, (pod.namespace, tag), value, sign)

    # -- what kube's default spreading and pod affinity read ------------------------------------
    def upsert_workload(self, obj: Mapping[str, Any], kind: str | None = None) -> None:
        """Add or replace a Service, ReplicaSet, StatefulSet or ReplicationController (only its
        selector is kept) or a Namespace (its labels); other kinds are ignored. `kind` for objects
        that do not say (the items of a list)."""
        kind = kind or obj.get("kind")
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name, namespace = meta.get("name") or "", meta.get("namespace") or "default"
        spec = obj.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        if kind == "Namespace":
            self._namespace_labels[name] = dict(meta.get("labels") or {})
        elif kind == "PodDisruptionBudget":
            status = obj.get("status")
            status = status if isinstance(status, dict) else {}
            allowed = status.get("disruptionsAllowed")
            chosen = parse_selector(spec.get("selector"), "spec.selector")[0]
            self._budgets.setdefault(namespace, {})[name] = (
                chosen,
                allowed if isinstance(allowed, int) else 0,
            )
            return  # the spreading selectors do not read budgets
        elif kind == "Service":
            labels = spec.get("selector")
            self._services.setdefault(namespace, {})[name] = dict(labels) if isinstance(labels, dict) else {}
        elif kind == "ReplicationController":
            labels = spec.get("selector")
            self._controllers[namespace, kind, name] = selector_of_set(
                labels if isinstance(labels, dict) else {}
            )
        elif kind in CONTROLLER_KINDS:
            self._controllers[namespace, kind, name] = parse_selector(spec.get("selector"), "spec.selector")[
                0
            ]
        else:
            return
        self.workload_generation += 1
        self._default_selectors.clear()

    def workload_keys(self, kind: str) -> set[str]:
        """The keys (namespace/name; a Namespace's name) of the objects of `kind` the view holds."""
        if kind == "Namespace":
            return set(self._namespace_labels)
        if kind == "PodDisruptionBudget":
            return {f"{ns}/{name}" for ns, names in self._budgets.items() for name in names}
        if kind == "Service":
            return {f"{ns}/{name}" for ns, names in self._services.items() for name in names}
        return {f"{ns}/{name}" for ns, k, name in self._controllers if k == kind}

    def remove_workload(self, kind: str, namespace: str, name: str) -> None:
        if kind == "Namespace":
            self._namespace_labels.pop(name, None)
        elif kind == "PodDisruptionBudget":
            self._budgets.get(namespace, {}).pop(name, None)
            return
        elif kind == "Service":
            self._services.get(namespace, {}).pop(name, None)
        else:
            self._controllers.pop((namespace, kind, name), None)
        self.workload_generation += 1
        self._default_selectors.clear()

    # -- placement policies --------------------------------------------------------------------
    def upsert_policy(self, obj: Mapping[str, Any]) -> Policy:
        """Add or replace a PlacementPolicy object; an unchanged spec is not compiled again. An
        invalid one is kept, not Ready, with its errors: the pods it governs are refused."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        current = self.policy(meta.get("namespace") or "default", meta.get("name") or "")
        compiled = _policy_compiler().reload(current, obj)
        self.generation += 1
        if compiled is not current:
            self.policy_generation += 1
        self._policies.setdefault(compiled.namespace, {})[compiled.name] = compiled
        return compiled

    def remove_policy(self, namespace: str, name: str) -> Policy | None:
        per_ns = self._policies.get(namespace)
        removed = per_ns.pop(name, None) if per_ns else None
        if per_ns is not None and not per_ns:
            del self._policies[namespace]
        if removed is not None:
            self.generation += 1
            self.policy_generation += 1
        return removed

    def override_policies(self, policies: Sequence[Policy] | None) -> None:
        """Make `policies` govern every pod regardless of selectors and annotations (None: back to
        the policies of the view), as `berth simulate --policy` does."""
        self.generation += 1
        self.policy_generation += 1
        self._override = tuple(policies) if policies is not None else None


def _bump_slot(held: SlotCounts | None, counts: Counter | None, node: str, sign: int) -> None:
    """Counts by slot (ClusterView._by_slot) kept up to date with the counts they were made from;
    made from other counts (dropped and made anew since) they are left to be made again."""
    if held is not None and held[0] is counts:
        slot = held[1].index.get(node)
        if slot is not None:
            held[2][slot] += sign


def _bump(index: dict[Any, Counter], key: Any, node: str, sign: int) -> None:
    per_node = index.get(key)
    if per_node is None:
        per_node = index[key] = Counter()
    count = per_node[node] + sign
    if count > 0:
        per_node[node] = count
    else:
        del per_node[node]
        if not per_node:
            del index[key]
