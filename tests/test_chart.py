"""The chart's files: values documented and valid, the CRDs shared with manifests/, the generated
scheduler configuration, and the objects `helm template` renders from them (with the helm the end-to-end
suite builds; skipped without it). Linting and the API server are e2e/test_chart_e2e.py's."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import berth

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts/berth"
sys.path.insert(0, str(ROOT / "charts"))
import render_chart  # noqa: E402


def values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def schema() -> dict:
    return json.loads((CHART / "values.schema.json").read_text())


def test_every_value_is_documented_in_values_yaml():
    assert render_chart.undocumented_values() == []


def test_the_readme_values_table_is_generated_from_values_yaml():
    assert (CHART / "README.md").read_text() == render_chart.readme(), "run python charts/render_chart.py"


def test_the_default_values_satisfy_the_schema():
    jsonschema.validate(values(), schema())


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"scheduler": {"replicas": "two"}}, id="a number given as a word"),
        pytest.param({"scheduler": {"nmae": "x"}}, id="a misspelt key"),
        pytest.param({"webhook": {"failurePolicy": {"pods": "Sometimes"}}}, id="an unknown failure policy"),
        pytest.param({"webhook": {"timeoutSeconds": 45}}, id="a webhook timeout over the API server's 30s"),
        pytest.param(
            {"extender": {"httpTimeout": "ten seconds"}}, id="a duration kube-scheduler cannot read"
        ),
        pytest.param({"scheduler": {"name": "Berth_Scheduler"}}, id="a scheduler name that is no DNS label"),
    ],
)
def test_the_schema_refuses_values_that_cannot_work(override):
    merged = values()
    for key, value in override.items():
        merged[key] = {**merged[key], **value}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(merged, schema())


def test_the_chart_and_manifests_hold_the_same_crds():
    chart_crds = sorted(p.name for p in (CHART / "crds").iterdir())
    assert chart_crds == sorted(p.name for p in (ROOT / "manifests/crds").iterdir())
    for name in chart_crds:
        assert (CHART / "crds" / name).read_bytes() == (ROOT / "manifests/crds" / name).read_bytes(), name


def test_the_chart_installs_this_version_of_berth():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == berth.__version__


def test_the_generated_scheduler_configuration_keeps_what_berth_relies_on():
    text = render_chart.SCHEDULER_CONFIG.read_text()
    assert text.startswith("# Generated from charts/berth")
    config = yaml.safe_load(text)
    # kube's adaptive sample, and a profile that asks about every node (docs/extender.md)
    assert config["percentageOfNodesToScore"] == 0
    assert config["profiles"] == [
        {"schedulerName": "berth-scheduler", "plugins": {"score": {"disabled": [{"name": "*"}]}}},
        {
            "schedulerName": "berth-scheduler-exhaustive",
            "percentageOfNodesToScore": 100,
            "plugins": {"score": {"disabled": [{"name": "*"}]}},
        },
    ]
    (extender,) = config["extenders"]
    assert extender["urlPrefix"].startswith("http://127.0.0.1:")
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"]) == (
        "filter",
        "prioritize",
        "bind",
    )
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is False
    assert config["leaderElection"]["resourceName"] == "berth-scheduler"


# -- the chart rendered by helm (the one e2e/build-controlplane.sh builds, built on first use) ----------
@pytest.fixture
def helm(monkeypatch):
    monkeypatch.setenv("BERTH_HELM", render_chart.helm_binary())

    def render(*args: str) -> list[dict]:
        return render_chart.documents(render_chart.render("--namespace", "berth-system", *args))

    return render


def _one(objects: list[dict], kind: str, suffix: str = "") -> dict:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, (kind, suffix, [o["metadata"]["name"] for o in found])
    return found[0]


def _pod_spec(objects: list[dict], suffix: str) -> dict:
    return _one(objects, "Deployment", suffix)["spec"]["template"]["spec"]


def _container(objects: list[dict], suffix: str, name: str) -> dict:
    return next(c for c in _pod_spec(objects, suffix)["containers"] if c["name"] == name)


def test_the_chart_needs_kubernetes_1_28_for_the_webhooks_match_conditions():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.28.0-0"


def test_helm_refuses_a_cluster_older_than_1_28(helm):
    result = render_chart.helm("template", "berth", str(CHART), "--kube-version", "v1.27.9", check=False)
    assert result.returncode != 0 and "incompatible with Kubernetes v1.27.9" in result.stderr


@pytest.mark.parametrize(
    ("cluster", "tag"),
    [
        ("v1.36.3", "v1.36.3"),
        ("v1.30.4-eks-a737599", "v1.30.4"),
        ("v1.29.1+k3s1", "v1.29.1"),
        ("1.31.2", "v1.31.2"),
    ],
)
def test_kube_scheduler_runs_the_clusters_version_without_a_vendor_suffix(helm, cluster, tag):
    image = _container(helm("--kube-version", cluster), "-scheduler", "kube-scheduler")["image"]
    assert image == f"registry.k8s.io/kube-scheduler:{tag}"


def test_a_render_without_a_cluster_or_a_kube_version_refuses_to_guess_the_scheduler(helm):
    # helm template with no --kube-version: helm's own default, not the cluster's
    result = render_chart.helm("template", "berth", str(CHART), "--namespace", "berth-system", check=False)
    assert result.returncode != 0
    assert "the Kubernetes version is helm's own default" in result.stderr
    assert "pass --kube-version" in result.stderr and "scheduler.image.tag" in result.stderr
    tagged = render_chart.helm(
        "template", "berth", str(CHART), "--set", "scheduler.image.tag=v1.35.2", check=False
    )
    assert tagged.returncode == 0 and "registry.k8s.io/kube-scheduler:v1.35.2" in tagged.stdout


def test_a_kube_scheduler_tag_given_overrides_the_clusters_version(helm):
    objects = helm("--kube-version", "v1.36.3", "--set", "scheduler.image.tag=v1.35.2")
    assert _container(objects, "-scheduler", "kube-scheduler")["image"].endswith(":v1.35.2")


def test_the_scheduler_runs_at_the_priority_of_the_clusters_own_scheduler(helm):
    assert _pod_spec(helm(), "-scheduler")["priorityClassName"] == "system-cluster-critical"


def test_two_operator_replicas_with_peering_and_a_budget_that_keeps_one(helm):
    objects = helm()
    operator = _one(objects, "Deployment", "-operator")
    assert operator["spec"]["replicas"] == 2
    args = _container(objects, "-operator", "operator")["args"]
    assert "--peering=berth" in args and not any(a.startswith("--priority") for a in args)
    assert _one(objects, "PodDisruptionBudget", "-operator")["spec"]["maxUnavailable"] == 1


def test_the_operator_checks_pods_against_the_allocator_configuration_berth_serve_schedules_with(helm):
    """The webhook refuses a pod naming a package the configuration does not define, as scheduling
    would (a 400): the operator reads the same ConfigMap as berth serve, and restarts when it changes."""
    from berth.operator.handlers import check_pod_object
    from berth.vocab.alloc.config import parse_config

    objects = helm("--set-json", 'allocator.config={"packages":{"small":{"max_physical_memory":512}}}')
    operator = _container(objects, "-operator", "operator")
    assert "--config=/etc/berth/allocator.yaml" in operator["args"]
    mounted = {m["mountPath"]: m["name"] for m in operator["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod_spec(objects, "-operator")["volumes"]}
    served = {v["name"]: v for v in _pod_spec(objects, "-scheduler")["volumes"]}
    extender = {
        m["mountPath"]: m["name"] for m in _container(objects, "-scheduler", "extender")["volumeMounts"]
    }
    assert volumes[mounted["/etc/berth"]] == served[extender["/etc/berth"]]
    configmap = _one(objects, "ConfigMap", volumes[mounted["/etc/berth"]]["configMap"]["name"])
    config = parse_config(yaml.safe_load(configmap["data"]["allocator.yaml"]))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "x", "annotations": {"berth.dev/package": "large"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    problems, _ = check_pod_object(pod, config)
    assert problems and 'unknown package "large"' in problems[0]

    def checksum(rendered: list[dict]) -> str:
        return _one(rendered, "Deployment", "-operator")["spec"]["template"]["metadata"]["annotations"][
            "checksum/allocator-config"
        ]

    assert checksum(objects) != checksum(helm())


def _berth_metric_names() -> set[str]:
    """Every series name berth's extender exports (a histogram's and a counter's included)."""
    from berth.configure import default_pipeline
    from berth.extender.app import build_extender
    from berth.extender.placer import Writes
    from berth.extender.serve import SnapshotCluster
    from tests.builders import view

    app = build_extender(
        SnapshotCluster(view()),
        rules=default_pipeline(kube_filters=False),
        with_kube=default_pipeline(kube_filters=True),
        writes=Writes(bind=None, record=None),
    )
    registry = app.state.metrics.registry
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    return {f.name + suffix for f in registry.collect() for suffix in suffixes[f.type]}


