"""kube-scheduler's sample as the extender sees it, and the hand-over's loop guard
(berth.extender.sample)."""

from __future__ import annotations

import asyncio

import msgspec
import orjson
import pytest

from berth.extender.sample import (
    HANDOVER_WINDOW,
    HANDOVERS_AT_MOST,
    REJECTED_FOR,
    HandOvers,
    asked_a_sample,
    feasible_nodes_to_find,
    parse_profiles,
    too_few_in_sample,
)


# kube-scheduler's own table (pkg/scheduler/schedule_one_test.go, TestNumFeasibleNodesToFind, v1.36.3):
# (the profile's or else the global percentage, 0 when neither is set; nodes; feasible nodes to find).
@pytest.mark.parametrize(
    ("percentage", "nodes", "want"),
    [
        (0, 10, 10),  # not set, not more than 50 nodes
        (40, 10, 10),  # set, not more than 50 nodes
        (0, 1000, 420),  # not set, more than 50
        (40, 1000, 400),  # profile's 40 (over a global 100)
        (0, 6000, 300),  # not set, more than 50 x 125: the 5 % floor
        (40, 6000, 2400),
        (0, 100, 100),
        (0, 120, 100),  # the floor of 100 nodes
        (0, 5000, 500),  # 50 - 40 = 10 %
        (100, 5000, 5000),
    ],
)
def test_feasible_nodes_to_find_is_kube_schedulers(percentage, nodes, want):
    assert feasible_nodes_to_find(percentage, nodes) == want


def test_a_sample_is_an_early_stop_below_the_clusters_size():
    assert asked_a_sample(500, 5000, 0)
    assert not asked_a_sample(499, 5000, 0)  # a full pass found fewer: every other node failed kube's filters
    assert not asked_a_sample(5000, 5000, 0)
    assert not asked_a_sample(500, 5000, 100)  # the exhaustive profile never samples
    assert not asked_a_sample(60, 60, 0)


def test_thin_is_fewer_than_kubes_minimum_of_feasible_nodes():
    assert too_few_in_sample(0, 500) and too_few_in_sample(99, 500)
    assert not too_few_in_sample(100, 500) and not too_few_in_sample(500, 500)
    assert not too_few_in_sample(1, 1)  # the nominated node alone, evaluated again


def test_the_profiles_are_read_as_kube_schedulers_configuration_sets_them():
    assert parse_profiles("berth-scheduler=0,berth-scheduler-exhaustive=100") == {
        "berth-scheduler": 0,
        "berth-scheduler-exhaustive": 100,
    }
    assert parse_profiles("") == {}
    for bad in ("berth-scheduler", "x=101", "=5", "x=-1"):
        with pytest.raises(ValueError, match="PROFILE=PERCENT"):
            parse_profiles(bad)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_node_kube_rejected_is_not_nominated_again_for_a_while():
    clock = Clock()
    guard = HandOvers(clock)
    guard.handed_over("p", "n7")
    assert guard.nominated_by_berth("p", "n7")
    guard.attempt("p", "n7", ["n7"])  # kube evaluated the nominated node: nothing to learn
    assert guard.excluded("p") == set()
    guard.attempt("p", "n7", ["n1", "n2"])  # kube asked about others: its filters rejected n7
    assert guard.excluded("p") == {"n7"}
    assert not guard.nominated_by_berth("p", "n7")
    clock.now += REJECTED_FOR + 1
    assert guard.excluded("p") == set()


def test_a_pod_is_handed_over_a_bounded_number_of_times_in_the_window():
    clock = Clock()
    guard = HandOvers(clock)
    for i in range(HANDOVERS_AT_MOST):
        assert guard.allowed("p")
        guard.handed_over("p", f"n{i}")
    assert not guard.allowed("p")
    assert guard.allowed("other")
    clock.now += HANDOVER_WINDOW + 1
    assert guard.allowed("p")


def test_a_nomination_berth_did_not_write_is_not_berths():
    guard = HandOvers()
    assert not guard.nominated_by_berth("p", "n1")  # kube-scheduler's own (preemption)
    guard.attempt("p", "n1", ["n2"])
    assert guard.excluded("p") == set()


# -- the extender's filter over a sample ---------------------------------------------------------------


