"""The worked examples of the tag affinity seed, run through `berth simulate` as a user would."""

from __future__ import annotations

from tests.builders import node, pod


def test_three_web_and_one_batch_scores_plus_two_and_beats_one_web_at_plus_one(simulate):
    # "a hypervisor hosting three web instances and one batch scores +2, and beats a hypervisor
    # hosting one web and no batch at +1 -- even though the first one has the tag you asked to avoid."
    cluster = [
        node("busy"),
        node("quiet"),
        *(pod(f"web-{i}", node="busy", tags=["web"]) for i in range(3)),
        pod("batch-0", node="busy", tags=["batch"]),
        pod("web-9", node="quiet", tags=["web"]),
    ]
    new = pod("new", affinity={"prefer_with_tag": ["web"], "prefer_without_tag": ["batch"]})
    for seed in range(5):
        code, out = simulate(new, *cluster, seed=seed)
        assert code == 0
        assert out["chosen"] == "busy"
        scores = {n["name"]: n["scoreParts"]["tags/tag-affinity"] for n in out["nodes"]}
        assert scores == {"busy": 2, "quiet": 1}


def test_weights_100_and_1_map_to_one_prefer_list_so_a_node_with_only_b_ties_with_one_with_only_a(simulate):
    cluster = [
        node("has-a"),
        node("has-b"),
        node("empty"),
        pod("pa", node="has-a", tags=["a"]),
        pod("pb", node="has-b", tags=["b"]),
    ]
    new = pod("new", affinity={"a": 100, "b": 1})
    chosen = set()
    for seed in range(20):
        code, out = simulate(new, *cluster, seed=seed)
        assert code == 0
        by_name = {n["name"]: n for n in out["nodes"]}
        affinity = {
            name: n["scoreParts"]["tags/tag-affinity"] for name, n in by_name.items() if n["feasible"]
        }
        assert affinity["has-a"] == affinity["has-b"] == 1
        assert by_name["has-a"]["candidate"] and by_name["has-b"]["candidate"]
        assert not by_name["empty"]["candidate"]
        chosen.add(out["chosen"])
        assert any(e["reason"] == "DeprecatedAffinity" for e in out["events"])
    # A tie, broken by the seed: both nodes get chosen for some seed.
    assert chosen == {"has-a", "has-b"}


def test_first_member_of_a_require_with_tag_group_gets_409_even_when_it_carries_the_tag(simulate):
    cluster = [node("n1"), node("n2"), pod("other", namespace="elsewhere", node="n1", tags=["web"])]
    first = pod("web-0", tags=["web"], affinity={"require_with_tag": ["web"]})
    code, out = simulate(first, *cluster)
    assert code == 1
    assert out["chosen"] is None
    assert out["error"]["code"] == 409
    assert 'require_with_tag=["web"]' in out["error"]["message"]
    assert "cluster full" not in out["error"]["message"]
    assert all(not n["feasible"] for n in out["nodes"])


def test_seeding_the_group_first_lets_the_rest_join_it(simulate):
    # "Seed the group first: create one instance carrying the tag and without the require_with_tag
    # constraint, then create the rest with it."
    cluster = [node("n1"), node("n2"), node("n3")]
    seed_pod = pod("web-0", tags=["web"])
    rest = [pod(f"web-{i}", tags=["web"], affinity={"require_with_tag": ["web"]}) for i in (1, 2)]
    code, out = simulate([seed_pod, *rest], *cluster, seed=3)
    assert code == 0
    decisions = out["decisions"]
    first_node = decisions[0]["chosen"]
    assert [d["chosen"] for d in decisions[1:]] == [first_node, first_node]
