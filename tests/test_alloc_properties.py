"""Properties of the allocator's steps over random clusters, pods and chains."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.engine import Phase
from tests.alloc_helpers import chain, cn, feasible, vm
from tests.builders import place

HARD_FILTERS = [
    "hard-filter-setup",
    "hard-filter-running",
    "hard-filter-reserved",
    "hard-filter-headnode",
    "hard-filter-invalid-servers",
    "hard-filter-virtual-servers",
    "hard-filter-traits",
    "hard-filter-platform-versions",
    "hard-filter-vlans",
    "hard-filter-vm-count",
    "hard-filter-min-ram",
    "hard-filter-min-cpu",
    "hard-filter-min-disk",
    "hard-filter-capness",
    "hard-filter-large-servers",
    "hard-filter-locality-hints",
]
SCORERS = {
    "score-unreserved-ram": "weight_unreserved_ram",
    "score-unreserved-disk": "weight_unreserved_disk",
    "score-num-owner-zones": "weight_num_owner_zones",
    "score-current-platform": "weight_current_platform",
}
TRAITS = st.fixed_dictionaries({}, optional={"ssd": st.booleans(), "rack": st.sampled_from(["r1", "r2"])})


@st.composite
def clusters(draw):
    n = draw(st.integers(min_value=1, max_value=9))
    objects = []
    for i in range(n):
        labels = {}
        if draw(st.booleans()):
            labels["berth.dev/reserved"] = "true"
        if draw(st.integers(0, 4)) == 0:
            labels["node-role.kubernetes.io/control-plane"] = ""
        objects.append(
            cn(
                f"n{i}",
                memory=f"{draw(st.integers(1, 64))}Gi",
                cpu=str(draw(st.integers(1, 16))),
                disk=f"{draw(st.integers(1, 200))}Gi",
                traits=draw(st.one_of(st.none(), TRAITS)),
                ready=draw(st.integers(0, 5)) > 0,
                labels=labels,
                kubelet=f"v1.{draw(st.integers(30, 36))}.{draw(st.integers(0, 9))}",
                nic_tags=draw(st.one_of(st.none(), st.just(["external"]))),
            )
        )
    for j in range(draw(st.integers(0, 14))):
        objects.append(
            vm(
                f"p{j}",
                namespace=draw(st.sampled_from(["default", "other"])),
                node=f"n{draw(st.integers(0, n - 1))}",
                memory=draw(st.sampled_from([None, "512Mi", "4Gi", "16Gi"])),
                cpu=draw(st.sampled_from([None, "250m", "2"])),
            )
        )
    return objects


@st.composite
def pods(draw):
    annotations = {}
    traits = draw(st.one_of(st.none(), TRAITS.filter(bool)))
    if traits:
        annotations["berth.dev/traits"] = traits
    if draw(st.booleans()):
        annotations["berth.dev/locality"] = {
            "near": draw(st.lists(st.sampled_from(["p0", "p1", "p2"]), max_size=2, unique=True)),
            "far": draw(st.lists(st.sampled_from(["p3", "p4"]), max_size=2, unique=True)),
            "strict": draw(st.booleans()),
        }
    if draw(st.booleans()):
        annotations["berth.dev/image"] = {"requirements": {"min_platform": {"1.33": "1.33.5"}}}
    if draw(st.booleans()):
        annotations["berth.dev/nic-tags"] = ["external"]
    return vm(
        "new",
        memory=draw(st.sampled_from([None, "1Gi", "8Gi", "48Gi"])),
        cpu=draw(st.sampled_from([None, "500m", "4"])),
        disk=draw(st.sampled_from([None, "10Gi"])),
        annotations=annotations,
    )


@settings(max_examples=150, deadline=None)
@given(
    clusters(),
    pods(),
    st.lists(st.sampled_from(HARD_FILTERS), min_size=1, max_size=6),
    st.sampled_from(HARD_FILTERS),
)
def test_hard_filters_never_add_nodes(cluster, new, names, extra):
    base = place(new, *cluster, cfg=chain("calculate-locality-hints", *names), kube_filters=False)
    more = place(new, *cluster, cfg=chain("calculate-locality-hints", *names, extra), kube_filters=False)
    assert feasible(more) <= feasible(base)
    known = {n.name for n in more.nodes}
    previous = known
    for trace in more.steps:
        assert set(trace.remaining) <= previous
        if trace.phase == Phase.HARD:
            previous = set(trace.remaining)


@settings(max_examples=150, deadline=None)
@given(clusters(), pods(), st.sampled_from(sorted(SCORERS)), st.floats(min_value=0.1, max_value=10))
def test_a_negated_weight_reverses_the_order_without_lowering_any_score(cluster, new, scorer, weight):
    key = SCORERS[scorer]
    up = place(new, *cluster, cfg=chain(scorer, defaults={key: weight}), kube_filters=False)
    down = place(new, *cluster, cfg=chain(scorer, defaults={key: -weight}), kube_filters=False)
    step = f"alloc/{scorer}"
    plus = {n.name: n.parts[step].weighted for n in up.nodes if step in n.parts}
    minus = {n.name: n.parts[step].weighted for n in down.nodes if step in n.parts}
    assert plus.keys() == minus.keys()
    assert all(v >= 0 for v in (*plus.values(), *minus.values()))
    for a in plus:
        for b in plus:
            if plus[a] > plus[b] + 1e-9:
                assert minus[a] < minus[b] - 1e-9


@settings(max_examples=150, deadline=None)
@given(clusters(), pods())
def test_soft_filters_never_empty_the_set(cluster, new):
    cfg = chain(
        "calculate-locality-hints",
        ["or", "hard-filter-reservoir", "identity"],
        ["or", "hard-filter-large-servers", "identity"],
        "soft-filter-locality-hints",
    )
    decision = place(new, *cluster, cfg=cfg, kube_filters=False)
    if decision.error is None or decision.error.code != 400:
        assert decision.chosen is not None
        assert all(n.feasible for n in decision.nodes)
