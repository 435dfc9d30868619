"""Node names found in the raw bytes of the filter call's NodeNames, and the filter answers that rest
on them: exact, or not found at all (and then decoded as before)."""

from __future__ import annotations

import dataclasses
import random

import msgspec
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster import name_table as names_module
from berth.cluster import view as view_module
from berth.cluster.name_table import NameTable
from berth.cluster.view import Slots
from berth.configure import default_pipeline
from berth.extender import placer as placer_module
from berth.extender.app import build_extender
from berth.extender.placer import FIND_FROM_NAMES, Writes
from berth.extender.serve import SnapshotCluster
from tests.builders import node, pod, view

NAMES = [f"node-{i:04d}" for i in range(600)] + ["ünï-köde", "a", "ip-10-0-1-2.ec2.internal", "日本"]


def _table(names=NAMES) -> NameTable:
    return NameTable(Slots.of(list(names), 1))


def test_every_name_is_found_in_the_order_asked_with_its_slot():
    table = _table()
    rng = random.Random(5)
    for asked in (rng.sample(NAMES, len(NAMES)), rng.sample(NAMES, 17), ["a", "a", "日本"], []):
        found = table.find(orjson.dumps(asked))
        assert found is not None
        assert list(found) == asked and len(found) == len(asked)
        assert [NAMES[s] for s in found.slots.tolist()] == asked


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'["a","node-9999"]', id="a name the view does not hold"),
        pytest.param(b'["a","aa"]', id="a known name with one more byte"),
        pytest.param(b'["node-000"]', id="a known name with one byte less"),
        pytest.param(b'[""]', id="an empty name"),
        pytest.param(b'["a","\\u0061"]', id="an escape sequence"),
        pytest.param(b'["a",1]', id="an element that is not a string"),
        pytest.param(b'["a",["a"]]', id="a nested array"),
        pytest.param(b'["a",1,"a"]', id="a number between two names"),
        pytest.param('[ "a", "日本" ]'.encode(), id="white space"),
        pytest.param(b"null", id="null"),
        pytest.param(b'{"a":"a"}', id="an object"),
    ],
)
def test_anything_but_a_compact_array_of_known_names_is_not_found(raw):
    msgspec.json.decode(raw)  # valid JSON, as the decoder hands it over
    assert _table().find(raw) is None


def test_a_name_with_the_hash_of_another_is_told_apart_by_its_bytes(monkeypatch):
    def by_length(buf, starts, stops, scratch):  # every name of a length collides
        return (stops - starts).astype(np.uint64)

    monkeypatch.setattr(names_module, "_hashes", by_length)
    table = _table(["node-b", "node-c", "node-dd"])
    assert list(table.find(b'["node-b","node-dd"]')) == ["node-b", "node-dd"]
    assert table.find(b'["node-c"]') is None  # the hash leads to node-b first: not node-c's bytes
    assert table.find(b'["node-x"]') is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12), unique=True, min_size=1
    ),
    st.data(),
)
def test_found_names_are_exactly_the_names_asked(held, data):
    asked = data.draw(st.lists(st.one_of(st.sampled_from(held), st.text(max_size=12)), max_size=20))
    found = _table(held).find(orjson.dumps(asked))
    if found is not None:
        assert list(found) == asked
    else:
        # only what JSON writes with an escape (a quote, a backslash, a control character) is not found
        assert not all(n in held for n in asked) or any(c in '"\\' or ord(c) < 0x20 for n in asked for c in n)


def _client(names):
    cluster = SnapshotCluster(view(*(node(n) for n in names), pod("db", node=names[0], tags=["db"])))
    app = build_extender(
        cluster,
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=_nothing, record=_nothing),
    )
    return TestClient(app)


async def _nothing(*args):
    return None


def test_a_long_filter_call_found_from_its_bytes_answers_as_the_decoded_one(monkeypatch):
    names = [f"worker-{i:04d}" for i in range(FIND_FROM_NAMES + 100)]  # enough to be found from the bytes
    rng = random.Random(2)
    for i in range(4):
        web = pod(f"web-{i}", tags=["web"], affinity={"require_without_tag": ["db"]}, uid=f"u-web-{i}")
        body = {"Pod": web, "NodeNames": rng.sample(names, len(names))}
        client = _client(names)
        found = client.post("/filter", json=body).json()
        assert 'berth_filter_node_names_total{read="bytes"} 1.0' in client.get("/metrics").text
        with monkeypatch.context() as m:
            m.setattr(placer_module, "FIND_FROM_NAMES", 10**9)
            client = _client(names)
            decoded = client.post("/filter", json=body).json()
            assert 'berth_filter_node_names_total{read="decoded"} 1.0' in client.get("/metrics").text
        assert found == decoded
        assert found["NodeNames"][0] != names[0]  # the db pod's node is kept out

    # A node the view does not hold yet: not found from the bytes, decoded, and reported.
    asked = [names[0], *[f"new-{i:04d}" for i in range(FIND_FROM_NAMES)]]
    web = pod("web", tags=["web"], affinity={"require_without_tag": ["db"]}, uid="u-web")
    answer = _client(names).post("/filter", json={"Pod": web, "NodeNames": asked}).json()
    assert answer["NodeNames"] == []
    assert "not in berth's cluster view" in answer["FailedNodes"]["new-0000"]
    assert set(answer["FailedNodes"]) | set(answer["FailedAndUnresolvableNodes"] or {}) == set(asked)


