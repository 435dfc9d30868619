"""Preemption through berth's preempt verb, on a control plane whose pods run (kube-controller-manager
and kwok: evicted pods are deleted for real), against kube-scheduler v1.36.3 and v1.38.0-beta.0.

kube-scheduler up to v1.37 proposes a node for preemption only where its own filters need victims, so
in the cases both releases run every node is also short of CPU for the preemptor: kube's dry run frees
the CPU, berth decides what its rules need besides. v1.38 also hands a preempting extender the nodes
its own filters pass with no victim (kubernetes/kubernetes PR 135486): a block only berth sees is then
preempted for too; up to v1.37 the pod stays Pending and its refusal names the pods that block.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from stack import VERSIONS, Stack, running, until

LOW, HIGH = "berth-e2e-low", "berth-e2e-high"


@pytest.fixture(scope="module", params=list(VERSIONS.values()), ids=list(VERSIONS))
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with running(request.param, controllers=True) as stack:
        for name, value in ((LOW, 10), (HIGH, 1000)):
            priority_class = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            stack.apply(priority_class)
        yield stack


_cases = 0


def _case(stack: Stack, nodes: list[str], cpu: str = "2") -> str:
    """A namespace of its own, and the case's nodes (kwok's, 2 CPU each by default) as the only ones."""
    global _cases
    _cases += 1
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    for name in nodes:
        cp.create_node(f"{name}-{_cases}", cpu=cpu, memory="8Gi", kwok=True)
    stack.wait_nodes(len(nodes))
    ns = f"pre-{_cases}"
    cp.kubectl("create", "namespace", ns)
    return ns


def _pod(
    name: str,
    ns: str,
    *,
    priority: str,
    cpu: str,
    node: str | None = None,
    tags=None,
    affinity=None,
    labels=None,
) -> dict[str, Any]:
    annotations = {}
    if tags:
        annotations["berth.dev/tags"] = json.dumps(tags)
    if affinity:
        annotations["berth.dev/affinity"] = json.dumps(affinity)
    spec: dict[str, Any] = {
        "schedulerName": "berth-scheduler",
        "priorityClassName": priority,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "c", "image": "registry.example/x:1", "resources": {"requests": {"cpu": cpu}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations, "labels": labels or {}},
        "spec": spec,
    }


def _names(stack: Stack, ns: str) -> dict[str, str]:
    """Pod name -> its node ("" while pending), pods being deleted left out."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in stack.pods(ns)}


def _running(stack: Stack, ns: str, name: str) -> bool:
    pods = stack.cp.kubectl_json("get", "pods", "-n", ns, "--field-selector", f"metadata.name={name}")[
        "items"
    ]
    return bool(pods) and pods[0].get("status", {}).get("phase") == "Running"


NO_BATCH = {"require_without_tag": ["batch"]}


def test_a_lower_priority_pod_with_the_excluded_tag_is_evicted_with_kubes_victim(stack: Stack) -> None:
    ns = _case(stack, ["a"])
    node = f"a-{_cases}"
    stack.apply(
        _pod("filler", ns, priority=LOW, cpu="1500m", node=node),
        _pod("batch", ns, priority=LOW, cpu="100m", node=node, tags=["batch"]),
    )
    until("the running pods", lambda: _running(stack, ns, "filler") and _running(stack, ns, "batch"))
    stack.apply(_pod("urgent", ns, priority=HIGH, cpu="1", affinity=NO_BATCH))
    placed = until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
    assert placed == {"urgent": node}


def test_the_filler_of_a_node_berth_refuses_survives_and_the_other_node_is_preempted(stack: Stack) -> None:
    """Two full nodes: on one a higher-priority pod carries the excluded tag (berth refuses it whatever is
    evicted), on the other a low-priority filler only. Only the second filler goes."""
    ns = _case(stack, ["kept", "freed"])
    kept, freed = f"kept-{_cases}", f"freed-{_cases}"
    stack.apply(
        _pod("keeper", ns, priority=LOW, cpu="1500m", node=kept),
        _pod("guard", ns, priority=HIGH, cpu="100m", node=kept, tags=["batch"]),
        _pod("filler", ns, priority=LOW, cpu="1500m", node=freed),
    )
    until("the running pods", lambda: all(_running(stack, ns, n) for n in ("keeper", "guard", "filler")))
    stack.apply(_pod("urgent", ns, priority=HIGH, cpu="1", affinity=NO_BATCH))
    placed = until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
    assert placed["urgent"] == freed
    assert placed.get("keeper") == kept and placed.get("guard") == kept  # no eviction for nothing
    assert "filler" not in placed


def test_no_eviction_loop_a_pod_evicted_for_a_preemptor_does_not_preempt_back(stack: Stack) -> None:
    ns = _case(stack, ["a"])
    node = f"a-{_cases}"
    web = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}
    stack.apply(_pod("filler", ns, priority=LOW, cpu="1500m", node=node, labels=web))
    until("the filler runs", lambda: _running(stack, ns, "filler"))
    stack.apply(_pod("urgent", ns, priority=HIGH, cpu="1500m"))
    until("urgent placed", lambda: _names(stack, ns).get("urgent") == node)
    # The filler comes back (as its controller would make it again): lower priority, it waits.
    stack.apply(_pod("filler-again", ns, priority=LOW, cpu="1500m", labels=web))
    time.sleep(5)
    names = _names(stack, ns)
    assert names.get("urgent") == node and names.get("filler-again") == ""


