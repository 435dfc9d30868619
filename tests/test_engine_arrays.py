"""The engine's arrays and what it reuses between decisions give the decisions a cold engine gives.

A burst of decisions on one long-lived view (its columns, slots, candidate sets and the steps' reused
results all warm) is compared, decision by decision and byte for byte, with the same decisions made
on a view built afresh from the same objects. Between decisions the cluster also changes the ways a
live cluster does: a pod placed, a pod deleted from a reserved node, a node relabelled, added or
removed.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.generate import Size, generate
from bench.identity import decision_bytes
from bench.scenarios import CHAINS, scenarios
from berth.cluster.convert import node_from_k8s, pod_from_k8s
from berth.cluster.view import ClusterView
from berth.configure import build_pipeline
from berth.engine import decide
from berth.engine import draws as draws_module
from berth.engine import slots as slots_module
from berth.engine.draws import ARRAY_FROM, Seeded, random_draws
from berth.engine.ledger import ScoreColumn
from berth.engine.slots import Remaining, known, remaining, slots_of, without
from berth.vocab.alloc.config import parse_config

CLUSTER = generate(Size("arrays", 160, 1600), seed=3)
# The module, not the function berth.engine exports under the same name.
decide_module = importlib.import_module("berth.engine.decide")
SCENARIOS = {s.name: s for s in scenarios()}


def _pipeline(chain: str, *, kube_scoring: bool = True):
    """The chain by name; `kube_scoring=False`: the default one without kube-scheduler's scores, so
    that thousands of candidates reach the allocator's scorers."""
    description = CHAINS[chain]
    if description is None:
        return build_pipeline(parse_config({"defaults": {"kube_default_scoring": kube_scoring}}))
    return build_pipeline(parse_config({"allocationDescription": description}))


def _fresh(nodes: list[Any], pods: dict[str, Any]) -> ClusterView:
    return ClusterView(nodes, list(pods.values()))


