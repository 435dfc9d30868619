"""The operator's handlers, called directly as kopf would call them."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl

import kopf
import pytest

from berth.certs import self_signed
from berth.cluster.kubeapi import ApiError
from berth.operator import handlers, refresh
from berth.operator.cache import OperatorCache
from berth.operator.handlers import (
    check_pod_object,
    ready_condition,
    reconcile,
    stale_counts,
    use_allocator_config,
    validate_pod,
    validate_policy,
)
from berth.operator.logs import AdmissionRefusals
from berth.vocab.policy import load_policy
from tests.builders import node, pod


def _policy(tree, selector=None, name="p", generation=3):
    spec = {"policy": tree}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": "shop", "generation": generation},
        "spec": spec,
    }


def test_a_valid_policy_is_ready_with_its_generation():
    condition = ready_condition(load_policy(_policy({"type": "ONE_PER_HOST"})), 3, None)
    assert condition["type"] == "Ready" and condition["status"] == "True"
    assert condition["reason"] == "Compiled" and condition["observedGeneration"] == 3
    assert condition["lastTransitionTime"]


def test_the_status_is_written_at_its_root_where_kubectl_wait_and_the_columns_read_it(monkeypatch):
    """kopf would store a returned value under status.reconcile; the handler patches the root."""
    monkeypatch.setattr(handlers, "_cache", _listed())
    told = []
    monkeypatch.setattr(kopf, "info", lambda _body, reason, message: told.append(reason))
    body = _policy({"type": "ONE_PER_HOST"}, selector={"matchLabels": {"app": "web"}})
    patch = kopf.Patch()
    returned = reconcile(
        body=body,
        meta=body["metadata"],
        status={},
        namespace="shop",
        name="p",
        patch=patch,
        reason="create",
    )
    assert returned is None
    assert patch["status"]["conditions"][0]["type"] == "Ready"
    assert patch["status"]["conditions"][0]["status"] == "True"
    assert patch["status"]["observedGeneration"] == 3
    assert patch["status"]["governedPods"] == 0 and patch["status"]["violatingPods"] == 0
    assert told == ["Compiled"]


def test_a_policy_found_before_the_cluster_is_listed_is_counted_by_the_refresh_once_it_is(monkeypatch):
    # Counted over a cache still listing, its counts would be wrong until the next change.
    monkeypatch.setattr(handlers, "_cache", _cache(pod("a", namespace="shop", node="n1")))  # not synced
    monkeypatch.setattr(kopf, "info", lambda *_, **__: None)
    refresh._marked.clear()
    body = _policy({"type": "ONE_PER_HOST"}, selector={})
    patch = kopf.Patch()
    reconcile(body=body, meta=body["metadata"], status={}, namespace="shop", name="p", patch=patch)
    assert patch["status"]["conditions"][0]["status"] == "True"
    assert "governedPods" not in patch["status"] and refresh.take(["shop", "bank"]) == ["shop"]


def test_an_invalid_policy_is_not_ready_with_the_field_path_and_rule():
    condition = ready_condition(load_policy(_policy({"type": "MAX_N_PER_HOST", "max": 65})), 4, None)
    assert condition["status"] == "False" and condition["reason"] == "Invalid"
    assert condition["message"].startswith("spec.policy.max")


def test_the_transition_time_is_kept_while_the_status_does_not_change():
    compiled = load_policy(_policy({"type": "ANY"}))
    first = ready_condition(compiled, 1, None)
    previous = {**first, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert ready_condition(compiled, 2, previous)["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    broken = load_policy(_policy({"type": "MATCH_TAG"}))
    assert ready_condition(broken, 3, previous)["lastTransitionTime"] != "2026-01-01T00:00:00Z"


def _cache(*objects, mark=lambda namespace: None) -> OperatorCache:
    """The operator's cache, fed the objects as its reflector would."""
    cache = OperatorCache(None, mark=mark)  # type: ignore[arg-type]
    for obj in objects:
        (cache._apply_pod if obj["kind"] == "Pod" else cache._apply_node)(obj)
    return cache


def _listed(*objects) -> OperatorCache:
    """A cache that has listed the cluster (its reflectors synced)."""
    cache = _cache(*objects)
    for reflector in cache.reflectors:
        reflector.synced.set()
    return cache


def _web(name, node_name, **extra):
    return pod(name, namespace="shop", node=node_name, labels={"app": "web", **extra})


