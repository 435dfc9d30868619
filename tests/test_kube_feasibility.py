"""What kube-scheduler checks before berth is asked, on the offline path; reasons start with kube/."""

from __future__ import annotations

import pytest

from berth.cluster.quantity import parse_quantity, resource_units
from berth.configure import default_chain
from berth.engine import Kind, flatten
from tests.builders import node, pod


def _reason(decision, name):
    result = next(n for n in decision.nodes if n.name == name)
    return result.reasons[0] if result.reasons else None


def test_a_node_that_is_not_ready_is_removed(place):
    decision = place(pod("p"), node("up"), node("down", ready=False))
    assert decision.chosen == "up"
    assert str(_reason(decision, "down")) == "kube/node-ready: node is not Ready"


@pytest.mark.parametrize(
    ("tolerations", "allowed"),
    [
        # what a network plugin's DaemonSet carries: every taint tolerated
        pytest.param([{"operator": "Exists"}], True, id="tolerating everything"),
        pytest.param(
            [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
            True,
            id="tolerating the not-ready NoSchedule taint",
        ),
        # every pod's default: NoExecute for 300 s keeps a running pod, it does not admit a new one
        pytest.param(
            [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            False,
            id="the default NoExecute toleration",
        ),
    ],
)
def test_a_node_that_is_not_ready_takes_a_pod_that_tolerates_the_not_ready_taint(place, tolerations, allowed):
    # kube-scheduler has no check of the Ready condition: the node lifecycle controller taints a
    # not-Ready node node.kubernetes.io/not-ready:NoSchedule, and TaintToleration does the rest. (The
    # allocator's own hard-filter-running, sdc-designation's "running servers only", still applies
    # in the default chain.)
    decision = place(pod("p", spec={"tolerations": tolerations}), node("down", ready=False), node("up"))
    ready = next(s for s in decision.steps if s.step == "kube/node-ready")
    assert ("down" in ready.removed) is not allowed
    if not allowed:
        assert str(ready.removed["down"]) == "kube/node-ready: node is not Ready"


def test_a_cordoned_node_is_removed_unless_the_pod_tolerates_it(place):
    cordoned = node("cordoned", unschedulable=True)
    decision = place(pod("p"), node("up"), cordoned)
    assert _reason(decision, "cordoned").step == "kube/node-unschedulable"
    tolerant = pod(
        "p",
        spec={
            "tolerations": [
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            ]
        },
    )
    assert _reason(place(tolerant, cordoned), "cordoned") is None


@pytest.mark.parametrize(
    ("tolerations", "allowed"),
    [
        pytest.param([], False, id="no toleration leaves the tainted node out"),
        pytest.param(
            [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}], True, id="equal"
        ),
        pytest.param([{"key": "gpu", "operator": "Equal", "value": "no"}], False, id="a different value"),
        pytest.param([{"key": "gpu", "operator": "Exists"}], True, id="exists on the key"),
        pytest.param([{"operator": "Exists"}], True, id="exists without a key tolerates everything"),
        pytest.param(
            [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], False, id="another effect"
        ),
    ],
)
def test_taints_with_noschedule_must_be_tolerated(place, tolerations, allowed):
    tainted = node("gpu", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    decision = place(pod("p", spec={"tolerations": tolerations}), tainted)
    assert (decision.chosen == "gpu") is allowed
    if not allowed:
        assert _reason(decision, "gpu").values == {"taint": "gpu=yes:NoSchedule"}


def test_a_prefer_noschedule_taint_does_not_filter(place):
    decision = place(pod("p"), node("n", taints=[{"key": "a", "effect": "PreferNoSchedule"}]))
    assert decision.chosen == "n"


def test_node_selector_must_match_the_node_labels(place):
    decision = place(
        pod("p", spec={"nodeSelector": {"zone": "a"}}), node("in-a", labels={"zone": "a"}), node("in-b")
    )
    assert decision.chosen == "in-a"
    assert _reason(decision, "in-b").values == {"wanted": {"zone": "a"}}


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        pytest.param({"key": "zone", "operator": "In", "values": ["a", "b"]}, {"a", "b"}, id="In"),
        pytest.param({"key": "zone", "operator": "NotIn", "values": ["a"]}, {"b", "none"}, id="NotIn"),
        pytest.param({"key": "zone", "operator": "Exists"}, {"a", "b"}, id="Exists"),
        pytest.param({"key": "zone", "operator": "DoesNotExist"}, {"none"}, id="DoesNotExist"),
        pytest.param({"key": "cores", "operator": "Gt", "values": ["8"]}, {"b"}, id="Gt"),
        pytest.param({"key": "cores", "operator": "Lt", "values": ["8"]}, {"a"}, id="Lt"),
    ],
)
def test_required_node_affinity_operators(place, expression, matches):
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    decision = place(
        pod("p", spec={"affinity": affinity}),
        node("a", labels={"zone": "a", "cores": "4"}),
        node("b", labels={"zone": "b", "cores": "16"}),
        node("none"),
    )
    assert {n.name for n in decision.nodes if n.feasible} == matches


