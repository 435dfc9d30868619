"""Tag affinity as the seed states it, asserted on whole Decisions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.cluster.convert import pod_from_k8s
from berth.configure import default_pipeline
from berth.engine import Kind, Reason, decide
from tests.builders import churn, node, pod, view


def _by_name(decision):
    return {n.name: n for n in decision.nodes}


def test_node_without_a_pod_carrying_the_required_tag_is_removed_naming_the_tag(place):
    decision = place(
        pod("p", affinity={"require_with_tag": ["db"]}),
        node("with-db"),
        node("without"),
        pod("db-0", node="with-db", tags=["db"]),
        pod("web-0", node="without", tags=["web"]),
    )
    assert decision.chosen == "with-db"
    assert _by_name(decision)["without"].reasons == (
        Reason(
            "tags/require_with_tag",
            Kind.UNMET,
            'pods of namespace default on the node do not carry every required tag ["db"]',
            {"missing": ["db"]},
        ),
    )


def test_require_with_tag_needs_every_listed_tag_on_the_node(place):
    decision = place(
        pod("p", affinity={"require_with_tag": ["db", "cache"]}),
        node("both"),
        node("only-db"),
        pod("db-0", node="both", tags=["db"]),
        pod("cache-0", node="both", tags=["cache"]),
        pod("db-1", node="only-db", tags=["db"]),
    )
    assert decision.chosen == "both"
    assert _by_name(decision)["only-db"].reasons[0].values == {"missing": ["cache"]}


def test_node_with_a_pod_carrying_an_excluded_tag_is_removed_as_exhausted(place):
    decision = place(
        pod("p", affinity={"require_without_tag": ["batch"]}),
        node("busy"),
        node("free"),
        pod("batch-0", node="busy", tags=["batch", "x"]),
    )
    assert decision.chosen == "free"
    reason = _by_name(decision)["busy"].reasons[0]
    assert reason.step == "tags/require_without_tag"
    assert reason.kind is Kind.EXHAUSTED  # evicting the neighbour would free the node
    assert reason.values == {"found": {"batch": 1}}


def test_pods_of_other_namespaces_are_invisible_to_every_form(place):
    # require_without_tag is not an isolation primitive: another tenant's batch pod does not count.
    cluster = [node("n1"), node("n2"), pod("batch", namespace="other", node="n1", tags=["batch", "web"])]
    avoid = place(pod("p", namespace="mine", affinity={"require_without_tag": ["batch"]}), *cluster)
    assert all(n.feasible for n in avoid.nodes)
    need = place(pod("p", namespace="mine", affinity={"require_with_tag": ["web"]}), *cluster)
    assert need.error is not None and need.error.code == 409
    prefer = place(pod("p", namespace="mine", affinity={"prefer_with_tag": ["web"]}), *cluster)
    assert {n.name: n.parts["tags/tag-affinity"].raw for n in prefer.nodes} == {"n1": 0, "n2": 0}


def test_the_pod_being_placed_is_never_its_own_neighbour(place):
    # The pod already sits on n1 (a reschedule): its own tag must not satisfy its own require_with_tag.
    me = pod("me", node="n1", tags=["web"], affinity={"require_with_tag": ["web"]}, uid="u-1")
    decision = place(me, node("n1"), node("n2"), me)
    assert decision.error is not None and decision.error.code == 409
    assert 'require_with_tag=["web"]' in decision.error.message


def test_prefer_terms_are_summed_per_neighbour_and_per_tag(place):
    decision = place(
        pod("p", affinity={"prefer_with_tag": ["a", "b"], "prefer_without_tag": ["c"]}),
        node("n1"),
        node("n2"),
        pod("x", node="n1", tags=["a", "b"]),  # +2
        pod("y", node="n1", tags=["a", "c"]),  # +1 -1
        pod("z", node="n2", tags=["b"]),  # +1
    )
    assert {n.name: n.parts["tags/tag-affinity"].raw for n in decision.nodes} == {"n1": 2, "n2": 1}
    assert decision.chosen == "n1"


def test_only_the_highest_affinity_tier_goes_on_and_the_rest_is_set_aside_but_feasible(place):
    decision = place(
        pod("p", affinity={"prefer_with_tag": ["cache"]}),
        node("n1"),
        node("n2"),
        node("n3"),
        pod("c1", node="n1", tags=["cache"]),
        pod("c2", node="n2", tags=["cache"]),
    )
    nodes = _by_name(decision)
    assert {n for n, r in nodes.items() if r.candidate} == {"n1", "n2"}
    assert nodes["n3"].feasible and not nodes["n3"].candidate
    assert nodes["n3"].reasons[0].kind is Kind.SET_ASIDE
    assert str(nodes["n3"].reasons[0]).startswith("set aside: tags/tag-affinity")


def test_a_preference_never_makes_a_placeable_pod_unplaceable(place):
    decision = place(
        pod("p", affinity={"prefer_without_tag": ["web"]}), node("n1"), pod("w", node="n1", tags=["web"])
    )
    assert decision.chosen == "n1"


def test_the_tag_affinity_part_is_present_for_every_feasible_node_even_without_preferences(place):
    decision = place(pod("p"), node("n1"), node("n2"), node("down", ready=False))
    for result in decision.nodes:
        if result.feasible:
            assert "tags/tag-affinity" in result.parts
        else:
            assert result.score is None


def test_no_fit_without_a_tag_constraint_reports_the_reasons_not_a_constraint(place):
    decision = place(pod("p", cpu="8"), node("n1", cpu="4"), node("n2", ready=False))
    assert decision.error.code == 409
    assert decision.error.message == (
        "0/2 nodes are available: 1 kube/node-ready: node is not Ready, 1 kube/resources: insufficient cpu."
    )


def test_a_409_names_the_constraint_when_it_removed_a_node_even_if_others_failed_for_capacity(place):
    decision = place(
        pod("p", cpu="1", affinity={"require_without_tag": ["batch"]}),
        node("small", cpu="500m"),
        node("busy"),
        pod("b", node="busy", tags=["batch"]),
    )
    assert decision.error.code == 409
    assert decision.error.message.startswith(
        'no node satisfies the affinity constraint require_without_tag=["batch"]'
    )
    assert "1 kube/resources: insufficient cpu" in decision.error.message
    assert decision.events[-1].reason == "FailedPlacement"


def test_one_feasible_node_means_had_no_choice_and_preferences_were_not_consulted(place):
    decision = place(
        pod("p", affinity={"prefer_without_tag": ["web"]}),
        node("only"),
        node("down", ready=False),
        pod("w", node="only", tags=["web"]),
    )
    assert decision.chosen == "only"
    assert decision.had_no_choice
    assert [e.reason for e in decision.events] == ["HadNoChoice"]
    assert "without consulting preferences" in decision.events[0].message


def test_a_real_choice_records_the_highest_affinity_and_final_candidates(place):
    decision = place(
        pod("p", affinity={"prefer_with_tag": ["cache"]}),
        node("n1"),
        node("n2"),
        pod("c", node="n2", tags=["cache"]),
    )
    assert not decision.had_no_choice
    reasons = [e.reason for e in decision.events]
    assert reasons == ["HighestAffinity", "FinalCandidates", "Placed"]
    assert "+1 on n2" in decision.events[0].message
    # The affinity's +1 on top of kube-scheduler's default score, by which n2 was the only finalist.
    kube = decision.node("n2").parts["kube/default-score"].weighted
    assert decision.events[2].message.startswith(f"placed on n2 with score {int(kube) + 1}")


def test_a_tie_is_broken_by_the_seed_and_the_same_seed_gives_the_same_node(place):
    cluster = [node(f"n{i}") for i in range(6)]
    chosen = {place(pod("p"), *cluster, seed=s).chosen for s in range(30)}
    assert len(chosen) > 1
    assert {place(pod("p"), *cluster, seed=7).chosen for _ in range(5)} == {
        place(pod("p"), *cluster, seed=7).chosen
    }


def test_a_burst_sees_each_pod_that_lands_with_an_excluded_tag():
    """The same nodes asked about pod after pod: a node that gets a pod carrying an excluded tag
    between two decisions is removed from the second, and free again once the pod leaves."""

    v = view(node("a"), node("b"), node("c"), pod("db-0", node="a", tags=["db"]))
    pipeline = default_pipeline()
    names = ["a", "b", "c"]

    def removed(i: int) -> set[str]:
        web = pod_from_k8s(pod(f"web-{i}", affinity={"require_without_tag": ["db"]}, uid=f"u-{i}"))
        decision = decide(web, v, pipeline, candidates=names, seed=i)
        return {n for n, r in decision.failures().items() if r.step == "tags/require_without_tag"}

    assert removed(0) == {"a"}
    v.add_pod(pod_from_k8s(pod("db-1", node="b", tags=["db"])))
    assert removed(1) == {"a", "b"}
    v.remove_pod("default/db-0")
    assert removed(2) == {"b"}
    v.add_pod(pod_from_k8s(pod("web-x", node="c", tags=["web"])))  # another tag changes nothing
    assert removed(3) == {"b"}
    v.remove_pod("default/db-1")  # no pod carries the tag: nothing is kept about it
    assert removed(4) == set() and v.tag_version("default", "db") == 0
    v.add_pod(pod_from_k8s(pod("db-2", node="c", tags=["db"])))
    assert removed(5) == {"c"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 11), st.integers(0, 3), st.booleans()), max_size=40))
def test_removals_mended_pod_after_pod_are_those_made_from_scratch(changes):
    """Pods carrying the excluded tag land and leave between decisions over the same nodes (in
    place, several on a node, some outside the nodes asked about): each decision's removals and
    their reasons are those of a fresh view of the same cluster."""
    names = [f"n{i}" for i in range(12)]
    asked = names[:10]  # n10 and n11 hold pods too but are not asked about
    live = view(*(node(n) for n in names))
    pipeline = default_pipeline()

    def removals(v) -> list[tuple[str, str, dict]]:
        web = pod_from_k8s(pod("web", affinity={"require_without_tag": ["db"]}, uid="u-web"))
        decision = decide(web, v, pipeline, candidates=asked, seed=1)
        failures = decision.failures()
        return [(n, r.message, r.values) for n, r in failures.items() if r.step == "tags/require_without_tag"]

    def db(i: int, which: int, where: str) -> dict:
        name = f"db-{which}-{i % 3}"
        return pod(name, node=where, tags=["db"], uid=f"u-{name}")

    for placed in churn(live, changes, names, db):
        fresh = view(*(node(n) for n in names), *placed)
        assert sorted(removals(live)) == sorted(removals(fresh))