def test_the_status_counts_running_governed_pods_and_those_the_policy_refuses_where_they_are():
    body = _policy({"type": "ONE_PER_HOST"}, {"matchLabels": {"app": "web"}}, name="web-policy")
    cache = _cache(
        node("n1"),
        node("n2"),
        _web("a", "n1", **{"app.kubernetes.io/name": "web"}),
        _web("b", "n1", **{"app.kubernetes.io/name": "web"}),
        _web("c", "n2", **{"app.kubernetes.io/name": "web"}),
        pod("d", namespace="shop", node="n2", labels={"app": "db", "app.kubernetes.io/name": "db"}),
        pod("e", namespace="shop", labels={"app": "web", "app.kubernetes.io/name": "web"}),  # pending
        pod(
            "f",
            namespace="shop",
            node="n2",
            labels={"app": "db", "app.kubernetes.io/name": "web"},
            annotations={"berth.dev/placement-policy": "web-policy"},
        ),
        pod("g", namespace="other", node="n1", labels={"app": "web", "app.kubernetes.io/name": "web"}),
    )
    policies = {"shop": [refresh.policy_record(body)]}
    # a, b and c match the selector, f names the policy; a and b share n1, c and f share n2: one pod
    # too many on each (b and f, the younger of each pair), as `berth audit` counts.
    assert stale_counts(["shop"], policies, cache.pods_of, cache.nodes) == [
        ("shop", "web-policy", {"governedPods": 4, "violatingPods": 2})
    ]
    policies["shop"][0]["status"] = {"governedPods": 4, "violatingPods": 2}
    assert stale_counts(["shop", "other"], policies, cache.pods_of, cache.nodes) == []  # nothing to write
    cache._forget_pod("shop/b")
    cache._forget_pod("shop/f")
    assert stale_counts(["shop"], policies, cache.pods_of, cache.nodes) == [
        ("shop", "web-policy", {"governedPods": 2, "violatingPods": 0})
    ]


def test_no_handler_makes_kopf_put_a_finalizer_on_placement_policies():
    # A timer, a daemon or a mandatory on-delete handler would: nothing would remove it once the
    # operator is uninstalled, and deleting the CRD would hang.
    registry = kopf.get_default_registry()
    assert not registry._spawning.get_all_handlers()
    assert not [h for h in registry._changing.get_all_handlers() if h.requires_finalizer]


def test_the_refresh_recounts_only_the_namespaces_whose_pods_changed_or_all_after_a_node_did():
    refresh._marked.clear()
    cache = _cache(mark=refresh.mark)
    cache._apply_pod(pod("a", namespace="shop"))
    assert refresh.take(["shop", "bank"]) == ["shop"]
    assert refresh.take(["shop", "bank"]) == []  # taken
    cache._apply_pod(pod("a", namespace="shop"))  # the same pod again: nothing a count reads changed
    assert refresh.take(["shop", "bank"]) == []
    cache._apply_node(node("n9"))
    assert refresh.take(["shop", "bank"]) == ["bank", "shop"]
    cache._apply_node(node("n9"))  # a heartbeat
    assert refresh.take(["shop", "bank"]) == []


def test_the_refresh_patches_the_stale_counts_and_skips_a_policy_deleted_meanwhile():
    written = []

    class Client:
        async def patch(self, path, body):
            if "gone" in path:
                raise ApiError("not found", status=404)
            written.append((path, body))

    def stale(namespaces):
        return [(ns, name, {"governedPods": 1}) for ns in namespaces for name in ("p", "gone")]

    patched = asyncio.run(refresh.refresh_once(Client(), stale, ["shop"]))
    assert patched == 1
    assert written == [(refresh.status_path("shop", "p"), {"status": {"governedPods": 1}})]


def test_the_policy_webhook_refuses_an_invalid_policy_with_a_400_naming_the_field():
    with pytest.raises(kopf.AdmissionError) as info:
        validate_policy(
            body=_policy({"type": "RULE_BASED", "rule": "ctx.allocation.node.hostname =="}), warnings=[]
        )
    assert info.value.code == 400
    assert "spec.policy.rule" in str(info.value)
    validate_policy(body=_policy({"type": "NO_TAG"}), warnings=[])  # a valid one passes