@pytest.mark.parametrize(
    ("scenario", "chain"),
    [
        ("allocator", "default"),
        ("tag-affinity", "default"),
        ("tag-affinity", "tags"),
        ("policy-any", "policy"),
    ],
)
def test_a_burst_on_a_warm_view_decides_as_a_fresh_view_does(scenario, chain):
    items = CLUSTER["items"]
    nodes = [node_from_k8s(o) for o in items if o["kind"] == "Node"]
    pods = {p.key: p for p in (pod_from_k8s(o) for o in items if o["kind"] == "Pod")}
    policies = [o for o in items if o["kind"] == "PlacementPolicy"]
    warm = _fresh(nodes, pods)
    for policy in policies:
        warm.upsert_policy(policy)
    pipeline = _pipeline(chain)
    base = pod_from_k8s(SCENARIOS[scenario].pod)
    rng = random.Random(5)
    names = warm.node_names()
    for i in range(24):
        change = i % 6
        if change == 2:  # pods land on the roomiest node, which the large-server reserve held
            memory = {
                n: s.node.allocatable.get("memory", 0) - s.limited.get("memory", 0)
                for n, s in warm.states_by_name().items()
            }
            roomiest = max(memory, key=memory.get)
            for j, template in enumerate(list(pods.values())[:8]):
                landed = msgspec.structs.replace(
                    template, name=f"landed-{i}-{j}", uid=f"landed-{i}-{j}", node_name=roomiest
                )
                pods[landed.key] = landed
                warm.add_pod(landed)
        elif change == 3 and i > 6:  # and some of them leave again
            for key in [k for k in pods if k.split("/")[1].startswith(f"landed-{i - 1}-")][:4]:
                pods.pop(key)
                warm.remove_pod(key)
        elif change == 4:  # a node is relabelled
            name = rng.choice(names)
            state = warm.state(name)
            relabelled = msgspec.structs.replace(state.node, labels={**state.node.labels, "rack": f"r{i}"})
            nodes = [relabelled if n.name == name else n for n in nodes]
            warm.upsert_node(relabelled)
        elif change == 5 and i < 12:  # a node joins
            joined = msgspec.structs.replace(nodes[i], name=f"joined-{i}")
            nodes.append(joined)
            warm.upsert_node(joined)
        elif change == 5:  # a node leaves
            gone = nodes.pop(rng.randrange(len(nodes)))
            warm.remove_node(gone.name)
            for key in [k for k, p in pods.items() if p.node_name == gone.name]:
                pods.pop(key)
        cold = _fresh(nodes, pods)
        for policy in policies:
            cold.upsert_policy(policy)
        asked = [n.name for n in nodes]
        if i % 4 == 3:  # a subset, with a node the view does not know
            asked = [*rng.sample(asked, len(asked) // 2), "not-a-node"]
        new = msgspec.structs.replace(base, name=f"{base.name}-{i}", uid=f"{base.uid[:-6]}{i:06d}")
        hot = decide(new, warm, pipeline, candidates=asked, seed=i)
        assert decision_bytes(hot) == decision_bytes(decide(new, cold, pipeline, candidates=asked, seed=i)), i
        if hot.chosen:
            placed = msgspec.structs.replace(new, node_name=hot.chosen)
            pods[placed.key] = placed
            warm.add_pod(placed)
    # A pod the view already holds is never its own neighbour and takes no room on its own node.
    existing = next(p for p in pods.values() if p.node_name and p.namespace == base.namespace)
    cold = _fresh(nodes, pods)
    for policy in policies:
        cold.upsert_policy(policy)
    assert decision_bytes(decide(existing, warm, pipeline, seed=1)) == decision_bytes(
        decide(existing, cold, pipeline, seed=1)
    )


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**63),
    st.integers(min_value=ARRAY_FROM, max_value=3 * ARRAY_FROM),
    st.integers(0, 700),
)
def test_random_draws_are_the_draws_of_the_python_loop_and_leave_the_generator_as_it_would(seed, n, before):
    loop, batch = random.Random(seed), random.Random(seed)
    for _ in range(before):
        loop.random()
        batch.random()
    expected = [loop.random() for _ in range(n)]
    assert random_draws(batch, n).tolist() == expected
    assert batch.getstate() == loop.getstate()
    assert batch.random() == loop.random()


@settings(max_examples=30, deadline=None)
@given(
    st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, 1, -1, 2**32 - 1, 2**32, 2**64])),
    st.lists(st.integers(1, 3 * ARRAY_FROM), min_size=1, max_size=3),
    st.booleans(),
)
def test_a_decisions_draws_are_those_of_random_random_from_its_seed(seed, batches, asked_first):
    """Seeded draws from the seed, batch after batch, and its random.Random carries on from where
    they left it; asked for first, the random.Random is the seed's."""
    assert draws_module._twister().works  # numpy draws them here (the loop only if it could not)
    loop, seeded = random.Random(seed), Seeded(seed)
    if asked_first:
        assert seeded.rng.random() == loop.random()
    for n in batches:
        assert seeded.random(n).tolist() == [loop.random() for _ in range(n)]
    assert seeded.rng.getstate() == loop.getstate()
    assert seeded.rng.random() == loop.random()


def test_random_draws_are_made_by_the_loop_when_numpy_lays_its_state_out_otherwise(monkeypatch):
    import berth.engine.draws as draws

    monkeypatch.setattr(draws._local, "twister", None, raising=False)
    monkeypatch.setattr(draws._State, "from_address", lambda address: _ShiftedState())
    assert draws._twister().works is False
    loop, batch = random.Random(4), random.Random(4)
    assert random_draws(batch, 2 * ARRAY_FROM).tolist() == [loop.random() for _ in range(2 * ARRAY_FROM)]
    assert batch.getstate() == loop.getstate()
    loop, seeded = random.Random(4), Seeded(4)
    assert seeded.random(2 * ARRAY_FROM).tolist() == [loop.random() for _ in range(2 * ARRAY_FROM)]
    assert seeded.rng.getstate() == loop.getstate()