def test_node_affinity_terms_are_ored_and_match_fields_select_by_name(place):
    terms = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    ]
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    decision = place(
        pod("p", spec={"affinity": affinity}), node("a", labels={"zone": "a"}), node("b"), node("c")
    )
    assert {n.name for n in decision.nodes if n.feasible} == {"a", "b"}


def test_requests_must_fit_allocatable_minus_the_requests_of_placed_pods(place):
    decision = place(
        pod("p", cpu="1500m", memory="1Gi"),
        node("full", cpu="2"),
        node("roomy", cpu="2"),
        pod("big", node="full", cpu="1"),
        pod("done", node="roomy", cpu="2", phase="Succeeded"),  # terminal pods hold nothing
    )
    assert decision.chosen == "roomy"
    reason = _reason(decision, "full")
    assert reason.kind is Kind.EXHAUSTED
    assert reason.message == "insufficient cpu"
    # Quantities as kubectl writes them: the reason is read by people.
    assert reason.values == {"requested": "1500m", "free": "1"}
    assert str(reason) == "kube/resources: insufficient cpu (requested=1500m, free=1)"


def test_extended_resources_are_counted_like_cpu_and_memory(place):
    decision = place(
        pod(
            "p",
            spec={
                "containers": [
                    {
                        "name": "c",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        ),
        node("plain"),
        node("gpu", extra={"nvidia.com/gpu": "2"}),
    )
    assert decision.chosen == "gpu"
    assert _reason(decision, "plain").message == "insufficient nvidia.com/gpu"


def test_the_pod_count_is_bounded_by_allocatable_pods(place):
    decision = place(pod("p"), node("tiny", pods="1"), pod("x", node="tiny"))
    assert decision.error.code == 409
    assert "kube/resources: too many pods" in decision.error.message


def test_init_containers_count_by_their_largest_and_overhead_adds(place):
    spec = {
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
        ],
        "overhead": {"cpu": "500m"},
    }
    decision = place(pod("p", spec=spec), node("n3", cpu="3"), node("n4", cpu="4"))
    assert decision.chosen == "n4"  # max(1+1, 3) + 0.5 = 3.5 cores
    assert _reason(decision, "n3").values == {"requested": "3500m", "free": "3"}


def test_kube_steps_run_only_on_the_offline_path():
    offline = [s.name for s in flatten(default_chain(kube_filters=True))]
    live = [s.name for s in flatten(default_chain(kube_filters=False))]
    # kube-scheduler's filters in the order of its default profile, then its scores among berth's
    # preferences; live, kube-scheduler has run the filters before it asks berth.
    assert [n for n in offline if n.startswith("kube/")] == [
        "kube/node-ready",
        "kube/node-unschedulable",
        "kube/node-name",
        "kube/taints",
        "kube/node-affinity",
        "kube/node-ports",
        "kube/resources",
        "kube/topology-spread",
        "kube/inter-pod-affinity",
        "kube/preferences",
        "kube/default-score",
    ]
    assert [n for n in live if n.startswith("kube/")] == ["kube/preferences", "kube/default-score"]


@pytest.mark.parametrize(
    ("text", "name", "units"),
    [
        ("500m", "cpu", 500),
        ("2", "cpu", 2000),
        ("0.1", "cpu", 100),
        ("1Gi", "memory", 2**30),
        ("1G", "memory", 10**9),
        ("1e3", "memory", 1000),
        ("128974848", "memory", 128974848),
        ("1.5Ki", "memory", 1536),
        ("100u", "cpu", 1),  # rounded up, as kube-scheduler does
    ],
)
def test_quantities_are_read_exactly(text, name, units):
    assert resource_units(name, text) == units


@pytest.mark.parametrize("text", ["", "1.2.3", "10 Gi", "Gi", "1Zi", "abc"])
def test_a_bad_quantity_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)