def test_a_block_only_berth_sees_is_preempted_for_from_v1_38_and_named_before(stack: Stack) -> None:
    """The only node has room; a lower-priority pod of the same app and version holds it under
    ONE_PER_HOST: only berth's rule blocks."""
    ns = _case(stack, ["a"])
    node = f"a-{_cases}"
    web = {"app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.0"}
    policy = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "one", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "policy": {"type": "ONE_PER_HOST"},
        },
    }
    stack.apply(policy, _pod("old", ns, priority=LOW, cpu="100m", node=node, labels=web))
    until("the old pod runs", lambda: _running(stack, ns, "old"))
    time.sleep(2)  # the policy in berth's view
    stack.apply(_pod("urgent", ns, priority=HIGH, cpu="100m", labels=web))
    version = stack.cp.versions().get("kube-scheduler", "")
    if "v1.38" in version:
        placed = until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
        assert placed == {"urgent": node}
    else:
        note = "lower-priority pods block it only under berth's rules (on " + node + ": old)"
        until(
            "the refusal names the blocking pod",
            lambda: any(note in m for m in _messages(stack, ns, "urgent")),
        )
        assert _names(stack, ns) == {"old": node, "urgent": ""}


def _messages(stack: Stack, ns: str, pod: str) -> list[str]:
    events = stack.cp.kubectl_json("get", "events", "-n", ns)["items"]
    return [e.get("message", "") for e in events if e["involvedObject"]["name"] == pod]


def test_a_candidate_whose_victims_break_a_budget_loses_to_one_whose_victims_do_not(stack: Stack) -> None:
    ns = _case(stack, ["guarded", "free"])
    guarded, free = f"guarded-{_cases}", f"free-{_cases}"
    stack.apply(
        _pod("protected", ns, priority=LOW, cpu="1500m", node=guarded, labels={"tier": "protected"}),
        _pod("filler", ns, priority=LOW, cpu="1500m", node=free),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "protected", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"tier": "protected"}}},
        },
    )
    until("both running", lambda: _running(stack, ns, "protected") and _running(stack, ns, "filler"))

    def budget_counted() -> bool:
        status = stack.cp.kubectl_json("get", "pdb", "protected", "-n", ns).get("status", {})
        return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

    until("the budget's status", budget_counted)
    time.sleep(2)  # the budget in berth's view
    stack.apply(_pod("urgent", ns, priority=HIGH, cpu="1"))
    placed = until("urgent placed", lambda: (n := _names(stack, ns)).get("urgent") and n)
    assert placed["urgent"] == free and placed.get("protected") == guarded


def test_one_eviction_where_the_pod_berths_rule_needs_gone_also_frees_the_room(stack: Stack) -> None:
    """Three 4-CPU nodes full of low-priority 1.8-CPU pods: two tagged batch on n0 and on n1, one tagged
    and an untagged filler on n2. The preemptor (1.5 CPU) excludes batch. kube's dry run on n2 picks the
    filler; the batch pod berth's rule needs gone frees the room too, so n2 costs one eviction, every
    other node two: the preemptor goes to n2 and only batch-n2-a is evicted."""
    ns = _case(stack, ["n0", "n1", "n2"], cpu="4")
    n0, n1, n2 = (f"{n}-{_cases}" for n in ("n0", "n1", "n2"))
    low = [
        _pod("batch-n0-a", ns, priority=LOW, cpu="1800m", node=n0, tags=["batch"]),
        _pod("batch-n0-b", ns, priority=LOW, cpu="1800m", node=n0, tags=["batch"]),
        _pod("batch-n1-a", ns, priority=LOW, cpu="1800m", node=n1, tags=["batch"]),
        _pod("batch-n1-b", ns, priority=LOW, cpu="1800m", node=n1, tags=["batch"]),
        _pod("batch-n2-a", ns, priority=LOW, cpu="1800m", node=n2, tags=["batch"]),
        _pod("filler-n2", ns, priority=LOW, cpu="1800m", node=n2),
    ]
    names = [p["metadata"]["name"] for p in low]
    # kube's dry run reprieves the pod that started first (MoreImportantPod: same priority, earlier
    # status.startTime), and startTime has one-second resolution: the filler starts a second later,
    # so kube's victim on n2 is the filler and not, by a tie, batch-n2-a.
    stack.apply(*low[:-1])
    until("the running pods", lambda: all(_running(stack, ns, n) for n in names[:-1]))
    time.sleep(1.2)
    stack.apply(low[-1])
    until("the filler running", lambda: _running(stack, ns, names[-1]))
    stack.apply(_pod("web-high", ns, priority=HIGH, cpu="1500m", affinity=NO_BATCH))
    placed = until("web-high placed", lambda: (n := _names(stack, ns)).get("web-high") and n)
    time.sleep(3)  # a second eviction, had there been one, would show by now
    left = _names(stack, ns)
    assert sorted(set(names) - set(left)) == ["batch-n2-a"]
    assert placed["web-high"] == n2 and left.get("filler-n2") == n2
    # berth says what it chose and why: on the victim it added, and on the preemptor.
    victim = until(
        "the victim's event", lambda: [m for m in _messages(stack, ns, "batch-n2-a") if "berth" in m]
    )
    assert any(m.startswith(f"evicted on {n2} for web-high") and "require_without_tag" in m for m in victim)
    told = until(
        "the preemptor's event", lambda: [m for m in _messages(stack, ns, "web-high") if "berth chose" in m]
    )
    assert "added batch-n2-a" in told[0] and "spared filler-n2" in told[0]


