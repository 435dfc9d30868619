"""Platform versions: hard-filter-platform-versions and hard-filter-feature-min-platform.

A node's platform is its label `berth.dev/platform` (a build stamp such as 20240131T120000Z, or a
version), else its kubelet version (v1.35.4). Its release line, sdc-designation's "SDC version", is the
major.minor of that version (of the kubelet's when the label is a stamp). A requirement maps release
lines to platforms, `{"1.34": "1.34.2", "1.35": "1.35.1"}`, and is applied with sdc-designation's rule (see
values.meets_min): above the highest line passes, a listed line needs at least (min) or at most (max)
its platform, an unlisted line between the lowest and highest passes, below the lowest fails.
Versions compare numerically part by part (1.10 is newer than 1.9), stamps as times; a stamp and a
version cannot be compared, and a node whose platform cannot be compared with a requirement fails it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from berth import annotations as ann
from berth.cluster.model import Node
from berth.cluster.view import NodeState
from berth.engine.step import NodeFilter, PodContext, Skipped, skip
from berth.engine.types import Kind, Reason
from berth.json_annotation import show
from berth.vocab.alloc.base import AllocStep, request
from berth.vocab.alloc.values import (
    Platform,
    PlatformMap,
    at_least,
    meets_max,
    meets_min,
    parse_platform,
    show_line,
)


@dataclass(frozen=True, slots=True)
class NodePlatform:
    platform: Platform | None
    line: tuple[int, int] | None

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"platform": self.platform.text if self.platform else None}
        if self.line:
            out["line"] = show_line(self.line)
        return out


def node_platform(node: Node) -> NodePlatform:
    return _node_platform(node.labels.get(ann.NODE_PLATFORM, ""), node.kubelet_version)


@lru_cache(maxsize=4096)
def _node_platform(label: str, kubelet: str) -> NodePlatform:
    kubelet_platform = parse_platform(kubelet) if kubelet else None
    platform = parse_platform(label) if label else kubelet_platform
    line = platform.line if platform is not None and not platform.stamp else None
    if line is None and kubelet_platform is not None and not kubelet_platform.stamp:
        line = kubelet_platform.line
    return NodePlatform(platform, line)


@dataclass(frozen=True, slots=True)
class _Requirement:
    owner: str  # "package small", "image"
    kind: str  # min | max
    platforms: PlatformMap

    def text(self) -> str:
        return f"{self.owner} requires {self.kind} platforms {show(self.platforms.as_dict())}"


class HardFilterPlatformVersions(AllocStep, NodeFilter[tuple[_Requirement, ...]]):
    name = "alloc/hard-filter-platform-versions"
    summary = "hard: the node's platform meets the package's and the image's min/max platforms"

    def prepare(self, ctx: PodContext) -> tuple[_Requirement, ...] | Skipped:
        req = request(ctx)
        found = []
        if req.package is not None and req.package.min_platform:
            found.append(_Requirement(f"package {req.package.name}", "min", req.package.min_platform))
        if req.image is not None:
            if req.image.min_platform:
                found.append(_Requirement("image", "min", req.image.min_platform))
            if req.image.max_platform:
                found.append(_Requirement("image", "max", req.image.max_platform))
        return tuple(found) or skip("no platform requirements in the pod's package or image")

    def check(self, state: NodeState, prepared: tuple[_Requirement, ...], ctx: PodContext) -> Reason | None:
        node = node_platform(state.node)
        for requirement in prepared:
            if node.platform is None or node.line is None:
                return Reason(
                    self.name,
                    Kind.UNMET,
                    f"{requirement.text()}; the node has no platform version",
                    node.values(),
                )
            rule = meets_min if requirement.kind == "min" else meets_max
            verdict = rule(requirement.platforms, node.line, node.platform)
            if verdict is None:
                return Reason(
                    self.name,
                    Kind.UNMET,
                    f"{requirement.text()}; the node's platform cannot be compared (a stamp against a "
                    "version)",
                    node.values(),
                )
            if not verdict:
                return Reason(self.name, Kind.UNMET, requirement.text(), node.values())
        return None

    def constraint(self, prepared: tuple[_Requirement, ...]) -> str | None:
        return "; ".join(r.text() for r in prepared)


class HardFilterFeatureMinPlatform(AllocStep, NodeFilter[Platform]):
    """sdc-designation's features, on Kubernetes: every pod is a container, so filter_docker_min_platform
    applies to every pod. The NFS-volume automount, volapi NFS v2 and flexible-disk features have no
    counterpart on a pod; their keys are read and validated, and never trigger."""

    name = "alloc/hard-filter-feature-min-platform"
    summary = "hard: the node's platform is at least filter_docker_min_platform (every pod is a container)"

    def prepare(self, ctx: PodContext) -> Platform | Skipped:
        minimum = self.defaults.filter_docker_min_platform
        if minimum is None:
            return skip("filter_docker_min_platform is not set")
        # None only for a minimum that parse_config refuses (it checks every *_min_platform).
        return parse_platform(minimum) or skip("filter_docker_min_platform does not parse")

    def check(self, state: NodeState, prepared: Platform, ctx: PodContext) -> Reason | None:
        node = node_platform(state.node)
        message = f"container support requires platform {prepared.text} or newer (filter_docker_min_platform)"
        if node.platform is None:
            return Reason(
                self.name, Kind.UNMET, f"{message}; the node has no platform version", node.values()
            )
        verdict = at_least(node.platform, prepared)
        if verdict is None:
            return Reason(
                self.name, Kind.UNMET, f"{message}; the node's platform cannot be compared", node.values()
            )
        return None if verdict else Reason(self.name, Kind.UNMET, message, node.values())
