"""kube-scheduler's node order learned from its filter calls (berth.cluster.kube_order): a call that is a
run of it is found by its bytes, exactly; anything else is found the usual way."""

from __future__ import annotations

import json
import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster import kube_order as kube_order_module
from berth.cluster.kube_order import KubeOrder
from berth.cluster.view import Slots
from tests.builders import pod
from tests.test_names import _client  # the extender over a view of these nodes

NAMES = [f"node-{i:04d}" for i in range(280)] + [f"ip-10-0-{i}-7.ec2.internal" for i in range(20)]


def _run(order: list[str], start: int, size: int) -> list[str]:
    return [order[(start + k) % len(order)] for k in range(size)]


def _interleaved(order: list[str], start: int, size: int, rng: random.Random) -> list[str]:
    """Two of kube's filter workers' runs, their nodes in the order their checks finished."""
    half = len(order) // 2
    runs = [_run(order, start, size), _run(order, start + half, size)]
    asked: list[str] = []
    while len(asked) < size:
        run = runs[rng.randrange(2)]
        asked.append(run.pop(0))
    return asked


def _ask(order: KubeOrder, layout: Slots, names: list[str]) -> bool:
    """One call through the order as the filter makes it: recalled, or found the usual way and
    learned. Whether it was recalled; a call recalled has the slots of exactly the names asked."""
    raw = orjson.dumps(names)
    found = order.recall(raw)
    if found is not None:
        assert found.slots.tolist() == layout.find(names).tolist()
        assert list(found) == names
        return True
    slots = layout.guess(names)
    if slots is not None:
        order.learn(slots)
    return False


def test_calls_that_are_runs_of_kube_order_are_recalled_once_it_has_come_round():
    layout = Slots.of(list(NAMES), 1)
    kube = random.Random(1).sample(NAMES, len(NAMES))  # kube's order: no order by name
    order = KubeOrder(layout)
    start, recalled = 0, []
    for _ in range(60):  # 60 pods, 40 names a call: eight times round
        recalled.append(_ask(order, layout, _run(kube, start, 40)))
        start = (start + 40) % len(kube)
    assert not any(recalled[:4])  # nothing known yet
    assert all(recalled[32:])  # every call once the order is known, across its end too


def test_interleaved_calls_are_found_the_usual_way_and_do_not_spoil_the_order():
    layout = Slots.of(list(NAMES), 1)
    kube = random.Random(2).sample(NAMES, len(NAMES))
    rng = random.Random(3)
    order = KubeOrder(layout)
    start, runs, interleaved = 0, [], []
    for i in range(200):
        if i % 4 == 3:
            interleaved.append(_ask(order, layout, _interleaved(kube, start, 40, rng)))
        else:
            runs.append(_ask(order, layout, _run(kube, start, 40)))
        start = (start + 40) % len(kube)
    assert not any(interleaved)
    assert sum(runs[40:]) == len(runs[40:])
    # A trial found most calls: the order is kept as it is, and a call not found costs no vote.
    voted = order.next.copy(), order.votes.copy()
    for _ in range(20):
        assert not _ask(order, layout, _interleaved(kube, start, 40, rng))
        start = (start + 40) % len(kube)
    assert (order.next == voted[0]).all() and (order.votes == voted[1]).all()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_whatever_is_asked_a_call_recalled_has_exactly_the_names_asked(data):
    """Runs, runs with a name changed, names the view does not hold, repeats, white space and escapes,
    in any mix: a call recalled is always the slots of exactly the names asked."""
    names = data.draw(
        st.lists(
            st.text("abcdefghij-.0123456789", min_size=1, max_size=6), min_size=4, max_size=40, unique=True
        )
    )
    layout = Slots.of(names, 1)
    kube = data.draw(st.permutations(names))
    order = KubeOrder(layout)
    start = 0
    for _ in range(data.draw(st.integers(10, 40))):
        size = data.draw(st.integers(1, len(names)))
        asked = _run(kube, start, size)
        start = (start + size) % len(kube)
        how = data.draw(st.sampled_from(["run", "run", "run", "changed", "stranger", "shuffled", "twice"]))
        if how == "changed":
            asked[data.draw(st.integers(0, size - 1))] = data.draw(st.sampled_from(names))
        elif how == "stranger":
            asked[-1] = asked[-1] + "x"
        elif how == "shuffled":
            asked = data.draw(st.permutations(asked))
        elif how == "twice":
            asked = [*asked, asked[0]]
        raw = orjson.dumps(asked)
        found = order.recall(raw)
        if found is not None:
            assert [names[s] for s in found.slots.tolist()] == asked
        else:
            slots = layout.guess(asked) if len(asked) > 1 else None
            if slots is not None and layout.named(asked, slots):
                order.learn(slots)
        # The same names written otherwise are never taken for a run (they may still be one).
        for other in (json.dumps(asked).encode(), raw.replace(b'"', b"\\u0022", 1)):
            again = order.recall(other)
            assert again is None or [names[s] for s in again.slots.tolist()] == asked


