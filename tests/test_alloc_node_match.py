"""What the pod asks of a node: traits (the seed's worked examples), platforms and NIC tags."""

from __future__ import annotations

import pytest

from berth.cluster.convert import pod_from_k8s
from berth.configure import build_pipeline
from berth.engine import Kind, decide
from tests.alloc_helpers import chain, cn, feasible, reason_texts, trace, vm
from tests.builders import place, view

CUSTOMER = "9b81f9e7-55e1-4e00-a8f7-917bd054b320"
OTHER = "82c53a64-b19c-4266-bf16-3ee1d34318d2"
TRAITS = chain("hard-filter-traits")


def _traits(pod_traits, *nodes, cfg=TRAITS, **pod_annotations):
    annotations = dict(pod_annotations)
    if pod_traits is not None:
        annotations["berth.dev/traits"] = pod_traits
    return place(vm("new", annotations=annotations), *nodes, cfg=cfg)


@pytest.mark.parametrize(
    ("pod_traits", "node_traits"),
    [
        pytest.param(
            {"customer": CUSTOMER}, {"customer": CUSTOMER}, id="a customer reserving servers by a string"
        ),
        pytest.param({"ssd": True}, {"ssd": True}, id="a boolean"),
        pytest.param(
            {"ssd": False, "manta": True, "customer": CUSTOMER},
            {"ssd": False, "manta": True, "customer": CUSTOMER},
            id="several traits",
        ),
        pytest.param(
            {"customer": CUSTOMER}, {"customer": [CUSTOMER, OTHER]}, id="a string in the node's list"
        ),
        pytest.param(
            {"customer": [CUSTOMER, OTHER]}, {"customer": CUSTOMER}, id="the node's string in the pod's list"
        ),
        pytest.param(
            {"hw": ["richmond-a", "mantis-shrimp"], "ssd": True},
            {"hw": ["richmond-b", "richmond-a"], "ssd": True},
            id="two lists that share a value",
        ),
    ],
)
def test_the_seeds_trait_examples_match(pod_traits, node_traits):
    assert _traits(pod_traits, cn("n1", traits=node_traits)).chosen == "n1"


@pytest.mark.parametrize(
    ("pod_traits", "node_traits", "mismatch"),
    [
        pytest.param({"ssd": True}, {"ssd": False}, "ssd: boolean did not match", id="a different boolean"),
        pytest.param(
            {"customer": CUSTOMER}, {"customer": OTHER}, "customer: strings did not match", id="a string"
        ),
        pytest.param(
            {"customer": CUSTOMER},
            {"customer": [OTHER]},
            "customer: node trait list does not contain the requested value",
            id="a string missing from the node's list",
        ),
        pytest.param(
            {"hw": ["a", "b"]},
            {"hw": ["c"]},
            "hw: node and requested trait lists do not intersect",
            id="two lists without a common value",
        ),
        pytest.param(
            {"ssd": True},
            {"ssd": "yes"},
            "ssd: unsupported combination of trait types",
            id="a boolean against a string",
        ),
        pytest.param(
            {"ssd": True},
            {"ssd": True, "customer": CUSTOMER},
            "node has customer that the pod does not request",
            id="a node with a trait the pod does not ask for",
        ),
        pytest.param({"ssd": True}, {}, "node lacks ssd", id="a node without the trait"),
    ],
)
def test_a_node_whose_traits_do_not_fulfil_the_request_is_removed_naming_the_mismatch(
    pod_traits, node_traits, mismatch
):
    decision = _traits(pod_traits, cn("n1", traits=node_traits))
    [reason] = decision.node("n1").reasons
    assert reason.step == "alloc/hard-filter-traits"
    assert reason.kind is Kind.UNMET
    assert reason.values["mismatch"] == mismatch
    assert decision.error is not None and "no node satisfies the traits" in decision.error.message