def test_the_policy_webhook_refuses_a_rule_whose_result_is_not_a_boolean():
    # Admitted, it would be Ready and every pod it governs would stay Pending, each node "returned string".
    with pytest.raises(kopf.AdmissionError) as info:
        validate_policy(
            body=_policy({"type": "RULE_BASED", "rule": "ctx.allocation.node.hostname"}), warnings=[]
        )
    assert info.value.code == 400
    assert str(info.value) == "spec.policy.rule: must return a boolean, it returns string"
    validate_policy(
        body=_policy({"type": "RULE_BASED", "rule": 'ctx.allocation.node.hostname != "a"'}), warnings=[]
    )


def test_the_pod_webhook_refuses_bad_annotations_and_warns_on_the_weighted_form():
    with pytest.raises(kopf.AdmissionError) as info:
        validate_pod(body=pod("p", affinity={"prefer_with_tag": ["a"], "b": 1}), warnings=[])
    assert info.value.code == 400 and 'affinity keys ["b"]' in str(info.value)
    warnings: list[str] = []
    validate_pod(body=_berth(pod("p", affinity={"web": -3})), warnings=warnings)
    assert len(warnings) == 1 and '{"prefer_without_tag": ["web"]}' in warnings[0]


def _berth(obj: dict) -> dict:
    obj["spec"]["schedulerName"] = "berth-scheduler"
    return obj


def test_the_pod_webhook_warns_when_no_berth_scheduler_would_read_the_pod_s_rules():
    warnings: list[str] = []
    misspelt = pod("p", tags=["web"], affinity={"require_without_tag": ["web"]})
    misspelt["spec"]["schedulerName"] = "berth-schedular"
    validate_pod(body=misspelt, warnings=warnings)
    assert warnings == [
        "spec.schedulerName: berth-schedular is not one of berth's schedulers (berth-scheduler, "
        "berth-scheduler-exhaustive), so berth.dev/affinity, berth.dev/tags are ignored: set "
        "spec.schedulerName to one of them for berth to place the pod"
    ]
    warnings.clear()
    validate_pod(body=_berth(pod("p", tags=["web"])), warnings=warnings)  # berth's: nothing to say
    validate_pod(body=pod("p"), warnings=warnings)  # no berth rule: nothing ignored
    assert warnings == []
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"annotations": {"berth.dev/tags": '["web"]'}}, "spec": {}}},
    }
    validate_pod(body=deployment, warnings=warnings)  # the template's default scheduler
    assert len(warnings) == 1 and warnings[0].startswith("spec.schedulerName: default-scheduler is not")


def test_a_policy_whose_selector_matches_no_pod_of_its_namespace_is_admitted_with_a_warning(monkeypatch):
    web = pod("web-1", namespace="shop", node="n1", labels={"app": "web"})
    monkeypatch.setattr(handlers, "_cache", _listed(node("n1"), web))
    warnings: list[str] = []
    validate_policy(
        body=_policy({"type": "ONE_PER_HOST"}, {"matchLabels": {"app": "web"}}), warnings=warnings
    )
    assert warnings == []
    typo = _policy({"type": "ONE_PER_HOST"}, {"matchLabels": {"app": "wbe"}})
    validate_policy(body=typo, warnings=warnings)
    assert len(warnings) == 1 and warnings[0].startswith("spec.selector matches no pod of namespace shop now")
    warnings.clear()
    validate_policy(body=typo, warnings=warnings, operation="UPDATE")  # said at creation only
    assert warnings == []


def test_the_pod_webhook_warns_on_a_misspelt_annotation_with_the_one_it_likely_meant():
    warnings: list[str] = []
    validate_pod(body=pod("p", annotations={"berth.dev/afinity": "{}"}), warnings=warnings)
    assert warnings == [
        "annotation berth.dev/afinity is not one berth reads (did you mean berth.dev/affinity?)"
    ]


def test_the_workload_webhook_warns_on_berth_annotations_outside_the_pod_template():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "x", "annotations": {"berth.dev/tags": '["web"]'}},
        "spec": {"template": {"spec": {"schedulerName": "berth-scheduler", "containers": []}}},
    }
    warnings: list[str] = []
    validate_pod(body=deployment, warnings=warnings)
    assert warnings == [
        'metadata.annotations["berth.dev/tags"]: on the Deployment itself, where berth never reads it: '
        "only the pod template's annotations reach the pods; move it to spec.template.metadata.annotations"
    ]


