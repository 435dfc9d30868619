"""The indexed cluster view: nodes, the pods placed on them, and per-node counters.

A rule asks a counter ("how many pods of namespace N carrying tag T are on this node"), never scans
pods, so a decision costs O(candidate nodes x rules). The snapshot loader fills a view once; the live
cache (and the extender's bind) keeps one up to date with add_pod / remove_pod / upsert_node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from berth import annotations as ann
from berth.cluster.model import Node, Pod


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

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self._count(pod, +1)

    def remove(self, key: str) -> Pod | None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._count(pod, -1)
        return pod

    def tag_count(self, namespace: str, tag: str) -> int:
        per_ns = self.tags.get(namespace)
        return per_ns.get(tag, 0) if per_ns else 0


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
        self.generation = 0
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

    # -- writing -------------------------------------------------------------------------------
    def upsert_node(self, node: Node) -> None:
        self.generation += 1
        state = self._nodes.get(node.name)
        if state is not None:
            state.node = node
            return
        state = NodeState(node=node)
        self._nodes[node.name] = state
        for pod in self._orphans.pop(node.name, {}).values():
            state.add(pod)

    def remove_node(self, name: str) -> None:
        self.generation += 1
        state = self._nodes.pop(name, None)
        if state is not None and state.pods:
            self._orphans[name] = dict(state.pods)

    def add_pod(self, pod: Pod) -> None:
        """Add or replace a pod; terminal pods hold nothing and are dropped."""
        self.generation += 1
        self.remove_pod(pod.key)
        if pod.terminal:
            return
        self._pods[pod.key] = pod
        if pod.uid:
            self._by_uid[pod.uid] = pod.key
        if pod.node_name:
            state = self._nodes.get(pod.node_name)
            if state is not None:
                state.add(pod)
            else:
                self._orphans.setdefault(pod.node_name, {})[pod.key] = pod

    def remove_pod(self, key: str) -> Pod | None:
        pod = self._pods.pop(key, None)
        if pod is None:
            return None
        self.generation += 1
        if pod.uid:
            self._by_uid.pop(pod.uid, None)
        if pod.node_name:
            state = self._nodes.get(pod.node_name)
            if state is not None:
                state.remove(key)
            else:
                self._orphans.get(pod.node_name, {}).pop(key, None)
        return pod