def _placer(nodes: int, *, handed: list, events: list, objects: tuple = ()):
    """A placer on kube's adaptive sample over `nodes` nodes, the last holding a pod tagged db (or over
    `objects`, nodes and pods, when given)."""
    from berth.configure import default_pipeline
    from berth.extender.placer import Placer, Writes
    from berth.extender.serve import SnapshotCluster
    from tests.builders import node, pod, view

    v = view(
        *(
            objects
            or (*(node(f"n{i:03d}") for i in range(nodes)), pod("db", node=f"n{nodes - 1:03d}", tags=["db"]))
        )
    )

    async def nothing(*_):
        return None

    async def nominate(p, node_name):
        handed.append((p.name, node_name))

    async def record(p, evs):
        events.extend((p.name, e.reason, e.message) for e in evs)

    placer = Placer(
        SnapshotCluster(v),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=nothing, record=record, nominate=nominate),
        kube_sample={"berth-scheduler": 0},
    )
    placer.loop = _loop()  # one loop: the writes of the nomination run in the background
    return placer


_loops: list[asyncio.AbstractEventLoop] = []


def _loop() -> asyncio.AbstractEventLoop:
    _loops.append(asyncio.new_event_loop())
    return _loops[-1]


@pytest.fixture(autouse=True)
def _close_loops():
    yield

    async def drained() -> None:  # the writes still waiting, as berth serve's shutdown would
        pending = asyncio.all_tasks() - {asyncio.current_task()}
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    while _loops:
        loop = _loops.pop()
        loop.run_until_complete(drained())
        loop.close()


def _filter(placer, pod_obj, names):
    from berth.extender import wire

    args = wire.ExtenderFilterArgs(pod=msgspec.Raw(orjson.dumps(pod_obj)), node_names=orjson.dumps(names))
    return placer.loop.run_until_complete(placer.filter(args))


def _watch_shows(placer, pod_obj, *, condition=None, nominated=None, wait=0.01):
    """The watch's copy of the pod reaches berth serve: kube-scheduler's record of an attempt (its
    PodScheduled condition) and the nomination as stored; then the background work runs."""
    status = dict(pod_obj.get("status") or {})
    if condition is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "message": condition}]
    if nominated is not None:
        status["nominatedNodeName"] = nominated

    async def shown() -> None:
        placer.pod_seen({**pod_obj, "status": status})  # (the watch calls it on berth serve's loop)
        await asyncio.sleep(wait)

    placer.loop.run_until_complete(shown())


def _wants_db(**status):
    from tests.builders import pod

    body = pod("app", uid="uid-app", affinity={"require_with_tag": ["db"]})
    body["spec"]["schedulerName"] = "berth-scheduler"
    if status:
        body["status"] = {**body["status"], **status}
    return body


def test_a_thin_pod_whose_node_is_outside_the_sample_is_handed_over_to_it():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    sample = [f"n{i:03d}" for i in range(100)]  # kube found 100 feasible nodes and stopped
    answer = _filter(placer, _wants_db(), sample)
    assert answer.error.startswith("berth: n119, outside kube-scheduler's sample (100 of 120 nodes)")
    assert [e[1] for e in events] == ["HandedOver"]
    # not written while kube-scheduler's attempt is under way: its failure handling would clear it
    assert handed == []
    _watch_shows(placer, _wants_db(), condition="berth: something else")
    assert handed == []
    _watch_shows(placer, _wants_db(), condition=answer.error)  # kube recorded the attempt
    assert handed == [("app", "n119")]
    _watch_shows(placer, _wants_db(), condition=answer.error, nominated="n119")
    assert handed == [("app", "n119")]  # written once
    # kube's next attempt evaluates the nominated node alone: berth accepts it.
    again = _filter(placer, _wants_db(nominatedNodeName="n119"), ["n119"])
    assert again.node_names == ["n119"] and len(handed) == 1


def test_the_nomination_is_written_after_a_while_when_kube_records_nothing(monkeypatch):
    import berth.extender.sample as sample_module

    monkeypatch.setattr(sample_module, "WRITE_AFTER_AT_MOST", 0.02)
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(100)])
    assert handed == []
    placer.loop.run_until_complete(asyncio.sleep(0.1))  # kube's condition already said the same
    assert handed == [("app", "n119")]


def test_a_nomination_kube_cleared_is_written_again_a_bounded_number_of_times():
    from berth.extender.sample import REWRITES_AT_MOST

    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    answer = _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(100)])
    _watch_shows(placer, _wants_db(), condition=answer.error)
    for _ in range(REWRITES_AT_MOST + 2):
        _watch_shows(placer, _wants_db(), condition=answer.error, nominated="n119")  # stored
        _watch_shows(placer, _wants_db(), condition=answer.error, nominated="")  # kube cleared it
    assert handed == [("app", "n119")] * (1 + REWRITES_AT_MOST)


