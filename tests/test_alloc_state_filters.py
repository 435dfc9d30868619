"""The allocator's filters on a node's state: one test per algorithm of the seed."""

from __future__ import annotations

import pytest

from berth.engine import Kind
from tests.alloc_helpers import candidates, chain, cn, config, feasible, reason_texts, trace, vm
from tests.builders import place


@pytest.mark.parametrize("algorithm", ["hard-filter-setup", "hard-filter-running"])
def test_a_node_that_is_not_ready_is_neither_set_up_nor_running(algorithm):
    # The extender's chain: offline, kube/node-ready would remove the node first.
    decision = place(vm("new"), cn("up"), cn("down", ready=False), cfg=chain(algorithm), kube_filters=False)
    assert decision.chosen == "up"
    reason = decision.node("down").reasons[0]
    assert reason.step == f"alloc/{algorithm}"
    assert reason.kind is Kind.UNMET


def test_a_reserved_node_is_removed_naming_the_label():
    decision = place(
        vm("new"),
        cn("free"),
        cn("held", labels={"berth.dev/reserved": "true"}),
        cfg=chain("hard-filter-reserved"),
    )
    assert reason_texts(decision) == {
        "held": "alloc/hard-filter-reserved: node is reserved by an operator (berth.dev/reserved=true)"
    }


def test_a_reserved_label_other_than_true_does_not_reserve_the_node():
    decision = place(
        vm("new"), cn("n1", labels={"berth.dev/reserved": "false"}), cfg=chain("hard-filter-reserved")
    )
    assert decision.chosen == "n1"


def test_a_head_node_is_removed_unless_filter_headnode_is_false():
    head = cn("head", labels={"node-role.kubernetes.io/control-plane": ""})
    decision = place(vm("new"), head, cn("worker"), cfg=chain("hard-filter-headnode"))
    assert reason_texts(decision) == {
        "head": "alloc/hard-filter-headnode: node is a head node "
        "(label node-role.kubernetes.io/control-plane)"
    }
    kept = place(
        vm("new"), head, cn("worker"), cfg=chain("hard-filter-headnode", defaults={"filter_headnode": False})
    )
    assert feasible(kept) == {"head", "worker"}
    assert (
        trace(kept, "alloc/hard-filter-headnode").note
        == "skipped: filter_headnode is false: head nodes are kept"
    )


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        pytest.param(cn("n", memory="0"), "no allocatable memory", id="no allocatable memory"),
        pytest.param(cn("n", cpu="0"), "no allocatable cpu", id="no allocatable cpu"),
        pytest.param(
            cn("n", traits="{ssd}"),
            "annotation berth.dev/traits: not valid JSON",
            id="malformed traits annotation",
        ),
        pytest.param(
            cn("n", annotations={"berth.dev/next-reboot": "tomorrow"}),
            'annotation berth.dev/next-reboot: "tomorrow" is not an RFC 3339 time',
            id="a next reboot that is not a time",
        ),
        pytest.param(
            cn("n", annotations={"berth.dev/overprovision-ratios": '{"gpu": 2}'}),
            'annotation berth.dev/overprovision-ratios: unknown ratio "gpu"',
            id="an unknown overprovision ratio",
        ),
        pytest.param(
            cn("n", labels={"berth.dev/platform": "latest"}),
            "label berth.dev/platform: 'latest' should be a platform stamp",
            id="a platform label that is no platform",
        ),
    ],
)
def test_an_invalid_node_is_removed_with_what_is_wrong_with_it(node, problem):
    decision = place(vm("new"), node, cn("ok"), cfg=chain("hard-filter-invalid-servers"))
    assert decision.chosen == "ok"
    assert reason_texts(decision)["n"].startswith(
        f"alloc/hard-filter-invalid-servers: node is not a valid allocation target: {problem}"
    )


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"type": "virtual-kubelet"}, id="virtual-kubelet's label"),
        pytest.param({"berth.dev/virtual": "true"}, id="berth's label"),
    ],
)
def test_a_virtual_node_is_removed_for_every_pod_since_every_pod_is_a_container(labels):
    decision = place(
        vm("new"), cn("virtual", labels=labels), cn("metal"), cfg=chain("hard-filter-virtual-servers")
    )
    assert reason_texts(decision) == {"virtual": "alloc/hard-filter-virtual-servers: node is a virtual node"}


def test_the_force_failure_label_removes_every_node_and_names_itself_in_the_409():
    forced = vm("new", labels={"berth.dev/force-designation-failure": "true"})
    decision = place(forced, cn("n1"), cn("n2"), cfg=chain("hard-filter-force-failure"))
    assert decision.error is not None and decision.error.code == 409
    assert decision.error.message.startswith(
        "no node satisfies the label berth.dev/force-designation-failure=true (a forced failure)"
    )
    assert place(vm("new"), cn("n1"), cfg=chain("hard-filter-force-failure")).chosen == "n1"


def test_reservoir_nodes_are_used_only_when_nothing_else_is_left():
    reservoir = {"berth.dev/reservoir": "true"}
    guard = chain(["or", "hard-filter-reservoir", "identity"])
    decision = place(vm("new"), cn("pool", labels=reservoir), cn("normal"), cfg=guard)
    assert candidates(decision) == {"normal"}
    # Set aside, not infeasible: the or kept other nodes.
    pool = decision.node("pool")
    assert pool.feasible and pool.reasons[0].kind is Kind.SET_ASIDE
    only_reservoir = place(vm("new"), cn("pool", labels=reservoir), cfg=guard)
    assert only_reservoir.chosen == "pool"
    assert [t.step for t in only_reservoir.steps][-2:] == ["alloc/hard-filter-reservoir", "alloc/identity"]


def test_the_default_chain_runs_the_state_filters_with_the_seeds_defaults():
    decision = place(
        vm("new"),
        cn("head", labels={"node-role.kubernetes.io/control-plane": ""}),
        cn("held", labels={"berth.dev/reserved": "true"}),
        cn("worker"),
        cfg=config(),
    )
    assert decision.chosen == "worker"
    assert {r.step for n in decision.nodes for r in n.reasons} == {
        "alloc/hard-filter-headnode",
        "alloc/hard-filter-reserved",
    }