class _ShiftedState:
    """A state struct read at the wrong place: writing it does not reach the generator."""

    def __init__(self) -> None:
        import ctypes

        self.key = (ctypes.c_uint32 * 624)()
        self.pos = 0


def test_random_draws_below_the_array_size_are_the_same_too():
    loop, batch = random.Random(9), random.Random(9)
    assert random_draws(batch, ARRAY_FROM - 1).tolist() == [loop.random() for _ in range(ARRAY_FROM - 1)]
    assert batch.getstate() == loop.getstate()


def _small_view() -> ClusterView:
    items = generate(Size("slots", 40, 200), seed=2)["items"]
    return ClusterView(
        [node_from_k8s(o) for o in items if o["kind"] == "Node"],
        [pod_from_k8s(o) for o in items if o["kind"] == "Pod"],
    )


def test_candidates_made_by_removing_nodes_know_their_slots_and_are_reused():
    view = _small_view()
    states = view.states_by_name()
    outside, *names = list(reversed(view.node_names()))
    root = known(view, {n: states[n] for n in names})
    first = without(view, root, {n: None for n in names[::3]})
    second = without(view, first, {n: None for n in names[1::5]})
    for cands in (root, first, second):
        assert [view.slots().names[s] for s in slots_of(cands, view).tolist()] == list(cands)
    assert without(view, root, {n: None for n in names[::3]}) is first  # the same removal again
    assert list(first) == [n for i, n in enumerate(names) if i % 3]
    view.remove_node(outside)  # a node none of them holds: the slots move, and are found again
    assert [view.slots().names[s] for s in slots_of(second, view).tolist()] == list(second)


@pytest.mark.parametrize("left_out_at_most", [3, slots_module.LEFT_OUT_AT_MOST])
def test_candidates_left_one_node_fewer_at_a_time_read_as_the_dict_they_stand_for(
    monkeypatch, left_out_at_most
):
    """remaining() leaves nodes out of a dict without copying it, and makes a dict of its own once
    too many are left out: every step reads either as the dict of the nodes left."""
    monkeypatch.setattr(slots_module, "LEFT_OUT_AT_MOST", left_out_at_most)
    view = _small_view()
    states = view.states_by_name()
    names = view.node_names()
    cands: Any = known(view, dict(states))
    left = dict(states)
    for name in random.Random(5).sample(names, 12):
        cands = remaining(view, cands, [name])
        del left[name]
        assert list(cands) == list(left) and len(cands) == len(left)
        assert list(cands.items()) == list(left.items()) and list(cands.values()) == list(left.values())
        assert name not in cands and cands.get(name) is None
        with pytest.raises(KeyError):
            cands[name]
        assert all(cands[n] is s for n, s in left.items())
        assert [view.slots().names[s] for s in slots_of(cands, view).tolist()] == list(left)
        halved = without(view, cands, {n: None for n in list(left)[::2]})
        assert halved == {n: s for n, s in list(left.items())[1::2]}
    assert isinstance(cands, Remaining) == (left_out_at_most >= 12)


def test_the_candidates_of_a_long_running_burst_are_found_once_however_many_dicts_came_between(monkeypatch):
    """The engine keeps what it knows of its last few dicts; the nodes asked about pod after pod are
    looked up by name once, and again only once after other decisions pushed them out."""
    view = _small_view()
    pipeline = _pipeline("default", kube_scoring=False)
    new = pod_from_k8s(SCENARIOS["allocator"].pod)
    names = view.node_names()
    lookups = []
    real = slots_module._lookup
    monkeypatch.setattr(slots_module, "_lookup", lambda cands, index: lookups.append(1) or real(cands, index))

    def burst(count: int) -> None:
        for i in range(count):
            pod = msgspec.structs.replace(new, name=f"{new.name}-{i}", uid=f"{new.uid[:-6]}{i:06d}")
            decide(pod, view, pipeline, candidates=names, seed=i)

    burst(3)
    for i in range(slots_module.KNOWN_AT_MOST + 1):  # other work: the burst's dicts are dropped
        known(view, {n: view.state(n) for n in names[i % 7 :]})
    lookups.clear()
    burst(4)
    assert len(lookups) <= 1