def test_workloads_are_checked_through_their_pod_template():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "x"},
        "spec": {"template": {"metadata": {"annotations": {"berth.dev/tags": json.dumps([""])}}, "spec": {}}},
    }
    problems, _ = check_pod_object(deployment)
    assert problems and problems[0].startswith("annotation berth.dev/tags")
    assert check_pod_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) == ([], [])


def test_the_webhook_refuses_what_scheduling_refuses_an_images_ram_bounds_against_the_limits():
    def pod(memory: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "x",
                "annotations": {"berth.dev/image": json.dumps({"requirements": {"min_ram": 1024}})},
            },
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"memory": memory}}}]
            },
        }

    problems, _ = check_pod_object(pod("512Mi"))
    assert problems == [
        "annotation berth.dev/image: requirements.min_ram is 1024 MiB but the pod's RAM (memory limit) "
        "is 512 MiB"
    ]
    # The same text the extender gives at scheduling, as a 400.
    from berth.errors import InvalidAnnotation
    from berth.vocab.pod import compile_pod
    from tests.builders import to_pod

    with pytest.raises(InvalidAnnotation) as refused:
        compile_pod(to_pod(pod("512Mi")))
    assert problems[0] in str(refused.value)
    assert check_pod_object(pod("2Gi")) == ([], [])


def test_self_signed_certificates_serve_tls_for_the_named_hosts(tmp_path):
    files = self_signed(tmp_path, ["127.0.0.1", "berth-operator.berth.svc"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert, files.key)  # the pair matches
    client = ssl.create_default_context(cafile=str(files.ca))  # the CA is a CA
    assert client.cert_store_stats()["x509_ca"] == 1
    assert oct(files.key.stat().st_mode & 0o777) == "0o600"


def test_the_webhook_knows_the_packages_berth_serve_schedules_with():
    """An unknown package, or limits that break a package's RAM bounds, are refused at admission with
    the text scheduling gives as a 400, given the same allocator configuration (`berth operator
    --config`); without one, berth's defaults define no package, for the webhook as for berth serve."""
    from berth.configure import build_pipeline
    from berth.errors import InvalidAnnotation
    from berth.vocab.alloc.config import parse_config
    from tests.builders import to_pod

    config = parse_config({"packages": {"small": {"max_physical_memory": 512}}})

    def pod(package: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "x", "annotations": {"berth.dev/package": package}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }

    assert check_pod_object(pod("small"), config) == ([], [])
    problems, _ = check_pod_object(pod("large"), config)
    assert problems == [
        'annotation berth.dev/package: unknown package "large" (the allocator configuration defines: small)'
    ]
    with pytest.raises(InvalidAnnotation) as refused:
        build_pipeline(config, kube_filters=False).compile_pod(to_pod(pod("large")))
    assert problems[0] in str(refused.value)

    # The webhook handler checks with what `berth operator --config` loaded; without it, the defaults.
    with pytest.raises(kopf.AdmissionError, match="unknown package"):
        validate_pod(body=pod("small"), warnings=[])
    use_allocator_config(config)
    try:
        validate_pod(body=pod("small"), warnings=[])
        with pytest.raises(kopf.AdmissionError, match='unknown package "large"'):
            validate_pod(body=pod("large"), warnings=[])
    finally:
        use_allocator_config(None)


def test_a_manifest_refused_at_admission_is_logged_at_info_with_the_object_and_the_rule(caplog):
    logger = logging.getLogger("kopf.objects")
    refusals = AdmissionRefusals()
    logger.addFilter(refusals)
    try:
        ref = {"kind": "Pod", "namespace": "shop", "name": "web-1"}
        with caplog.at_level(logging.INFO, logger="kopf.objects"):
            logger.error(
                "Webhook 'pod-annotations' failed permanently: annotation berth.dev/tags: not JSON",
                extra={"k8s_ref": ref},
            )
            logger.error("Handler 'reconcile' failed permanently: boom", extra={"k8s_ref": ref})
    finally:
        logger.removeFilter(refusals)
    refused, failed = caplog.records[-2:]
    assert refused.levelname == "INFO"
    assert refused.getMessage() == (
        "refused Pod shop/web-1 at admission (webhook pod-annotations): annotation berth.dev/tags: not JSON"
    )
    assert failed.levelname == "ERROR"  # a handler that fails is still an error