def test_pods_handed_over_in_a_burst_are_counted_where_they_were_handed():
    """Two holders with room for one more pod each, one of them far emptier: the second pod of a
    burst, decided before the first is bound, goes to the other holder. Had the first not been
    counted on its node, both would be handed over to the same one, and kube (which counts nominated
    pods there) would reject one."""
    from tests.builders import node, pod

    placer = _placer(
        120,
        handed=[],
        events=[],
        objects=(
            *(node(f"n{i:03d}") for i in range(118)),
            node("n118", pods="2"),
            node("n119", pods="2", cpu="64", memory="256Gi"),  # the emptier: every pod's first choice
            pod("db-1", node="n118", tags=["db"]),
            pod("db-2", node="n119", tags=["db"]),
        ),
    )
    sample = [f"n{i:03d}" for i in range(100)]
    nodes = set()
    for name in ("app-a", "app-b"):
        body = pod(name, uid=f"uid-{name}", affinity={"require_with_tag": ["db"]})
        body["spec"]["schedulerName"] = "berth-scheduler"
        answer = _filter(placer, body, sample)
        nodes.add(answer.error.split(",")[0].removeprefix("berth: "))
    assert nodes == {"n118", "n119"}


def test_a_node_kube_rejected_after_the_hand_over_is_not_nominated_again():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    sample = [f"n{i:03d}" for i in range(100)]
    answer = _filter(placer, _wants_db(), sample)
    _watch_shows(placer, _wants_db(), condition=answer.error)
    # kube's filters refused n119 (berth's model disagreed): the next attempt came with a sample again.
    again = _filter(placer, _wants_db(nominatedNodeName="n119"), sample)
    _watch_shows(placer, _wants_db(), condition="anything", nominated="")
    assert handed == [("app", "n119")]  # not nominated again
    assert again.node_names == [] and again.error in (None, "")


def test_kube_schedulers_own_nomination_is_never_written_over():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    sample = [f"n{i:03d}" for i in range(100)]
    answer = _filter(placer, _wants_db(nominatedNodeName="n005"), sample)  # preemption nominated it there
    _watch_shows(placer, _wants_db(nominatedNodeName="n005"), condition=answer.error or "")
    assert handed == [] and "HandedOver" not in [e[1] for e in events]


def test_a_pod_kube_asked_about_every_feasible_node_is_not_widened():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    answer = _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(99)])  # a full pass: 99 passed
    assert handed == [] and answer.node_names == []


def test_a_pod_without_thin_rules_is_decided_over_the_sample():
    from tests.builders import pod

    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    plain = pod("plain", uid="uid-plain")
    plain["spec"]["schedulerName"] = "berth-scheduler"
    answer = _filter(placer, plain, [f"n{i:03d}" for i in range(100)])
    assert handed == [] and answer.node_names and answer.node_names[0] in {f"n{i:03d}" for i in range(100)}


# -- the property: never refused because of the sample --------------------------------------------------

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def sampled_worlds(draw: st.DrawFn) -> dict:
    """A cluster of 100 to 220 nodes, some tainted (kube's filters refuse them), a few holding a tagged
    pod; a pod that requires the tag, or one without a rule; kube's sample of the nodes its filters
    accept, from a random start as kube's rotating pass would give."""
    count = draw(st.integers(100, 220))
    tainted = set(draw(st.lists(st.integers(0, count - 1), max_size=20)))
    holders = draw(st.lists(st.integers(0, count - 1), max_size=draw(st.sampled_from([4, 140])), unique=True))
    wants = draw(st.booleans())
    start = draw(st.integers(0, count - 1))
    return {"count": count, "tainted": tainted, "holders": holders, "wants": wants, "start": start}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sampled_worlds())
