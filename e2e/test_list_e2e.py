"""berth's live cache lists a real kube-apiserver: as a streaming list (sendInitialEvents, the pods sent
as events from the API server's watch cache, then the bookmark that ends them) where the server takes
it, page by page where it refuses it (`--feature-gates=WatchList=false`), and then watches from where
the list ended either way."""

from __future__ import annotations

import asyncio
import time

import pytest
from controlplane import ControlPlane

from berth.cluster.credentials import load_credentials
from berth.cluster.kubeapi import KubeClient
from berth.cluster.live import LiveCluster


def _pod(name: str, node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "registry.example/none:1"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


async def _until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "page-by-page"])
def test_the_cache_lists_a_real_api_server_and_watches_from_where_the_list_ended(streaming: bool):
    flags = [] if streaming else ["--feature-gates=WatchList=false"]
    with ControlPlane(apiserver_args=flags) as cp:
        cp.create_nodes(["n1", "n2"])
        for i in range(30):
            cp.api_request("POST", "/api/v1/namespaces/default/pods", _pod(f"before-{i}", f"n{i % 2 + 1}"))

        async def scenario() -> None:
            cache = LiveCluster(KubeClient(load_credentials(str(cp.kubeconfig))))
            await cache.start()
            await _until(cache.ready)
            pods = next(r for r in cache.reflectors if r.kind.name == "pods")
            assert pods.streams is streaming
            assert len(cache.view) == 2
            assert sorted(p.name for p in cache.view.pods()) == sorted(f"before-{i}" for i in range(30))
            assert cache.view.state("n1") is not None and len(cache.view.state("n1").pods) == 15
            # The watch that follows the list shows what comes after it.
            await asyncio.to_thread(
                cp.api_request, "POST", "/api/v1/namespaces/default/pods", _pod("after", "n2")
            )
            await _until(lambda: cache.view.pod("default/after") is not None)
            assert cache.view.pod("default/after").node_name == "n2"
            # A relist (a replica taking the Lease without its fence) holds the same pods.
            await cache.relist()
            assert sum(1 for _ in cache.view.pods()) == 31
            await cache.stop()

        asyncio.run(scenario())