def test_a_view_with_a_name_json_would_escape_is_never_recalled():
    names = [*NAMES[:50], 'odd"name']
    layout = Slots.of(names, 1)
    kube = names[:50]
    order = KubeOrder(layout)
    assert not any(_ask(order, layout, _run(kube, 10 * i, 10)) for i in range(40))


def test_where_calls_are_never_runs_the_learning_rests(monkeypatch):
    """A kube-scheduler whose workers interleave every call: after two trials that found nothing the
    order is neither voted nor rendered for a while, then learned again from nothing."""
    monkeypatch.setattr(kube_order_module, "TRIAL", 16)
    monkeypatch.setattr(kube_order_module, "RESTS", 40)
    layout = Slots.of(list(NAMES), 1)
    rng = random.Random(4)
    order = KubeOrder(layout)
    for _ in range(32):
        assert not _ask(order, layout, rng.sample(NAMES, 40))
    rendered, voted = [], order.next.copy()
    with monkeypatch.context() as m:
        m.setattr(KubeOrder, "_render", lambda self: rendered.append(1))
        for i in range(39):
            if i == 20:  # a node joins: still at rest
                layout = Slots.of([*NAMES, "node-new"], 2)
                order = order.moved_to(layout)
            assert not _ask(order, layout, rng.sample(NAMES, 40))
    # At rest: nothing voted, nothing rendered.
    assert not rendered and (order.next[: len(NAMES)] == voted).all()
    kube = rng.sample(NAMES, len(NAMES))
    assert not _ask(order, layout, _run(kube, 0, 40))  # the last call of the rest
    start, recalled = 40, []
    for _ in range(40):
        recalled.append(_ask(order, layout, _run(kube, start, 40)))
        start = (start + 40) % len(kube)
    assert all(recalled[20:])  # learned again


def test_the_order_carries_over_when_a_node_joins_or_leaves():
    layout = Slots.of(list(NAMES), 1)
    kube = random.Random(5).sample(NAMES, len(NAMES))
    order = KubeOrder(layout)
    start = 0
    for _ in range(30):
        _ask(order, layout, _run(kube, start, 40))
        start = (start + 40) % len(kube)
    gone, joined = kube[100], "node-new"
    moved = [n for n in NAMES if n != gone] + [joined]
    layout = Slots.of(moved, 2)
    order = order.moved_to(layout)
    kube = [n for n in kube if n != gone]
    # Runs without the node that left or the one that joined: recalled at once, on the new slots.
    assert _ask(order, layout, kube[:90])
    assert _ask(order, layout, kube[101:180])
    assert not _ask(order, layout, [*kube[180:200], joined])


def test_filter_calls_recalled_answer_as_the_decoded_ones():
    names = [f"worker-{i:03d}" for i in range(120)]
    kube = random.Random(6).sample(names, len(names))
    recalling, decoding = _client(names), _client(names)
    decoding.app.verbs.placer.nodes_asked = lambda args: args.candidate_names()  # decoded, found in decide
    start = 0
    for i in range(40):
        web = pod(f"web-{i}", tags=["web"], affinity={"require_without_tag": ["db"]}, uid=f"u-web-{i}")
        body = {"Pod": web, "NodeNames": _run(kube, start, 30)}
        start = (start + 30) % len(kube)
        assert recalling.post("/filter", json=body).json() == decoding.post("/filter", json=body).json()
    read = {
        line.split('"')[1]: float(line.split()[-1])
        for line in recalling.get("/metrics").text.splitlines()
        if line.startswith("berth_filter_node_names_total{")
    }
    assert read["recalled"] >= 20 and read["recalled"] + read["decoded"] == 40