def test_a_long_node_names_that_is_not_an_array_of_strings_is_a_400_naming_the_field():
    names = [f"worker-{i:04d}" for i in range(FIND_FROM_NAMES + 100)]
    client = _client(names)
    tagged = pod("web", uid="u-web")
    for bad in ([*names, 7], {"worker-0000": 1}):
        response = client.post("/filter", json={"Pod": tagged, "NodeNames": bad})
        assert response.status_code == 400
        assert "NodeNames" in response.json()["error"]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_names_decoded_are_found_by_their_hashes_exactly_or_not_at_all(data):
    """Slots.find: the slot of every name asked, in the order asked (a name twice too); None as soon
    as one name is not a node's, so that the caller says which."""
    slots = Slots.of(list(NAMES), 1)
    asked = data.draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=50))
    found = slots.find(asked)
    assert found is not None and [NAMES[s] for s in found.tolist()] == asked
    stranger = data.draw(st.text(min_size=1, max_size=12).filter(lambda n: n not in NAMES))
    assert slots.find([*asked, stranger]) is None


def test_a_hash_that_leads_to_another_nodes_slot_is_never_taken_for_it():
    """Two names with one hash (or a table out of step with its names) cannot hand a name another
    node's slot: every name is compared with the one held at the slot found for it."""
    slots = Slots.of(list(NAMES), 1)
    crossed = dataclasses.replace(slots, by_hash=slots.by_hash[::-1].copy())
    assert crossed.find(["node-0001", "node-0002"]) is None
    assert slots.find(["node-0001", "node-0002"]).tolist() == [1, 2]


def test_a_guess_goes_where_the_hash_leads_and_only_find_compares_the_names(monkeypatch):
    """Slots.guess takes a hash for its node (find compares every name and refuses), and takes none
    at all while two nodes' names share a hash."""
    slots = Slots.of(list(NAMES), 1)
    crossed = dataclasses.replace(slots, by_hash=slots.by_hash[::-1].copy())
    guessed = crossed.guess(["node-0001", "node-0002"])
    assert guessed is not None and guessed.tolist() != [1, 2]
    assert crossed.find(["node-0001", "node-0002"]) is None
    assert not crossed.named(["node-0001", "node-0002"], guessed)
    assert slots.guess(["node-0001", "node-0002"]).tolist() == [1, 2]
    assert slots.guess(["node-0001", "stranger"]) is None

    monkeypatch.setattr(view_module, "hash", lambda name: len(name), raising=False)  # lengths collide
    shared = Slots.of(["node-b", "node-c", "node-dd"], 1)
    assert not shared.hashes_distinct
    assert shared.guess(["node-b", "node-dd"]) is None and shared.find(["node-b", "node-dd"]) is None


def _misguided(slots: Slots, names: list[str]) -> np.ndarray | None:
    """Every name asked given the slot of a node not asked about, as a name whose hash is another
    node's would be."""
    others = [s for s in range(len(slots.names)) if slots.names[s] not in names]
    return np.array([others[i % len(others)] for i in range(len(names))], dtype=np.intp)


def test_a_filter_whose_names_hash_to_other_nodes_answers_only_nodes_asked_about(monkeypatch):
    names = [f"worker-{i:04d}" for i in range(12)]
    asked = names[:5]
    rng = random.Random(4)
    for i in range(6):
        web = pod(f"web-{i}", tags=["web"], affinity={"require_without_tag": ["db"]}, uid=f"u-web-{i}")
        body = {"Pod": web, "NodeNames": rng.sample(asked, len(asked))}
        exact = _client(names)
        with monkeypatch.context() as m:
            m.setattr(Slots, "guess", lambda self, ns: None)
            expected = exact.post("/filter", json=body).json()
        with monkeypatch.context() as m:
            m.setattr(Slots, "guess", _misguided)
            answer = _client(names).post("/filter", json=body).json()
        assert answer == expected
        assert len(answer["NodeNames"]) == 1 and answer["NodeNames"][0] in asked[1:]

    # Nothing fits: the failure map names exactly the nodes asked about.
    lonely = pod("lonely", affinity={"require_with_tag": ["nowhere"]}, uid="u-lonely")
    with monkeypatch.context() as m:
        m.setattr(Slots, "guess", _misguided)
        answer = _client(names).post("/filter", json={"Pod": lonely, "NodeNames": asked}).json()
    assert answer["NodeNames"] == []
    assert set(answer["FailedNodes"] or {}) | set(answer["FailedAndUnresolvableNodes"] or {}) == set(asked)


def test_a_filter_answers_the_same_with_its_names_guessed_or_found():
    names = [f"worker-{i:04d}" for i in range(40)]
    rng = random.Random(9)
    for i in range(10):
        web = pod(f"web-{i}", tags=["web"], affinity={"prefer_with_tag": ["db"]}, uid=f"u-web-{i}")
        body = {"Pod": web, "NodeNames": rng.sample(names, rng.randrange(2, len(names)))}
        guessed = _client(names).post("/filter", json=body).json()
        client = _client(names)
        client.app.verbs.placer.nodes_asked = lambda args: args.candidate_names()  # decoded, found in decide
        assert client.post("/filter", json=body).json() == guessed