def test_the_sample_never_refuses_a_pod_the_decision_over_every_node_places(world):
    from berth.cluster.convert import pod_from_k8s
    from berth.cluster.placement_record import seed_for
    from berth.configure import default_pipeline
    from berth.engine import decide
    from berth.extender.placer import Placer, Writes
    from berth.extender.serve import SnapshotCluster
    from tests.builders import node, pod, view

    count = world["count"]
    names = [f"n{i:03d}" for i in range(count)]
    noschedule = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    objects = [node(n, taints=noschedule if i in world["tainted"] else None) for i, n in enumerate(names)]
    objects += [pod(f"db-{i}", node=names[i], tags=["db"]) for i in world["holders"]]
    v = view(*objects)
    rules, with_kube = default_pipeline(kube_filters=False), default_pipeline(kube_filters=True)

    async def nothing(*_):
        return None

    def nominating(into: list[tuple[str, str]]) -> Placer:
        """A placer over a world of its own that notes each nomination it writes into `into`."""

        async def nominate(p, node_name):
            into.append((p.name, node_name))

        made = Placer(
            SnapshotCluster(view(*objects)),
            rules=rules,
            with_kube=with_kube,
            writes=Writes(bind=nothing, record=nothing, nominate=nominate),
            kube_sample={"berth-scheduler": 0},
        )
        made.loop = _loop()
        return made

    handed: list[tuple[str, str]] = []
    placer = nominating(handed)
    body = pod("app", uid="uid-app", affinity={"require_with_tag": ["db"]} if world["wants"] else None)
    body["spec"]["schedulerName"] = "berth-scheduler"
    # kube's pass: from its start, the nodes its filters accept, until it has found enough
    accepted = [names[(world["start"] + i) % count] for i in range(count)]
    accepted = [n for n in accepted if int(n[1:]) not in world["tainted"]]
    sample = accepted[: feasible_nodes_to_find(0, count)]
    the_pod = pod_from_k8s(body)
    everywhere = decide(the_pod, v, with_kube, seed=seed_for(the_pod))
    over_sample = decide(the_pod, v, rules, candidates=sample, seed=seed_for(the_pod))
    answer = _filter(placer, body, sample)
    _watch_shows(placer, body, condition=answer.error or "", wait=0)  # kube recorded the attempt
    placer.loop.run_until_complete(asyncio.sleep(0))
    event("handed over" if handed else ("placed in the sample" if answer.node_names else "refused"))
    if handed:
        ((_, node_name),) = handed
        assert node_name not in sample
        assert everywhere.node(node_name).feasible  # a node the decision over every node accepts
        assert answer.error and node_name in answer.error
    elif everywhere.chosen is not None:
        assert answer.node_names, "refused because of the sample"
    if not world["wants"]:  # no thin rule: exactly the decision over the sample
        assert not handed and answer.node_names == [over_sample.chosen]
    # On arrival, before any attempt (a placer of its own): a nomination only where the rules list
    # fewer nodes than kube's minimum and kube samples, always to a node the decision over every node
    # accepts; never none where that decision places the pod.
    early: list[tuple[str, str]] = []
    arrival = nominating(early)
    _watch_shows(arrival, body, wait=0)
    arrival.loop.run_until_complete(asyncio.sleep(0))
    thin_anywhere = (
        world["wants"] and len(world["holders"]) < 100 and feasible_nodes_to_find(0, count) < count
    )
    if early:
        ((_, node_name),) = early
        assert thin_anywhere
        assert everywhere.node(node_name).feasible
    elif thin_anywhere and everywhere.chosen is not None:
        raise AssertionError("a thin pod that fits was not nominated on arrival")


def test_the_preempt_verb_proposes_no_victims_while_a_node_fits_without_evictions():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    import asyncio

    from berth.extender import wire

    urgent = _wants_db()
    urgent["spec"]["priority"] = 1000
    args = wire.ExtenderPreemptionArgs(
        pod=urgent, node_name_to_meta_victims={"n001": wire.MetaVictims(pods=[])}
    )
    assert not asyncio.run(placer.preempt(args)).node_name_to_meta_victims  # n119 fits, no eviction


def test_an_attempt_before_kube_saw_the_nomination_is_not_handed_over_again():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    sample = [f"n{i:03d}" for i in range(100)]
    answer = _filter(placer, _wants_db(), sample)
    _watch_shows(placer, _wants_db(), condition=answer.error)
    # kube tried again at once, its cache without berth's write yet: the same answer in the same words
    # (kube's record of the attempt does not change), no second hand-over, no second write
    again = _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(10, 110) if i != 119])
    assert handed == [("app", "n119")] and [e[1] for e in events] == ["HandedOver"]
    assert again.error == answer.error
    assert _filter(placer, _wants_db(nominatedNodeName="n119"), ["n119"]).node_names == ["n119"]