def test_a_node_with_traits_takes_only_pods_that_ask_for_them():
    decision = _traits(None, cn("special", traits={"customer": CUSTOMER}), cn("plain"))
    assert decision.chosen == "plain"
    assert reason_texts(decision)["special"] == (
        "alloc/hard-filter-traits: the pod asks for no traits and the node has traits (it takes only pods "
        f'that ask for them) (node_traits={{"customer": "{CUSTOMER}"}})'
    )


def test_image_traits_take_priority_over_pod_traits_which_override_package_traits():
    cfg = chain("hard-filter-traits", packages={"p": {"traits": {"ssd": True, "rack": "r1"}}})
    nodes = [cn("r1", traits={"ssd": False, "rack": "r1"}), cn("r2", traits={"ssd": False, "rack": "r2"})]
    pod_only = _traits({"ssd": False}, *nodes, cfg=cfg, **{"berth.dev/package": "p"})
    assert pod_only.chosen == "r1"  # the package's rack, the pod's ssd
    with_image = _traits(
        {"ssd": False},
        *nodes,
        cfg=cfg,
        **{"berth.dev/package": "p", "berth.dev/image": {"traits": {"rack": "r2"}}},
    )
    assert with_image.chosen == "r2"


def test_a_node_with_a_malformed_traits_annotation_is_removed_saying_so():
    decision = _traits({"ssd": True}, cn("broken", traits="[true]"), cn("ok", traits={"ssd": True}))
    assert decision.chosen == "ok"
    assert reason_texts(decision)["broken"] == (
        "alloc/hard-filter-traits: node annotation berth.dev/traits is malformed: traits should be a JSON "
        "object, not a list"
    )


def _image(requirements):
    return vm("new", annotations={"berth.dev/image": {"requirements": requirements}})


PLATFORMS = chain("hard-filter-platform-versions")


@pytest.mark.parametrize(
    ("kubelet", "passes"),
    [
        pytest.param("v1.33.9", False, id="below the lowest line fails"),
        pytest.param("v1.34.1", False, id="on a listed line below its platform fails"),
        pytest.param("v1.34.2", True, id="on a listed line at its platform passes"),
        pytest.param("v1.34.10", True, id="versions compare by number not as text"),
        pytest.param("v1.35.0", True, id="an unlisted line between the lowest and the highest passes"),
        pytest.param("v1.36.0", False, id="on the highest line below its platform fails"),
        pytest.param("v1.37.0", True, id="above the highest line passes"),
    ],
)
def test_min_platform_follows_the_seeds_rule_on_release_lines(kubelet, passes):
    decision = place(
        _image({"min_platform": {"1.34": "1.34.2", "1.36": "1.36.1"}}),
        cn("n1", kubelet=kubelet),
        cfg=PLATFORMS,
    )
    assert (decision.chosen == "n1") is passes


@pytest.mark.parametrize(
    ("kubelet", "passes"),
    [
        pytest.param("v1.34.0", True, id="below the line passes"),
        pytest.param("v1.35.1", True, id="on the line at its platform passes"),
        pytest.param("v1.35.2", False, id="on the line above its platform fails"),
        pytest.param("v1.36.0", False, id="above a single line fails"),
    ],
)
def test_max_platform_mirrors_min_platform(kubelet, passes):
    decision = place(_image({"max_platform": {"1.35": "1.35.1"}}), cn("n1", kubelet=kubelet), cfg=PLATFORMS)
    assert (decision.chosen == "n1") is passes


def test_a_platform_requirement_failure_names_the_requirement_and_the_nodes_platform():
    decision = place(
        _image({"min_platform": {"1.35": "1.35.2"}}), cn("old", kubelet="v1.35.1"), cfg=PLATFORMS
    )
    assert reason_texts(decision)["old"] == (
        'alloc/hard-filter-platform-versions: image requires min platforms {"1.35": "1.35.2"} '
        "(platform=v1.35.1, line=1.35)"
    )


