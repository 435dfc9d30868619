"""Pending pods retried when a PlacementPolicy that concerns them changes (berth.operator.policy_requeue),
through the handlers as kopf calls them and a client that records what is written."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import kopf
import pytest

from berth.cluster.kubeapi import ApiError
from berth.operator import policy_requeue as requeue
from berth.operator.handlers import policy_deleted, reconcile
from tests.builders import pod
from tests.policy_builders import placement_policy

UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
}


def _waiting(name: str, *, labels=None, policy: str | None = None, **changes: Any) -> dict[str, Any]:
    annotations = {"berth.dev/placement-policy": policy} if policy else None
    body = pod(name, namespace="shop", labels=labels, annotations=annotations)
    body["spec"]["schedulerName"] = "berth-scheduler"
    body["status"] = json.loads(json.dumps(UNSCHEDULABLE))
    for key, value in changes.items():
        body[key] = {**body[key], **value}
    return body


def _policy(selector: dict[str, Any] | None, tree: dict[str, Any], name: str = "web", generation: int = 1):
    return placement_policy(name, tree, namespace="shop", selector=selector, generation=generation)


class Client:
    def __init__(self, gone: tuple[str, ...] = ()) -> None:
        self.written: list[tuple[str, dict[str, Any], bool]] = []
        self.gone = gone

    async def patch(self, path: str, body: dict[str, Any], *, strategic: bool = False) -> dict[str, Any]:
        if any(f"/pods/{g}/" in path for g in self.gone):
            raise ApiError("not found", status=404)
        self.written.append((path, body, strategic))
        return {}


def _index(*bodies: dict[str, Any]) -> dict[str, list[requeue.Waiting]]:
    out: dict[str, list[requeue.Waiting]] = {}
    for body in bodies:
        if requeue.is_waiting(body):
            out.setdefault(body["metadata"]["namespace"], []).append(requeue.waiting_record(body))
    return out


def _reconcile(body: dict[str, Any], reason: str, old: Any = None) -> None:
    reconcile(
        body=body,
        meta=body["metadata"],
        status={},
        namespace="shop",
        name=body["metadata"]["name"],
        patch=type("Patch", (), {"status": {}})(),
        reason=reason,
        old=old,
    )


def _retried(index: dict[str, list[requeue.Waiting]], client: Client | None = None) -> list[str]:
    client = client or Client()
    asyncio.run(
        requeue.retry_once(client, requeue.take(), index, rate=1e6, now=lambda: "2026-12-03T00:00:00Z")
    )
    return [path.split("/")[-2] for path, _, _ in client.written]


@pytest.fixture(autouse=True)
def _nothing_noted(monkeypatch):
    # the policy's own events need kopf's running operator: not what these tests look at
    monkeypatch.setattr(kopf, "info", lambda *_, **__: None)
    monkeypatch.setattr(kopf, "warn", lambda *_, **__: None)
    requeue.take()
    yield
    requeue.take()


WEB = {"app.kubernetes.io/name": "web"}
SELECT_WEB = {"matchLabels": WEB}


def test_only_pending_pods_kube_scheduler_found_unschedulable_are_waiting():
    assert requeue.is_waiting(_waiting("a"))
    assert not requeue.is_waiting(_waiting("bound", spec={"nodeName": "n1"}))
    assert not requeue.is_waiting(_waiting("kubes", spec={"schedulerName": "default-scheduler"}))
    never_tried = _waiting("new")
    never_tried["status"] = {"phase": "Pending"}
    assert not requeue.is_waiting(never_tried)
    going = _waiting("going")
    going["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    assert not requeue.is_waiting(going)


def test_a_created_policy_retries_the_pods_that_name_it_and_those_it_selects():
    index = _index(
        _waiting("named", policy="web"),
        _waiting("selected", labels=WEB),
        _waiting("other-policy", labels=WEB, policy="db"),
        _waiting("unrelated", labels={"app.kubernetes.io/name": "db"}),
    )
    _reconcile(_policy(SELECT_WEB, {"type": "ONE_PER_HOST"}), "create")
    assert sorted(_retried(index)) == ["named", "selected"]


def test_the_retry_writes_one_condition_on_the_status_with_a_strategic_merge():
    client = Client()
    _reconcile(_policy(None, {"type": "ANY"}), "create")
    _retried(_index(_waiting("named", policy="web")), client)
    ((path, body, strategic),) = client.written
    assert path == "/api/v1/namespaces/shop/pods/named/status"
    assert strategic  # merged by type: kube-scheduler's PodScheduled condition stays
    assert body == {
        "status": {
            "conditions": [
                {
                    "type": "berth.dev/PlacementRetry",
                    "status": "True",
                    "reason": "PlacementPolicyChanged",
                    "message": "PlacementPolicy web created: berth asked kube-scheduler to try the pod again",
                    "lastTransitionTime": "2026-12-03T00:00:00Z",
                    "lastProbeTime": "2026-12-03T00:00:00Z",
                }
            ]
        }
    }


def test_a_changed_selector_retries_the_pods_it_selected_before_and_those_it_selects_now():
    index = _index(_waiting("web-0", labels=WEB), _waiting("api-0", labels={"app.kubernetes.io/name": "api"}))
    new = _policy({"matchLabels": {"app.kubernetes.io/name": "api"}}, {"type": "ANY"}, generation=2)
    _reconcile(new, "update", old={"selector": SELECT_WEB, "policy": {"type": "ONE_PER_HOST"}})
    assert sorted(_retried(index)) == ["api-0", "web-0"]


def test_a_deleted_policy_retries_the_pods_it_selected():
    index = _index(_waiting("web-0", labels=WEB))
    body = _policy(SELECT_WEB, {"type": "ONE_PER_HOST"})
    policy_deleted(event={"type": "MODIFIED"}, body=body, namespace="shop", name="web")
    assert _retried(index) == []
    policy_deleted(event={"type": "DELETED"}, body=body, namespace="shop", name="web")
    assert _retried(index) == ["web-0"]


def test_an_invalid_policy_retries_nothing_it_cannot_let_in():
    index = _index(_waiting("web-0", labels=WEB))
    _reconcile(_policy(SELECT_WEB, {"type": "MAX_N_PER_HOST"}), "update", old={"selector": SELECT_WEB})
    assert _retried(index) == []


def test_a_change_noted_twice_before_its_round_retries_each_pod_once():
    index = _index(_waiting("web-0", labels=WEB), _waiting("web-1", labels=WEB))
    _reconcile(_policy(SELECT_WEB, {"type": "ANY"}), "create")
    _reconcile(
        _policy(SELECT_WEB, {"type": "ONE_PER_HOST"}, generation=2), "update", old={"selector": SELECT_WEB}
    )
    assert sorted(_retried(index)) == ["web-0", "web-1"]


def test_at_most_max_pods_are_written_per_change_and_a_pod_gone_meanwhile_is_skipped(monkeypatch):
    monkeypatch.setattr(requeue, "MAX_PODS", 3)
    index = _index(*(_waiting(f"web-{i}", labels=WEB) for i in range(5)))
    _reconcile(_policy(SELECT_WEB, {"type": "ANY"}), "create")
    assert _retried(index, Client(gone=("web-1",))) == ["web-0", "web-2"]