def test_a_decision_read_after_later_decisions_shows_the_scores_it_was_made_with():
    """A score column's weighted parts are worked out into a scratch array to be totalled and made
    for good only when read: a decision read after others were made (an explain, a simulate's
    detail) shows its own parts, and they add up to its own scores."""
    items = CLUSTER["items"]
    view = ClusterView(
        [node_from_k8s(o) for o in items if o["kind"] == "Node"],
        [pod_from_k8s(o) for o in items if o["kind"] == "Pod"],
    )
    pipeline = _pipeline("default", kube_scoring=False)
    base = msgspec.structs.replace(pod_from_k8s(SCENARIOS["allocator"].pod), namespace="alone")
    pods = [
        msgspec.structs.replace(base, name=f"{base.name}-{i}", uid=f"{base.uid[:-6]}{i:06d}") for i in (1, 2)
    ]
    first = decide(pods[0], view, pipeline, seed=1)
    at_once = decision_bytes(decide(pods[0], view, pipeline, seed=1))
    decide(pods[1], view, pipeline, seed=2)  # other totals through the same scratch array
    assert decision_bytes(first) == at_once
    scorers = [s for s in pipeline.step_names if "/score-" in s]
    scored = [n for n in first.nodes if n.candidate]
    assert len(scored) > 100 and scorers
    for node in scored:
        total = 0.0
        for step in pipeline.step_names:
            if step in node.parts:
                total += node.parts[step].weighted
        assert round(total, 6) == node.score


def test_candidates_found_again_once_the_engine_dropped_them_are_still_the_nodes_asked_for():
    """The nodes asked about are marked by slot; when the engine has dropped what it knew of the
    candidates made for them, their slots are worked out again from those marks, in name order. The
    view's slots are out of name order here (nodes listed shuffled), as on a cluster that grew."""
    items = CLUSTER["items"]
    nodes = [node_from_k8s(o) for o in items if o["kind"] == "Node"]
    random.Random(2).shuffle(nodes)
    pods = [pod_from_k8s(o) for o in items if o["kind"] == "Pod"]
    view, fresh = ClusterView(nodes, pods), ClusterView(nodes, pods)
    pipeline = _pipeline("default")
    # In a namespace of its own: no node is set aside to spread it, thousands of candidates are scored.
    new = msgspec.structs.replace(pod_from_k8s(SCENARIOS["allocator"].pod), namespace="alone")
    names = view.node_names()
    asked = random.Random(3).sample(names, len(names) - 9)
    again = random.Random(4).sample(asked, len(asked))  # the same nodes in another order
    # (the per-node results are listed as asked: each order has its own expected bytes)
    expected = [decision_bytes(decide(new, fresh, pipeline, candidates=a, seed=6)) for a in (asked, again)]
    assert decision_bytes(decide(new, view, pipeline, candidates=asked, seed=6)) == expected[0]
    for i in range(slots_module.KNOWN_AT_MOST + 1):  # other work: the candidates' dicts are dropped
        known(view, {n: view.state(n) for n in names[i % 7 :]})
    assert decision_bytes(decide(new, view, pipeline, candidates=again, seed=6)) == expected[1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 39), st.integers(0, 199)), max_size=40))