def test_past_kubes_sample_of_candidates_the_fewest_evictions_still_win(stack: Stack) -> None:
    """120 full nodes of 4 CPU, so kube-scheduler's dry run looks at 100 of them from a random start
    (at least 10 % of the nodes, at least 100). 90 hold two low-priority batch pods, 30 a batch pod and
    an untagged filler; the preemptor (1.5 CPU) excludes batch. kube's dry run proposes one victim on
    every node; berth's rule needs both pods gone on the 90, only the batch pod on the 30, so exactly
    one batch pod is evicted, on one of the 30, and no filler."""
    ns, nodes = _sampled_case(stack)
    mixed = set(nodes[::4])  # 30 nodes, spread over the list
    low = []
    for node in nodes:
        low.append(_pod(f"batch-a-{node}", ns, priority=LOW, cpu="1800m", node=node, tags=["batch"]))
        if node in mixed:
            low.append(_pod(f"filler-{node}", ns, priority=LOW, cpu="1800m", node=node))
        else:
            low.append(_pod(f"batch-b-{node}", ns, priority=LOW, cpu="1800m", node=node, tags=["batch"]))
    names = _all_running(stack, ns, low)
    stack.apply(_pod("web-high", ns, priority=HIGH, cpu="1500m", affinity=NO_BATCH))
    placed = until("web-high placed", lambda: (n := _names(stack, ns)).get("web-high") and n, timeout=120)
    time.sleep(3)  # a second eviction, had there been one, would show by now
    gone = sorted(names - set(_names(stack, ns)))
    assert placed["web-high"] in mixed
    assert gone == [f"batch-a-{placed['web-high']}"]


def test_past_kubes_sample_a_preemptor_that_fits_a_free_node_evicts_nothing(stack: Stack) -> None:
    """120 nodes, 108 of them running a small low-priority batch pod, the last 12 free; 12 preemptors
    that exclude batch, one at a time. kube-scheduler's filters pass every node, so it asks berth about
    100 of them, starting each pass where the last stopped: some passes leave the free nodes out. A
    preemptor is then handed over to a free node past the sample, never preempted for (v1.38 would
    preempt for a block only berth sees, were the pod refused)."""
    ns, nodes = _sampled_case(stack)
    free = set(nodes[-12:])
    low = [_pod(f"batch-{n}", ns, priority=LOW, cpu="100m", node=n, tags=["batch"]) for n in nodes[:-12]]
    names = _all_running(stack, ns, low)
    for i in range(12):
        name = f"web-high-{i:02d}"
        stack.apply(_pod(name, ns, priority=HIGH, cpu="1", affinity=NO_BATCH))
        until(f"{name} placed", lambda n=name: _names(stack, ns).get(n), timeout=60)
    left = _names(stack, ns)
    assert {left[f"web-high-{i:02d}"] for i in range(12)} == free
    assert names <= set(left), sorted(names - set(left))  # nothing evicted
    handed = [m for i in range(12) for m in _messages(stack, ns, f"web-high-{i:02d}") if "outside kube" in m]
    assert handed, "no preemptor was handed over past kube-scheduler's sample"


def _sampled_case(stack: Stack) -> tuple[str, list[str]]:
    """A namespace of its own and 120 kwok nodes of 4 CPU as the only ones: more than kube-scheduler's
    100, so it samples (its filter pass, and its dry run's candidates)."""
    global _cases
    _cases += 1
    cp = stack.cp
    for node in cp.kubectl_json("get", "nodes")["items"]:
        cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    nodes = [f"s{i:03d}-{_cases}" for i in range(120)]
    cp.create_nodes(nodes, cpu="4", memory="8Gi", kwok=True)
    stack.wait_nodes(len(nodes))
    ns = f"pre-{_cases}"
    cp.kubectl("create", "namespace", ns)
    return ns, nodes


def _all_running(stack: Stack, ns: str, pods: list[dict[str, Any]]) -> set[str]:
    """Apply the pods in one request and wait until all run: their names."""
    stack.apply(*pods)
    names = {p["metadata"]["name"] for p in pods}

    def running() -> bool:
        listed = stack.cp.kubectl_json("get", "pods", "-n", ns)["items"]
        return sum(1 for p in listed if p.get("status", {}).get("phase") == "Running") == len(names)

    until(f"the {len(names)} running pods", running, timeout=120)
    time.sleep(1)  # in berth's view
    return names
