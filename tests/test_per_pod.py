"""What berth serve keeps per pod lets go of the pod when the watch shows it bound or gone: the maps hold
the pods waiting for a node, never the pods of months ago (docs/reliability.md, "What berth keeps per
pod")."""

from __future__ import annotations

import asyncio

import msgspec
import orjson
import pytest

from berth.cluster import convert
from berth.cluster.live import LiveCluster
from berth.cluster.per_pod import PerPod, PodStates
from berth.configure import default_pipeline
from berth.extender import wire
from berth.extender.app import build_extender
from berth.extender.placer import Placer, Writes
from tests.builders import node, pod
from tests.test_live_cache import FakeApi, Feed, _cache, _until, _with_rv

NODES = 120  # more than kube-scheduler's sample at its adaptive default (100): hand-overs happen
PROFILE = "berth-scheduler"


def _pending(name: str, rv: int, **kwargs) -> dict:
    obj = pod(name, uid=f"uid-{name}", phase="Pending", **kwargs)
    obj["spec"]["schedulerName"] = PROFILE
    return _with_rv(obj, rv)


def _filter_args(obj: dict, names: list[str]) -> wire.ExtenderFilterArgs:
    return wire.ExtenderFilterArgs(pod=msgspec.Raw(orjson.dumps(obj)), node_names=orjson.dumps(names))


async def _stack(api: FakeApi) -> tuple[LiveCluster, Placer, Feed, list]:
    api.lists["/api/v1/nodes"] = [[_with_rv(node(f"n{i:03d}", cpu="2"), 5) for i in range(NODES)]]
    api.lists["/api/v1/pods"] = [
        [
            _with_rv(pod("db", uid="uid-db", node="n119", tags=["db"]), 6),
            _with_rv(pod("filler", uid="uid-filler", node="n000", cpu="1500m"), 6),
        ]
    ]
    feed = Feed()
    api.watches["/api/v1/pods"] = [feed, "hang"]
    live = await _cache(api)
    written: list = []

    async def write(*args) -> None:
        written.append(args)

    app = build_extender(
        live,
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=write, record=write, nominate=write, retry=write),
        kube_sample={PROFILE: 0},
    )
    placer = app.state.placer
    assert placer.pod_states is live.pod_states  # the watch empties the maps the placer fills
    live.add_handler(placer)
    await live.start()
    await _until(live.ready)
    return live, placer, feed, written


def test_every_per_pod_map_is_empty_once_the_watch_shows_its_pods_bound_or_deleted():
    async def scenario() -> None:
        api = FakeApi()
        live, placer, feed, _ = await _stack(api)
        sample = [f"n{i:03d}" for i in range(100)]
        # Arrives thin (only n119 holds a db, outside any sample): nominated on arrival, a hand-over.
        thin = _pending("thin", 10, affinity={"require_with_tag": ["db"]})
        feed.send("ADDED", thin)
        # Placed at filter: a decision kept for bind; its unknown annotation: a warning written once.
        placed = _pending("placed", 11, annotations={"berth.dev/unknwon": "x"})
        feed.send("ADDED", placed)
        # Refused: a refusal event, a note on the nodes kube did not ask about, a pod to retry.
        refused = _pending("refused", 12, affinity={"require_with_tag": ["nowhere"]})
        feed.send("ADDED", refused)
        # Preempted for: berth's answer kept while the victims go.
        urgent = _pending("urgent", 13, cpu="1")
        urgent["spec"]["priority"] = 100
        urgent["spec"]["schedulerName"] = "berth-scheduler-exhaustive"  # kube asks about every node
        feed.send("ADDED", urgent)
        await _until(lambda: live.view.pod("default/urgent") is not None)
        await placer.filter(_filter_args(placed, sample))
        await placer.filter(_filter_args(refused, sample))
        preempt = wire.ExtenderPreemptionArgs(
            pod=urgent,
            node_name_to_meta_victims={"n000": wire.MetaVictims(pods=[wire.MetaPod(uid="uid-filler")])},
        )
        await placer.preempt(preempt)
        sizes = placer.pod_states.sizes()
        assert {name for name, size in sizes.items() if size == 0} == set(), sizes

        # The watch: two bound, two deleted while pending.
        feed.send("MODIFIED", _with_rv({**thin, "spec": {**thin["spec"], "nodeName": "n119"}}, 20))
        feed.send("MODIFIED", _with_rv({**placed, "spec": {**placed["spec"], "nodeName": "n001"}}, 21))
        feed.send("DELETED", _with_rv(refused, 22))
        feed.send("DELETED", _with_rv(urgent, 23))
        await _until(lambda: live.view.pod("default/urgent") is None)
        assert placer.pod_states.sizes() == dict.fromkeys(sizes, 0)
        # Nor are the conversions of the pods deleted kept for events that will not come.
        for uid in ("uid-refused", "uid-urgent"):
            assert uid not in convert.SPEC_MEMO.new and uid not in convert.SPEC_MEMO.old
            assert uid not in convert.VERSION_MEMO.new and uid not in convert.VERSION_MEMO.old
        await asyncio.gather(*placer.background, return_exceptions=True)
        await live.stop()

    asyncio.run(scenario())