def test_the_platform_label_overrides_the_kubelet_version_and_stamps_compare_as_times():
    requirement = _image({"min_platform": {"1.35": "20240601T000000Z"}})
    cluster = [
        cn("new-image", kubelet="v1.35.0", labels={"berth.dev/platform": "20240701T000000Z"}),
        cn("old-image", kubelet="v1.35.0", labels={"berth.dev/platform": "20240501T000000Z"}),
        cn("no-label", kubelet="v1.35.0"),
    ]
    decision = place(requirement, *cluster, cfg=PLATFORMS)
    assert feasible(decision) == {"new-image"}
    assert reason_texts(decision)["no-label"].endswith(
        "the node's platform cannot be compared (a stamp against a version) (platform=v1.35.0, line=1.35)"
    )


def test_the_packages_min_platform_applies_too():
    cfg = chain("hard-filter-platform-versions", packages={"p": {"min_platform": {"1.35": "1.35.3"}}})
    decision = place(vm("new", annotations={"berth.dev/package": "p"}), cn("n1", kubelet="v1.35.2"), cfg=cfg)
    assert reason_texts(decision)["n1"].startswith(
        'alloc/hard-filter-platform-versions: package p requires min platforms {"1.35": "1.35.3"}'
    )


def test_feature_min_platform_applies_filter_docker_min_platform_to_every_pod():
    cfg = chain("hard-filter-feature-min-platform", defaults={"filter_docker_min_platform": "1.35.0"})
    decision = place(vm("new"), cn("old", kubelet="v1.34.9"), cn("new", kubelet="v1.35.0"), cfg=cfg)
    assert reason_texts(decision) == {
        "old": "alloc/hard-filter-feature-min-platform: container support requires platform 1.35.0 or newer "
        "(filter_docker_min_platform) (platform=v1.34.9, line=1.34)"
    }
    unset = place(vm("new"), cn("old", kubelet="v1.34.9"), cfg=chain("hard-filter-feature-min-platform"))
    assert trace(unset, "alloc/hard-filter-feature-min-platform").note == (
        "skipped: filter_docker_min_platform is not set"
    )


VLANS = chain("hard-filter-vlans")


def test_vlans_needs_every_nic_tag_the_pod_asks_for_one_of_each_set_of_alternatives():
    new = vm("new", annotations={"berth.dev/nic-tags": ["external", ["admin", "admin2"]]})
    cluster = [
        cn("both", nic_tags=["external", "admin2"]),
        cn("external-only", nic_tags=["external"]),
        cn("none"),
    ]
    decision = place(new, *cluster, cfg=VLANS)
    assert feasible(decision) == {"both"}
    assert reason_texts(decision)["external-only"] == (
        'alloc/hard-filter-vlans: node lacks the NIC tags ["external", ["admin", "admin2"]] '
        '(missing=["admin", "admin2"], node_nic_tags=["external"])'
    )
    assert decision.node("none").reasons[0].kind is Kind.UNMET


def test_vlans_is_skipped_for_a_pod_without_nic_tags():
    decision = place(vm("new"), cn("n1"), cfg=VLANS)
    assert decision.chosen == "n1"
    assert trace(decision, "alloc/hard-filter-vlans").note == "skipped: the pod asks for no NIC tags"


def test_pods_asking_for_different_traits_over_the_same_nodes_each_get_their_own_answer():

    nodes = view(cn("ssd", traits={"ssd": True}), cn("plain"), cn("hdd", traits={"ssd": False}))
    pipeline = build_pipeline(TRAITS, kube_filters=True)
    asked = ["ssd", "plain", "hdd"]  # the same nodes, pod after pod, as the extender asks
    for wanted, fits in [
        (None, {"plain"}),
        ({"ssd": True}, {"ssd"}),
        (None, {"plain"}),
        ({"ssd": False}, {"hdd"}),
    ]:
        annotations = {"berth.dev/traits": wanted} if wanted is not None else {}
        decision = decide(pod_from_k8s(vm("new", annotations=annotations)), nodes, pipeline, candidates=asked)
        assert feasible(decision) == fits, wanted