def test_the_nodes_a_thin_pod_may_go_to_are_listed_from_the_tag_holders():
    """Looking past the sample asks only the nodes require_with_tag lists from its index (the holders),
    not the 5000 others; a rule that cannot list them (a topologyKey, no rule) lists nothing."""
    from berth.cluster.convert import pod_from_k8s
    from berth.configure import default_pipeline
    from berth.engine import indexed_candidates
    from tests.builders import node, pod, view

    v = view(
        *(node(f"n{i:03d}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"}) for i in range(200)),
        pod("db-1", node="n005", tags=["db"]),
        pod("db-2", node="n150", tags=["db", "cache"]),
        pod("elsewhere", namespace="other", node="n007", tags=["db"]),  # another tenant's: not counted
    )
    rules = default_pipeline(kube_filters=False)

    def wanting(affinity):
        return pod_from_k8s(pod("app", uid="uid-app", affinity=affinity))

    assert sorted(indexed_candidates(wanting({"require_with_tag": ["db"]}), v, rules)) == ["n005", "n150"]
    assert indexed_candidates(wanting({"require_with_tag": ["db", "cache"]}), v, rules) == ["n150"]
    assert indexed_candidates(wanting({"require_with_tag": ["nobody"]}), v, rules) == []
    zone = {"require_with_tag": ["db"], "topologyKey": "topology.kubernetes.io/zone"}
    assert indexed_candidates(wanting(zone), v, rules) is None
    assert indexed_candidates(wanting(None), v, rules) is None


def test_a_new_pod_whose_rules_list_too_few_nodes_is_nominated_before_kubes_first_attempt():
    """The holder is the only node its rule lists (fewer than kube's minimum of 100 feasible nodes):
    any sample kube takes is thin for it, so berth nominates the holder's node as soon as the watch
    shows the pod, and kube's first attempt evaluates that node first: no failed attempt, no backoff."""
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    _watch_shows(placer, _wants_db())  # created: kube-scheduler has not tried it yet
    assert handed == [("app", "n119")]
    assert [e[1] for e in events] == ["HandedOver"]
    assert "before kube-scheduler's first attempt" in events[0][2]
    assert placer.cluster.view.pod("default/app").node_name == "n119"  # counted there, as a hand-over is
    _watch_shows(placer, _wants_db(nominatedNodeName="n119"))  # the nomination stored: nothing more
    assert handed == [("app", "n119")]
    first = _filter(placer, _wants_db(nominatedNodeName="n119"), ["n119"])
    assert first.node_names == ["n119"] and len(handed) == 1


def test_an_attempt_that_beat_the_nomination_on_arrival_gets_its_words_or_the_node_in_its_sample():
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    _watch_shows(placer, _wants_db())
    message = "berth: " + events[0][2]
    without = _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(100)])
    assert without.error == message  # the same answer, not a second hand-over
    holding = _filter(placer, _wants_db(), [f"n{i:03d}" for i in range(20, 120)])
    assert holding.node_names == ["n119"]
    assert handed == [("app", "n119")] and [e[1] for e in events] == ["HandedOver"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda b: b["metadata"]["annotations"].clear(), id="no rule"),
        pytest.param(
            lambda b: b["status"].update(conditions=[{"type": "PodScheduled", "status": "False"}]),
            id="kube tried it already",
        ),
        pytest.param(lambda b: b["status"].update(nominatedNodeName="n005"), id="nominated already"),
        pytest.param(lambda b: b["spec"].update(schedulerName="berth-scheduler-exhaustive"), id="every node"),
        pytest.param(lambda b: b["spec"].update(nodeName="n003"), id="bound"),
    ],
)
def test_no_nomination_on_arrival_where_kubes_attempt_decides(body):
    handed, events = [], []
    placer = _placer(120, handed=handed, events=events)
    placer.kube_sample["berth-scheduler-exhaustive"] = 100
    pod_obj = _wants_db()
    body(pod_obj)
    _watch_shows(placer, pod_obj)
    assert handed == [] and events == []


def test_a_pod_is_considered_for_a_nomination_on_arrival_once():
    """Nothing fits it when the watch first shows it (the holder's node is full): it is not decided
    again at each later copy the watch shows before kube's first attempt."""
    from tests.builders import node, pod

    handed, events = [], []
    placer = _placer(
        120,
        handed=handed,
        events=events,
        objects=(
            *(node(f"n{i:03d}") for i in range(119)),
            node("n119", pods="1"),
            pod("db", node="n119", tags=["db"]),
        ),
    )
    decided = []
    looked_past = placer.past_sample.looked_past
    placer.past_sample.looked_past = lambda *a: decided.append(a[0].name) or looked_past(*a)
    for _ in range(3):
        _watch_shows(placer, _wants_db())
    assert decided == ["app"] and handed == []