def test_a_node_column_keeps_its_extremes_and_array_true_through_changes(changes):
    view = _small_view()
    column = view.column("test/pods", lambda state: float(len(state.pods)))
    layout = view.slots()
    version = column.version
    touched: set[str] = set()
    pods = list(view.pods())
    for add, node_index, pod_index in changes:
        node_name = layout.names[node_index]
        if add:
            moved = msgspec.structs.replace(pods[pod_index], node_name=node_name)
            view.add_pod(moved)
            if moved != pods[pod_index]:  # the same pod again changes nothing
                touched.update({node_name, pods[pod_index].node_name})
            pods[pod_index] = moved
        else:
            view.remove_pod(pods[pod_index].key)
            touched.add(pods[pod_index].node_name)
        column = view.column("test/pods", lambda state: float(len(state.pods)))
        expected = {n: float(len(s.pods)) for n, s in view.states_by_name().items()}
        assert column.values == expected
        assert (column.low, column.high) == (min(expected.values()), max(expected.values()))
        assert column.array(layout).tolist() == [expected[n] for n in layout.names]
    assert touched <= set(column.changed_since(version)) | {""}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["lift", "remove node", "add node", "move"]), st.integers(0, 199)),
        max_size=25,
    )
)
def test_a_node_columns_extremes_follow_nodes_added_and_removed_and_pods_lifted(changes):
    """The lowest and highest value, worked out again from the array by slot when the node holding
    one moves off it, are those of every node's value, whatever the view did meanwhile: a pod lifted
    off its node and put back (a bind checked again), nodes added and removed (a new layout)."""
    view = _small_view()
    nodes = {n: view.state(n).node for n in view.node_names()}
    pods = list(view.pods())

    def read() -> None:
        column = view.column("test/pods", lambda state: float(len(state.pods)))
        expected = [float(len(s.pods)) for s in view.states_by_name().values()]
        assert (column.low, column.high) == (min(expected), max(expected))

    read()
    for change, at in changes:
        pod = pods[at]
        if change == "lift" and view.pod(pod.key) is not None:
            with view.lifted(view.pod(pod.key)):
                read()
        elif change == "remove node" and len(view.node_names()) > 1:
            view.remove_node(view.node_names()[at % len(view.node_names())])
        elif change == "add node":
            gone = sorted(set(nodes) - set(view.node_names()))
            if gone:
                view.upsert_node(nodes[gone[at % len(gone)]])
        elif change == "move":
            view.add_pod(
                msgspec.structs.replace(pod, node_name=view.node_names()[at % len(view.node_names())])
            )
            pods[at] = view.pod(pod.key) or pod
        read()


def test_the_order_the_nodes_are_asked_in_does_not_change_the_decision():
    """kube-scheduler lists the feasible nodes in an order that changes from pod to pod; the decision,
    its random parts included, depends on the nodes asked about, not on their order."""
    items = CLUSTER["items"]
    view = ClusterView(
        [node_from_k8s(o) for o in items if o["kind"] == "Node"],
        [pod_from_k8s(o) for o in items if o["kind"] == "Pod"],
    )
    pipeline = _pipeline("default")
    new = pod_from_k8s(SCENARIOS["allocator"].pod)
    names = view.node_names()
    rng = random.Random(11)
    in_order = decide(new, view, pipeline, candidates=sorted(names), seed=4).to_dict(detail=True)
    in_order["nodes"].sort(key=lambda n: n["name"])  # the per-node results are listed as asked
    for _ in range(3):
        shuffled = rng.sample(names, len(names))
        again = decide(new, view, pipeline, candidates=shuffled, seed=4).to_dict(detail=True)
        assert [n["name"] for n in again["nodes"]] == shuffled
        again["nodes"].sort(key=lambda n: n["name"])
        assert again == in_order


