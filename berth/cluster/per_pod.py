"""What a server keeps per pod, in one place, so that it all lets go of a pod at once.

Every map a server keys by pod (the extender's remembered decisions, refusals, warnings, hand-overs,
preemption answers, the pods to retry; docs/reliability.md lists them) is a `PerPod` made by the
server's one `PodStates`. The live cache tells `PodStates` when its watch shows a pod deleted (or a
relist no longer lists it) and when it shows a pod bound: berth decides about pods waiting for a node,
and nothing it kept about one is read once the pod has one. So the maps hold pending pods only, and a
bound on each (its oldest entries go first) holds them should a deletion be missed.

A pod is keyed by its uid, or by namespace/name when it has none (objects from a file); the cache
forgets both forms.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from berth.cluster.model import Pod

V = TypeVar("V")

# The default bound of one map: far above the pods a cluster keeps pending at once, far below what
# would matter in memory for the small values most maps hold.
KEPT_AT_MOST = 50_000


def pod_key(pod: Pod) -> str:
    return pod.uid or pod.key


class PerPod(Generic[V]):
    """A map from pod key to what one concern keeps about the pod; at most `limit` entries, the least
    recently set going first. `grouped`: also by namespace (`in_namespace`)."""

    __slots__ = ("_by_namespace", "_items", "_namespace_of", "limit", "name")

    def __init__(self, name: str, limit: int = KEPT_AT_MOST, *, grouped: bool = False) -> None:
        self.name = name
        self.limit = limit
        self._items: dict[str, V] = {}
        self._by_namespace: dict[str, dict[str, None]] | None = {} if grouped else None
        self._namespace_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> V | None:
        return self._items.get(key)

    def set(self, key: str, value: V, namespace: str = "") -> None:
        """Keep `value` for the pod (`namespace` for a grouped map), as its most recent entry."""
        items = self._items
        if key in items:
            self.pop(key)
        elif len(items) >= self.limit:
            self.pop(next(iter(items)))
        items[key] = value
        if self._by_namespace is not None:
            self._by_namespace.setdefault(namespace, {})[key] = None
            self._namespace_of[key] = namespace

    def pop(self, key: str) -> V | None:
        value = self._items.pop(key, None)
        if self._by_namespace is not None and key in self._namespace_of:
            namespace = self._namespace_of.pop(key)
            keys = self._by_namespace[namespace]
            del keys[key]
            if not keys:
                del self._by_namespace[namespace]
        return value

    def in_namespace(self, namespace: str) -> list[str]:
        """The keys of the pods of one namespace (a grouped map)."""
        assert self._by_namespace is not None, f"{self.name} is not grouped by namespace"
        return list(self._by_namespace.get(namespace, ()))

    def keys(self) -> Iterator[str]:
        return iter(list(self._items))


class PodStates:
    """The one maker of a server's per-pod maps, and the one place a pod is forgotten."""

    def __init__(self) -> None:
        self._maps: dict[str, PerPod] = {}

    def map(self, name: str, limit: int = KEPT_AT_MOST, *, grouped: bool = False) -> PerPod:
        if name in self._maps:
            raise ValueError(f"a per-pod map named {name} exists already")
        made: PerPod = PerPod(name, limit, grouped=grouped)
        self._maps[name] = made
        return made

    def forget(self, uid: str, key: str) -> None:
        """The pod is gone or bound: nothing kept about it is read again."""
        for kept in self._maps.values():
            if uid:
                kept.pop(uid)
            kept.pop(key)

    def sizes(self) -> dict[str, int]:
        return {name: len(kept) for name, kept in self._maps.items()}