def test_a_relist_that_no_longer_lists_a_pod_forgets_what_was_kept_about_it():
    async def scenario() -> None:
        api = FakeApi()
        live, placer, feed, _ = await _stack(api)
        refused = _pending("refused", 12, affinity={"require_with_tag": ["nowhere"]})
        feed.send("ADDED", refused)
        await _until(lambda: live.view.pod("default/refused") is not None)
        await placer.filter(_filter_args(refused, [f"n{i:03d}" for i in range(NODES)]))
        assert placer.pod_states.sizes()["decisions"] == 1
        pods = next(r for r in live.reflectors if r.kind.name == "pods")
        await pods._relist()  # the list the API server gives now: the refused pod was deleted meanwhile
        assert set(placer.pod_states.sizes().values()) == {0}
        await live.stop()

    asyncio.run(scenario())


def _containers(obj: object, seen: set[int], path: str) -> list[tuple[str, object]]:
    """Every dict, set, list and PerPod an object holds in its attributes, through the objects of
    berth's own classes it holds (the concerns the Placer is made of)."""
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    out = []
    names = list(getattr(obj, "__dict__", {})) + [
        s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())
    ]
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, PerPod | dict | set | list):
            out.append((f"{path}.{name}", value))
        elif type(value).__module__.startswith("berth.extender") and not callable(value):
            out.append((f"{path}.{name}", value))
            out += _containers(value, seen, f"{path}.{name}")
    return out


# What the Placer holds that is not kept per pod: its configuration, the work under way.
NOT_PER_POD = {
    "placer.kube_sample",  # per profile, from the command line
    "placer.background",  # the tasks under way (each removes itself when done)
    "placer._after",  # what the answer just sent left to do (emptied before the next call)
    "placer.preemption.kube_sample",
    "placer.past_sample.kube_sample",
}


def test_no_map_of_the_placer_is_kept_per_pod_but_through_pod_states():
    placer = Placer(
        None,  # type: ignore[arg-type]
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=None, record=None, nominate=None, retry=lambda *a: None),  # type: ignore[arg-type]
    )
    held = _containers(placer, set(), "placer")
    per_pod = {path for path, value in held if isinstance(value, PerPod)}
    assert len(per_pod) >= 8  # the walk reaches the concerns' maps
    others = {path for path, value in held if isinstance(value, dict | set | list)}
    assert others - NOT_PER_POD == set(), (
        "a new map on the Placer or one of its concerns: make it with PodStates.map, so that the watch "
        "empties it, or name here why it is not kept per pod"
    )


def test_a_per_pod_map_keeps_its_most_recent_entries_and_its_namespaces():
    kept: PerPod[int] = PerPod("test", limit=2, grouped=True)
    kept.set("a", 1, "ns1")
    kept.set("b", 2, "ns2")
    kept.set("a", 3, "ns1")  # a is now the most recent
    kept.set("c", 4, "ns1")  # b, the least recent, goes
    assert sorted(kept.keys()) == ["a", "c"] and kept.get("b") is None
    assert sorted(kept.in_namespace("ns1")) == ["a", "c"] and kept.in_namespace("ns2") == []
    kept.pop("a")
    assert kept.in_namespace("ns1") == ["c"] and len(kept) == 1


def test_pod_states_names_each_map_once_and_forgets_a_pod_by_uid_and_by_name():
    states = PodStates()
    by_uid, by_name = states.map("one"), states.map("two")
    by_uid.set("uid-1", True)
    by_name.set("default/p", True)
    with pytest.raises(ValueError, match="one"):
        states.map("one")
    states.forget("uid-1", "default/p")
    assert states.sizes() == {"one": 0, "two": 0}