# Series from elsewhere that the alerts and the dashboard read: Prometheus's own `up`, and
# kube-scheduler's (berth-scheduler's own queue and lease; checked against a running kube-scheduler in
# e2e/test_chart_e2e.py).
OTHER_SERIES = {"up", "leader_election_master_status", "scheduler_pending_pods"}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def _series(expression: str) -> set[str]:
    return set(SELECTOR.findall(expression))


def test_the_metrics_port_is_the_only_extender_port_and_the_verbs_stay_on_loopback(helm):
    objects = helm()
    extender = _container(objects, "-scheduler", "extender")
    assert "--host=127.0.0.1" in extender["args"] and "--metrics-port=10261" in extender["args"]
    assert extender["ports"] == [{"name": "metrics", "containerPort": 10261, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert extender[probe]["httpGet"] == {"path": path, "port": "metrics", "scheme": "HTTPS"}
    service = _one(objects, "Service", "-scheduler")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"https": 10259, "metrics": 10261}
    reader = _one(objects, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    rules = _one(objects, "ClusterRole", "-extender")["rules"]
    assert {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    } in rules
    assert {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    } in rules
    assert not [o for o in objects if o["kind"] in ("NetworkPolicy", "ServiceMonitor", "PrometheusRule")]


def test_readers_are_bound_to_the_metrics_reader_role(helm):
    subject = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    objects = helm("--set-json", f"metrics.readers=[{json.dumps(subject)}]")
    binding = _one(objects, "ClusterRoleBinding", "-metrics-reader")
    assert binding["roleRef"]["name"] == "berth-metrics-reader" and binding["subjects"] == [subject]


def test_the_network_policy_opens_only_the_secure_port_and_the_metrics_port(helm):
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    objects = helm(
        "--set",
        "extender.networkPolicy.enabled=true",
        "--set-json",
        f"extender.networkPolicy.from={json.dumps(peers)}",
    )
    ingress = _one(objects, "NetworkPolicy", "-scheduler")["spec"]["ingress"]
    assert ingress == [
        {"ports": [{"port": 10259, "protocol": "TCP"}]},
        {"ports": [{"port": 10261, "protocol": "TCP"}], "from": peers},
    ]


def test_the_service_monitor_scrapes_both_ports_over_https_with_a_token(helm):
    monitor = _one(helm("--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    endpoints = monitor["spec"]["endpoints"]
    assert [e["port"] for e in endpoints] == ["metrics", "https"]
    for endpoint in endpoints:
        assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
        assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_the_removed_listen_address_is_refused_with_what_to_do_instead(helm):
    result = render_chart.helm(
        "template", "berth", str(CHART), "--set", "extender.listenAddress=0.0.0.0", check=False
    )
    assert result.returncode != 0
    assert "extender.listenAddress (0.0.0.0) is gone" in result.stderr and "metricsPort" in result.stderr
    helm("--set", "extender.listenAddress=127.0.0.1")  # the old default, as --reuse-values carries it


def test_the_alerts_and_the_dashboard_are_rendered_only_when_asked_for(helm):
    objects = helm()
    assert not [o for o in objects if o["kind"] == "PrometheusRule"]
    assert not [o for o in objects if o["metadata"]["name"].endswith("-dashboard")]
    objects = helm("--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true")
    assert _one(objects, "PrometheusRule")
    dashboard = _one(objects, "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_every_alert_names_its_series_and_each_is_one_berth_or_kube_scheduler_exports(helm):
    rule = _one(helm("--set", "metrics.prometheusRule.enabled=true"), "PrometheusRule")
    alerts = {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert set(alerts) == {
        "BerthSchedulerNoLeader",
        "BerthExtenderDown",
        "BerthExtenderNotReady",
        "BerthFilterErrors",
        "BerthBindsRefusedOrFailed",
        "BerthCacheLagging",
        "BerthPodsPendingTooLong",
    }
    known = _berth_metric_names() | OTHER_SERIES
    for name, expression in alerts.items():
        series = _series(expression)
        assert series, name
        assert series <= known, (name, series - known)
        # this release's series only
        assert 'namespace="berth-system",job="berth-scheduler"' in expression, name


def test_every_dashboard_query_reads_series_berth_or_kube_scheduler_exports(helm):
    dashboard = _one(helm("--set", "metrics.dashboard.enabled=true"), "ConfigMap", "-dashboard")
    panels = json.loads(dashboard["data"]["berth.json"])["panels"]
    titles = " ".join(p["title"] for p in panels).lower()
    for topic in ("decisions", "latency", "binds", "cache lag", "pending"):
        assert topic in titles
    known = _berth_metric_names() | OTHER_SERIES
    for panel in panels:
        for target in panel["targets"]:
            series = _series(target["expr"])
            assert series and series <= known, (panel["title"], series - known)


def test_berth_serve_is_told_the_sample_kube_scheduler_is_configured_with(helm):
    for values, told in (
        ((), "berth-scheduler=0,berth-scheduler-exhaustive=100"),
        (
            ("--set", "scheduler.percentageOfNodesToScore=100"),
            "berth-scheduler=100,berth-scheduler-exhaustive=100",
        ),
        (
            ("--set", "scheduler.percentageOfNodesToScore=20", "--set", "scheduler.exhaustiveProfile=false"),
            "berth-scheduler=20",
        ),
    ):
        objects = helm(*values)
        deployment = next(
            o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-scheduler")
        )
        (extender,) = [
            c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "extender"
        ]
        assert f"--kube-sample={told}" in extender["args"]
        config_map = next(
            o
            for o in objects
            if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("scheduler-config")
        )
        config = yaml.safe_load(config_map["data"]["config.yaml"])
        profiles = {
            p["schedulerName"]: p.get("percentageOfNodesToScore", config["percentageOfNodesToScore"])
            for p in config["profiles"]
        }
        assert ",".join(f"{k}={v}" for k, v in profiles.items()) == told