def test_deciding_over_every_node_is_deciding_over_every_node_named():
    """No candidates (simulate, audit) means every node of the view, taken slot by slot."""
    items = CLUSTER["items"]
    view = ClusterView(
        [node_from_k8s(o) for o in items if o["kind"] == "Node"],
        [pod_from_k8s(o) for o in items if o["kind"] == "Pod"],
    )
    view.remove_node(view.node_names()[7])  # slots move: the view's order is no longer the listing's
    for name in ("allocator", "tag-affinity"):
        new = pod_from_k8s(SCENARIOS[name].pod)
        for seed in (1, 2):
            every = decide(new, view, _pipeline("default"), seed=seed)
            named = decide(new, view, _pipeline("default"), candidates=view.node_names(), seed=seed)
            assert decision_bytes(every) == decision_bytes(named)
            assert [n.name for n in every.nodes] == view.node_names()


# Values that make the extremes and ties hard: zeros of both signs, repeats, values a rounding apart.
_raw_values = st.lists(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 1e-7, 3.0000001, 3.0, 1e9]) | st.floats(-1e6, 1e6),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_raw_values, st.sampled_from([1.0, -1.0, 0.5, -2.0, 0.0]))
def test_an_array_column_scales_and_weighs_as_the_list_column_does_to_the_last_bit(raws, weight):
    """A scorer's raws as a list or as an array give the same extremes (the first of equal values,
    as min() and max() give them, which for a zero decides its sign) and the same parts, bit for bit."""
    among = {f"n{i:03d}": None for i in range(len(raws))}
    listed = ScoreColumn("s", among, list(raws), weight)
    array = ScoreColumn("s", among, np.array(raws, dtype=np.float64), weight)
    assert (listed.low.hex(), float(listed.span).hex()) == (array.low.hex(), float(array.span).hex())
    assert [float(w).hex() for w in listed.weighted_for(list(among))] == [
        float(w).hex() for w in array.weighted_for(list(among))
    ]
    assert float(array.highest_raw()).hex() == float(listed.highest_raw()).hex()


