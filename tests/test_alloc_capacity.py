"""Capacity under overprovision ratios, and its guards: one test per algorithm of the seed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.cluster.convert import pod_from_k8s
from berth.configure import default_pipeline
from berth.engine import Kind, decide
from tests.alloc_helpers import candidates, chain, cn, feasible, reason_texts, trace, vm
from tests.builders import node, place, pod, view

# override-overprovisioning off: nodes promise under their annotation (else the defaults), pods ask for
# their package's ratios.
OWN_RATIOS = {"disable_override_overprovisioning": True}


def test_min_ram_divides_the_pods_ram_by_the_packages_ratio_as_in_the_seeds_example():
    # vm.ram 768 with a package ratio of 1.5 needs 512: nodes with 256 and 511 MiB spare are removed.
    cfg = chain(
        "override-overprovisioning",
        "hard-filter-min-ram",
        defaults=OWN_RATIOS,
        packages={"p": {"overprovision_memory": 1.5}},
    )
    nodes = [cn(f"n{mib}", memory=f"{mib}Mi") for mib in (256, 511, 512, 768)]
    decision = place(vm("new", memory="768Mi", annotations={"berth.dev/package": "p"}), *nodes, cfg=cfg)
    assert feasible(decision) == {"n512", "n768"}
    assert reason_texts(decision)["n511"] == (
        "alloc/hard-filter-min-ram: not enough unreserved RAM for the pod's 768 MiB RAM (memory limit, "
        "overprovision ratio 1.5) (unreserved=511, needed=512)"
    )
    assert decision.node("n256").reasons[0].kind is Kind.EXHAUSTED


def test_min_ram_counts_the_limits_of_the_pods_on_the_node_over_the_nodes_ratio():
    # 1 GiB allocatable at ratio 2 promises 2 GiB: after 1.5 GiB of limits, 512 MiB more can be promised
    # (unreserved 1024 - 1536 / 2 = 256; a 512 MiB pod needs 512 / 2 = 256).
    cfg = chain("hard-filter-min-ram", defaults={"overprovision_ratio_ram": 2.0})
    cluster = [cn("n1", memory="1Gi"), vm("old", node="n1", memory="1536Mi")]
    assert place(vm("new", memory="512Mi"), *cluster, cfg=cfg).chosen == "n1"
    assert place(vm("new", memory="513Mi"), *cluster, cfg=cfg).chosen is None


def test_min_ram_uses_the_packages_ram_when_the_pod_sets_no_memory():
    cfg = chain("hard-filter-min-ram", packages={"big": {"max_physical_memory": 4096}})
    decision = place(vm("new", annotations={"berth.dev/package": "big"}), cn("small", memory="2Gi"), cfg=cfg)
    assert reason_texts(decision)["small"].startswith(
        "alloc/hard-filter-min-ram: not enough unreserved RAM for the pod's 4096 MiB RAM (package big, "
        "overprovision ratio 1)"
    )


def test_min_ram_skips_a_pod_without_ram_and_when_filter_min_resources_is_false():
    cfg = chain("hard-filter-min-ram")
    decision = place(vm("new"), cn("n1", memory="1Mi"), cfg=cfg)
    assert trace(decision, "alloc/hard-filter-min-ram").note == (
        "skipped: the pod has no memory limit or request and no package RAM"
    )
    off = chain("hard-filter-min-ram", defaults={"filter_min_resources": False})
    assert place(vm("new", memory="1Gi"), cn("n1", memory="1Mi"), cfg=off).chosen == "n1"


def test_min_cpu_divides_the_cpu_cap_by_the_ratio_as_in_the_seeds_example():
    # cpu_cap 900 (9 CPUs) with a ratio of 1.5 needs 600 (6 CPUs).
    cfg = chain("hard-filter-min-cpu", defaults=OWN_RATIOS, packages={"p": {"overprovision_cpu": 1.5}})
    new = vm("new", cpu="9", annotations={"berth.dev/package": "p"})
    decision = place(new, cn("short", cpu="5999m"), cn("enough", cpu="6"), cfg=cfg)
    assert feasible(decision) == {"enough"}
    assert reason_texts(decision)["short"] == (
        "alloc/hard-filter-min-cpu: not enough unreserved CPU for the pod's 900 cpu_cap (cpu limit, "
        "overprovision ratio 1.5) (unreserved=599.9, needed=600)"
    )


def test_min_cpu_overprovisions_by_the_default_ratio_of_four():
    # One CPU at ratio 4 promises four: 3 CPUs of limits leave 25 cpu_cap units, a 1-CPU pod needs 25.
    cluster = [cn("n1", cpu="1"), vm("old", node="n1", cpu="3")]
    assert place(
        vm("new", cpu="1"), *cluster, cfg=chain("override-overprovisioning", "hard-filter-min-cpu")
    ).chosen
    assert not place(
        vm("new", cpu="1001m"), *cluster, cfg=chain("override-overprovisioning", "hard-filter-min-cpu")
    ).chosen


def test_a_pod_without_a_cpu_cap_takes_no_cpu_and_is_not_checked():
    cluster = [cn("n1", cpu="1"), vm("besteffort", node="n1"), vm("capped", node="n1", cpu="3")]
    decision = place(vm("new"), *cluster, cfg=chain("hard-filter-min-cpu"))
    assert decision.chosen == "n1"
    assert trace(decision, "alloc/hard-filter-min-cpu").note.startswith("skipped: the pod has no CPU cap")
    # The uncapped neighbour takes none of the node's CPU either.
    assert place(vm("new", cpu="1"), *cluster, cfg=chain("hard-filter-min-cpu")).chosen == "n1"


def test_min_disk_counts_ephemeral_storage_rounded_up_after_the_ratio():
    cfg = chain("hard-filter-min-disk", defaults=OWN_RATIOS, packages={"p": {"overprovision_storage": 1.5}})
    new = vm("new", disk="1499Mi", annotations={"berth.dev/package": "p"})  # ceil(1499 / 1.5) = 1000
    decision = place(new, cn("short", disk="999Mi"), cn("enough", disk="1000Mi"), cfg=cfg)
    assert feasible(decision) == {"enough"}
    short = reason_texts(decision)["short"]
    assert short.startswith("alloc/hard-filter-min-disk: not enough unreserved disk")


def test_min_disk_uses_the_package_quota_and_skips_without_one():
    cfg = chain("hard-filter-min-disk", packages={"p": {"quota": 2048}})
    decision = place(vm("new", annotations={"berth.dev/package": "p"}), cn("n1", disk="1Gi"), cfg=cfg)
    assert decision.chosen is None
    skipped = place(vm("new"), cn("n1"), cfg=chain("hard-filter-min-disk"))
    assert trace(skipped, "alloc/hard-filter-min-disk").note == (
        "skipped: the pod has no ephemeral-storage limit or request and no package quota"
    )


def test_the_nodes_own_ratios_apply_only_with_override_overprovisioning_off():
    # 2 GiB allocatable, 3 GiB of limits: full at ratio 1, 1 GiB unreserved at ratio 2.
    ratios = {"berth.dev/overprovision-ratios": '{"ram": 2}'}
    cluster = [cn("n1", memory="2Gi", annotations=ratios), vm("old", node="n1", memory="3Gi")]
    with_override = chain("override-overprovisioning", "hard-filter-min-ram")
    assert place(vm("new", memory="1Gi"), *cluster, cfg=with_override).chosen is None
    own = chain("override-overprovisioning", "hard-filter-min-ram", defaults=OWN_RATIOS)
    assert place(vm("new", memory="1Gi"), *cluster, cfg=own).chosen == "n1"


def test_override_overprovisioning_is_a_traced_step_that_keeps_every_node_and_says_why():
    decision = place(vm("new"), cn("n1"), cn("n2"), cfg=chain("override-overprovisioning"))
    step = trace(decision, "alloc/override-overprovisioning")
    assert step.remaining == ("n1", "n2")
    assert step.note == (
        "skipped: computes only, every node kept: every node and pod use the ratios cpu 4, ram 1, disk 1"
    )


def test_min_free_disk_keeps_nodes_with_the_minimum_of_free_ephemeral_storage():
    cfg = chain("hard-filter-min-free-disk", defaults={"minimum_free_disk": 1024})
    decision = place(vm("new"), cn("full", disk="1023Mi"), cn("roomy", disk="2Gi"), cfg=cfg)
    assert reason_texts(decision) == {
        "full": "alloc/hard-filter-min-free-disk: node has less free disk than minimum_free_disk=1024 MiB "
        "(free=1023)"
    }
    unset = place(vm("new"), cn("full", disk="1Mi"), cfg=chain("hard-filter-min-free-disk"))
    assert trace(unset, "alloc/hard-filter-min-free-disk").note == "skipped: no minimum_free_disk set"


def test_vm_count_removes_a_node_hosting_filter_vm_limit_pods_not_counting_the_pod_itself():
    cfg = chain("hard-filter-vm-count", defaults={"filter_vm_limit": 2})
    cluster = [
        cn("busy"),
        cn("quiet"),
        vm("a", node="busy"),
        vm("b", node="busy"),
        vm("c", node="quiet"),
    ]
    decision = place(vm("new"), *cluster, cfg=cfg)
    assert reason_texts(decision) == {
        "busy": "alloc/hard-filter-vm-count: node hosts the maximum of 2 pods (filter_vm_limit) (pods=2)"
    }
    # A pod already placed on "quiet" asking again is not its own neighbour.
    again = place(vm("c", node="quiet"), *cluster, cfg=cfg)
    assert "quiet" in feasible(again)


def test_vm_count_defaults_to_224():
    cluster = [cn("n1"), *(vm(f"p{i}", node="n1") for i in range(224))]
    # The extender's chain: offline, kube/resources would stop at the node's 110 allocatable pods.
    decision = place(vm("new"), *cluster, cfg=chain("hard-filter-vm-count"), kube_filters=False)
    assert decision.chosen is None
    assert (
        place(vm("new"), *cluster[:-1], cfg=chain("hard-filter-vm-count"), kube_filters=False).chosen == "n1"
    )


@pytest.mark.parametrize(
    ("count", "dropped"),
    [
        pytest.param(6, 0, id="six nodes keep all"),
        pytest.param(7, 1, id="seven nodes drop one"),
        pytest.param(13, 1, id="thirteen nodes drop one"),
        pytest.param(14, 2, id="fourteen nodes drop two"),
        pytest.param(20, 3, id="twenty nodes drop three"),
    ],
)
def test_large_servers_removes_the_top_15_percent_by_unreserved_ram(count, dropped):
    nodes = [cn(f"n{i:02}", memory=f"{i + 1}Gi") for i in range(count)]
    decision = place(vm("new"), *nodes, cfg=chain("hard-filter-large-servers"))
    removed = set(trace(decision, "alloc/hard-filter-large-servers").removed)
    assert removed == {f"n{i:02}" for i in range(count - dropped, count)}


def test_large_servers_in_an_or_with_identity_only_sets_the_largest_aside():
    nodes = [cn(f"n{i}", memory=f"{i + 1}Gi") for i in range(7)]
    decision = place(vm("new"), *nodes, cfg=chain(["or", "hard-filter-large-servers", "identity"]))
    largest = decision.node("n6")
    assert largest.feasible and not largest.candidate
    assert str(largest.reasons[0]) == (
        "set aside: alloc/hard-filter-large-servers: kept in reserve: among the 1 of 7 nodes (15%) with the "
        "most unreserved RAM (an `or` kept other nodes) (unreserved_ram=7168)"
    )
    off = place(
        vm("new"), *nodes, cfg=chain("hard-filter-large-servers", defaults={"filter_large_servers": False})
    )
    assert len(candidates(off)) == 7


def test_overprovision_ratios_removes_nodes_whose_ratio_differs_from_the_packages():
    cfg = chain(
        "override-overprovisioning",
        "hard-filter-overprovision-ratios",
        defaults=OWN_RATIOS,
        packages={"p": {"overprovision_cpu": 2.0, "overprovision_memory": 1.0}},
    )
    cluster = [
        cn("same", annotations={"berth.dev/overprovision-ratios": '{"cpu": 2.001}'}),
        cn("default"),  # the defaults' cpu ratio, 4
    ]
    decision = place(vm("new", annotations={"berth.dev/package": "p"}), *cluster, cfg=cfg)
    assert feasible(decision) == {"same"}
    assert reason_texts(decision)["default"] == (
        "alloc/hard-filter-overprovision-ratios: package p asks overprovision ratio cpu 2.00 "
        "(node_ratio=4.00)"
    )


def test_overprovision_ratios_is_skipped_under_override_and_without_a_package():
    forced = place(
        vm("new"), cn("n1"), cfg=chain("override-overprovisioning", "hard-filter-overprovision-ratios")
    )
    assert trace(forced, "alloc/hard-filter-overprovision-ratios").note.startswith(
        "skipped: override-overprovisioning is in force"
    )
    own = place(vm("new"), cn("n1"), cfg=chain("hard-filter-overprovision-ratios", defaults=OWN_RATIOS))
    assert trace(own, "alloc/hard-filter-overprovision-ratios").note == "skipped: the pod names no package"


def test_capness_keeps_pods_with_and_without_a_cpu_cap_apart():
    cluster = [
        cn("capped"),
        cn("uncapped"),
        cn("empty"),
        vm("a", node="capped", cpu="1"),
        vm("b", node="uncapped"),
    ]
    cfg = chain("hard-filter-capness")
    with_cap = place(vm("new", cpu="500m"), *cluster, cfg=cfg)
    assert feasible(with_cap) == {"capped", "empty"}
    assert reason_texts(with_cap)["uncapped"] == (
        "alloc/hard-filter-capness: the pod has a CPU cap and the node hosts pods without one "
        "(uncapped_pods=1)"
    )
    without_cap = place(vm("new"), *cluster, cfg=cfg)
    assert feasible(without_cap) == {"uncapped", "empty"}
    off = place(vm("new"), *cluster, cfg=chain("hard-filter-capness", defaults={"filter_capness": False}))
    assert feasible(off) == {"capped", "uncapped", "empty"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 19), st.sampled_from(["1Gi", "2Gi", "4Gi"]), st.booleans()), max_size=30
    )
)
def test_the_reserve_kept_pod_after_pod_is_the_reserve_of_a_fresh_view(landings):
    """Pods land between decisions over the same 20 nodes (the RAM left moves, ties come and go),
    with require_without_tag taking different nodes out each time: the nodes kept in reserve, and
    the RAM each reason gives, are those a fresh view of the same cluster gives."""
    names = [f"n{i:02d}" for i in range(20)]
    placed: list[tuple[str, str, str]] = []  # pod, node, memory
    live = view(*(node(n, memory="16Gi") for n in names))
    pipeline = default_pipeline()

    def reserve(v, i: int) -> list[tuple[str, str, dict]]:
        group = f"g{i % 3}"
        web = pod_from_k8s(
            pod(f"w-{i}", uid=f"u-w-{i}", memory="1Gi", affinity={"require_without_tag": [group]})
        )
        decision = decide(web, v, pipeline, candidates=names, seed=i)
        return sorted(
            (n, r.message, r.values)
            for n, r in decision.failures().items()
            if r.step == "alloc/hard-filter-large-servers"
        )

    for i, (where, memory, decide_now) in enumerate(landings):
        name = f"p-{i}"
        live.add_pod(
            pod_from_k8s(pod(name, node=names[where], memory=memory, tags=[f"g{i % 3}"], uid=f"u-{name}"))
        )
        placed.append((name, names[where], memory))
        if decide_now or i == len(landings) - 1:
            fresh = view(
                *(node(n, memory="16Gi") for n in names),
                *(
                    pod(p, node=n, memory=m, tags=[f"g{j % 3}"], uid=f"u-{p}")
                    for j, (p, n, m) in enumerate(placed)
                ),
            )
            assert reserve(live, i) == reserve(fresh, i)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 19), st.sampled_from(["1Gi", "2Gi", "4Gi"])), max_size=20),
    st.integers(0, 19),
    st.sampled_from(["1Gi", "8Gi"]),
)
def test_a_pod_on_its_own_node_is_not_counted_against_that_node_in_the_reserve(landed, home, memory):
    """Deciding again for a pod already on a node (bind's check, a simulation of a running pod), the
    reserve is the one of the cluster without that pod: its node counts the RAM the pod would free."""
    names = [f"n{i:02d}" for i in range(20)]
    others = [pod(f"p-{i}", node=names[n], memory=m, uid=f"u-{i}") for i, (n, m) in enumerate(landed)]
    me = pod("me", node=names[home], memory=memory, uid="u-me")
    pipeline = default_pipeline()

    def reserve(*pods) -> list[tuple[str, str, dict]]:
        v = view(*(node(n, memory="16Gi") for n in names), *pods)
        decision = decide(pod_from_k8s(me), v, pipeline, candidates=names, seed=1)
        failures = decision.failures().items()
        return sorted(
            (n, r.message, r.values) for n, r in failures if r.step == "alloc/hard-filter-large-servers"
        )

    assert reserve(*others, me) == reserve(*others)