class _Names:
    """What the ranking reads of a view: its size and its node names sorted."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def sorted_names(self) -> list[str]:
        return self.names


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([0.0, 1.0, 2.0, 2.0000001, 2.000004, 3.5, 3.5000049, 7.0]), min_size=1, max_size=80
    )
)
def test_the_ranking_over_an_array_of_totals_is_the_ranking_over_the_list(totals):
    """The highest rounded score, the candidates tied at it and the best few are the same whether the
    totals come as an array (counted and partitioned) or as a list (compared one by one)."""
    names = [f"n{i:03d}" for i in range(len(totals))]
    view = _Names(names)
    kept = dict.fromkeys(names)
    from_list = decide_module._tied(view, kept, names, list(totals))
    from_array = decide_module._tied(view, kept, names, np.array(totals))
    assert from_array == from_list
    best, tied = from_list
    assert decide_module._ranked(names, np.array(totals), tied, best, 6) == decide_module._ranked(
        names, list(totals), tied, best, 6
    )
    # ... and both are the candidates by (rounded score descending, name), the tied ones first
    by_rule = sorted(
        ((n, round(t, 6)) for n, t in zip(names, totals, strict=True)), key=lambda p: (-p[1], p[0])
    )
    assert decide_module._ranked(names, list(totals), tied, best, 6) == by_rule[:6]


def test_the_candidates_asked_about_read_as_the_dict_of_their_nodes_in_name_order():
    """The candidates made from the names asked about are the places of their nodes in the view's
    lists: read in any way a step reads a dict, they are the dict of those nodes in name order (the
    view's slots in another order: the nodes came in shuffled)."""
    small = _small_view()
    nodes = [s.node for s in small.states()]
    random.Random(2).shuffle(nodes)
    view = ClusterView(nodes, list(small.pods()))
    assert view.node_names() != sorted(view.node_names())
    states = view.states_by_name()
    names = view.node_names()
    asked = random.Random(7).sample(names, 25)
    cands, unknown = decide_module._candidates(view, list(asked))
    expected = {n: states[n] for n in sorted(asked)}
    assert not unknown and len(cands) == len(expected)
    assert list(cands) == list(expected) and list(cands.items()) == list(expected.items())
    outside = next(n for n in names if n not in expected)
    for name in expected:
        assert name in cands and cands[name] is states[name] and cands.get(name) is states[name]
    assert outside not in cands and cands.get(outside, "none") == "none" and 3 not in cands
    with pytest.raises(KeyError):
        cands[outside]
    assert [view.slots().names[s] for s in slots_of(cands, view).tolist()] == list(expected)
    gone = list(expected)[::4]
    left = remaining(view, cands, gone)
    assert dict(left.items()) == {n: s for n, s in expected.items() if n not in gone}
    assert without(view, cands, dict.fromkeys(gone)) == {n: s for n, s in expected.items() if n not in gone}


def test_a_plain_pod_decided_over_a_sample_never_makes_the_dict_of_its_candidates(monkeypatch):
    """The default chain counts the candidates, asks for a few and gathers the rest by slot: a pod
    without rules, decided over kube's sample, never reads its candidates node by node (a dict of
    hundreds of states made for every pod costs a cache miss per node live), and is placed as over a
    dict of the same nodes. (kube's sample is a tenth of 5000 nodes: less than half the view.)"""
    view = ClusterView(
        [node_from_k8s(_node(f"node-{i:03d}")) for i in range(100)],
        [],
    )
    pipeline = build_pipeline(None, kube_filters=False)
    made: list[Any] = []
    real = decide_module._candidates

    def recorded(*args: Any) -> Any:
        cands, unknown = real(*args)
        made.append(cands)
        return cands, unknown

    monkeypatch.setattr(decide_module, "_candidates", recorded)
    pod = pod_from_k8s(_plain_pod("plain-0"))
    sample = random.Random(3).sample(view.node_names(), 40)
    chosen = decide(pod, view, pipeline, candidates=sample, seed=11).chosen
    assert chosen in sample and made and all(c._dict is None for c in made)

    def as_dicts(*args: Any) -> Any:
        cands, unknown = real(*args)
        return dict(cands.items()), unknown

    monkeypatch.setattr(decide_module, "_candidates", as_dicts)
    view.candidate_sets.clear()
    assert decide(pod, view, pipeline, candidates=sample, seed=11).chosen == chosen


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _plain_pod(name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
        },
    }


def test_a_placements_summary_worked_out_after_the_cluster_moved_is_the_one_worked_out_at_once():
    """The extender answers with the chosen node first and has the summary and the placement's words
    worked out after the answer is sent (Decision.summary), when the pod already counts on its node
    and others may have landed: they say what they would have said at once."""
    pipeline = build_pipeline(None, kube_filters=False)
    objects = CLUSTER["items"]
    nodes = [node_from_k8s(o) for o in objects if o["kind"] == "Node"]
    running = [pod_from_k8s(o) for o in objects if o["kind"] == "Pod"]
    for i, template in enumerate(running[:40:4]):
        new = msgspec.structs.replace(template, name=f"{template.name}-new", uid=f"new-{i}", node_name="")
        at_once = decide(new, ClusterView(nodes, running), pipeline, seed=i)
        summary, events = at_once.summary, at_once.events
        later_view = ClusterView(nodes, running)
        later = decide(new, later_view, pipeline, seed=i)
        assert later.chosen == at_once.chosen and later._rest is not None and later._rest.done is None
        later_view.add_pod(msgspec.structs.replace(new, node_name=later.chosen))
        for k, other in enumerate(later_view.node_names()[::7]):
            later_view.add_pod(
                msgspec.structs.replace(template, name=f"landed-{i}-{k}", uid=f"l-{i}-{k}", node_name=other)
            )
        assert later.summary == summary and summary is not None and summary.top
        assert later.events == events and events[-1].reason == "Placed"
        assert later.outcome().summary == summary
