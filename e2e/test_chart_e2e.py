"""The chart: helm lint and helm template, the generated files, and the rendered objects on a real API
server (the session cluster applied them with `kubectl apply --server-side`, see conftest.py)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import CHART_NAMESPACE, SCHEDULER, Chart, render_chart
from kopf._cogs.structs import references
from kopf._core.engines.admission import build_webhooks
from kopf._core.intents import registries

import berth.operator.handlers  # noqa: F401  (registers the webhook handlers)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return render_chart.helm(*args, check=check)


def rendered(*args: str) -> Chart:
    return Chart(render_chart.render("--namespace", CHART_NAMESPACE, *args))


def test_helm_lint_finds_nothing_wrong_with_the_chart(cluster):
    result = helm("lint", "--strict", str(render_chart.CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_the_files_generated_from_the_chart_are_up_to_date(cluster):
    assert render_chart.stale() == [], "run python charts/render_chart.py"


def test_by_default_helm_generates_the_webhook_certificate_for_the_service(cluster):
    chart = rendered()
    secret = chart.named("Secret", "-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    webhooks = chart.of_kind("ValidatingWebhookConfiguration")[0]["webhooks"]
    assert {w["clientConfig"]["caBundle"] for w in webhooks} == {secret["data"]["ca.crt"]}
    assert not chart.of_kind("Certificate")
    cert = base64.b64decode(secret["data"]["tls.crt"])
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=cert, capture_output=True, check=True
    ).stdout.decode()
    assert f"DNS:berth-operator-webhook.{CHART_NAMESPACE}.svc" in text


def test_with_cert_manager_the_chart_asks_it_for_the_certificate_and_its_ca(cluster):
    chart = rendered("--api-versions", "cert-manager.io/v1")
    assert not chart.of_kind("Secret")
    serving = chart.named("Certificate", "-webhook")
    assert serving["spec"]["secretName"] == "berth-webhook-tls"
    assert f"berth-operator-webhook.{CHART_NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    assert chart.named("Certificate", "-webhook-ca")["spec"]["isCA"] is True
    config = chart.of_kind("ValidatingWebhookConfiguration")[0]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{CHART_NAMESPACE}/berth-webhook"
    )
    assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])


def test_a_provided_secret_and_ca_bundle_replace_the_generated_certificate(cluster):
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    chart = rendered(
        "--set",
        "webhook.certificate.mode=secret",
        "--set",
        "webhook.certificate.secretName=my-tls",
        "--set",
        f"webhook.certificate.caBundle={bundle}",
    )
    assert not chart.of_kind("Secret") and not chart.of_kind("Certificate")
    volumes = chart.named("Deployment", "-operator")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-tls", "secret": {"secretName": "my-tls"}} in volumes
    webhooks = chart.of_kind("ValidatingWebhookConfiguration")[0]["webhooks"]
    assert {w["clientConfig"]["caBundle"] for w in webhooks} == {bundle}


def test_without_peering_one_operator_runs_standalone_and_needs_no_peering_rights(cluster):
    chart = rendered("--set", "operator.peering.enabled=false", "--set", "operator.replicas=1")
    assert "--standalone" in chart.container("-operator", "operator")["args"]
    assert not chart.of_kind("ClusterKopfPeering")
    rules = chart.named("ClusterRole", "-operator")["rules"]
    assert all("kopf.dev" not in rule["apiGroups"] for rule in rules)


def _rebalance_job(chart: Chart) -> dict:
    cron = chart.named("CronJob", "-rebalance")
    return cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_the_rebalance_cronjob_is_off_by_default_and_a_dry_run_when_on(cluster):
    from berth.cli import build_parser

    assert not rendered().of_kind("CronJob")
    chart = rendered("--set", "rebalance.enabled=true")
    job = _rebalance_job(chart)
    (container,) = job["containers"]
    args = container["args"]
    assert args[:3] == ["rebalance", "--live", "--all-namespaces"]
    assert "--apply" not in args and "--exit-zero" in args
    # Every flag the chart gives is one berth rebalance takes.
    parsed = build_parser().parse_args(args)
    assert (parsed.max, parsed.max_per_node, parsed.apply) == (10, 1, False)
    assert job["serviceAccountName"].endswith("-rebalance")
    assert chart.named("CronJob", "-rebalance")["spec"]["concurrencyPolicy"] == "Forbid"
    # A dry run only reads.
    rules = chart.named("ClusterRole", "-rebalance")["rules"]
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in rules)


def test_an_applying_rebalance_may_evict_and_read_and_nothing_else(cluster):
    chart = rendered(
        "--set",
        "rebalance.enabled=true",
        "--set",
        "rebalance.apply=true",
        "--set-json",
        'rebalance.namespaces=["shop"]',
    )
    args = _rebalance_job(chart)["containers"][0]["args"]
    assert "--apply" in args and "--namespace=shop" in args and "--all-namespaces" not in args
    objects = [
        o
        for o in chart.objects
        if o["metadata"]["name"].endswith("-rebalance")
        and o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
    ]
    cluster.apply(*objects)
    user = f"--as=system:serviceaccount:{CHART_NAMESPACE}:berth-rebalance"
    for question, allowed in (
        ("create pods --subresource=eviction", True),
        ("patch pods", True),
        ("create events", True),
        ("list placementpolicies.berth.dev", True),
        ("list poddisruptionbudgets.policy", True),
        ("delete pods", False),
        ("update pods", False),
        ("create pods", False),
        ("get secrets", False),
        ("patch placementpolicies.berth.dev", False),
    ):
        result = cluster.kubectl("auth", "can-i", *question.split(), user, check=False)
        assert result.stdout.strip() == ("yes" if allowed else "no"), question


def test_the_allocator_configuration_value_becomes_the_extenders_config_file(cluster):
    chart = rendered("--set-json", 'allocator.config={"defaults": {"weight_unreserved_ram": -2}}')
    data = chart.named("ConfigMap", "-allocator")["data"]["allocator.yaml"]
    assert yaml.safe_load(data) == {"defaults": {"weight_unreserved_ram": -2}}
    assert "--config=/etc/berth/allocator.yaml" in chart.container("-scheduler", "extender")["args"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--set", "scheduler.replicas=two"], "/scheduler/replicas", id="a wrongly typed value"),
        pytest.param(["--set", "scheduler.nmae=x"], "'nmae' not allowed", id="a misspelt key"),
        pytest.param(
            ["--set", "webhook.certificate.mode=vault"], "/webhook/certificate/mode", id="an unknown mode"
        ),
        pytest.param(
            ["--set", "operator.peering.enabled=false"],
            "operator.replicas > 1 needs operator.peering.enabled",
            id="several standalone operators, which would all handle every policy",
        ),
        pytest.param(
            ["--set", "scheduler.leaderElection.enabled=false"],
            "scheduler.replicas > 1 needs scheduler.leaderElection.enabled",
            id="several schedulers without leader election",
        ),
        pytest.param(
            ["--set", "extender.listenAddress=0.0.0.0"],
            "extender.listenAddress (0.0.0.0) is gone",
            id="the verbs beyond loopback",
        ),
        pytest.param(
            ["--set", "webhook.certificate.mode=secret", "--set", "webhook.certificate.secretName=tls"],
            "webhook.certificate.caBundle is required",
            id="a provided secret without a CA",
        ),
    ],
)
def test_values_that_cannot_work_are_refused_naming_the_value(cluster, args, message):
    kube = ("--kube-version", render_chart.KUBE_VERSION)
    result = helm("template", "berth", str(render_chart.CHART), *kube, *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_charts_webhooks_are_those_the_operator_serves(cluster):
    handlers = registries.get_default_registry()._webhooks.get_all_handlers()
    resources = [
        references.Resource(
            group=h.selector.group or "", version=h.selector.version, plural=h.selector.any_name
        )
        for h in handlers
    ]
    service = {"service": {"name": "svc", "namespace": "ns"}}
    expected = build_webhooks(handlers, resources=resources, name_suffix="berth.dev", client_config=service)
    chart = cluster.chart.of_kind("ValidatingWebhookConfiguration")[0]["webhooks"]
    assert [w["name"] for w in chart] == [w["name"] for w in expected]
    for ours, kopfs in zip(chart, expected, strict=True):
        for key in ("rules", "failurePolicy", "sideEffects", "matchPolicy", "admissionReviewVersions"):
            assert ours[key] == kopfs[key], (ours["name"], key)
        assert ours["clientConfig"]["service"]["path"] == kopfs["clientConfig"]["service"]["path"]


def test_every_object_of_the_chart_was_accepted_by_the_api_server(cluster):
    for obj in cluster.chart.objects:
        kind, meta = obj["kind"], obj["metadata"]
        namespace = ["-n", meta["namespace"]] if meta.get("namespace") else []
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        resource = f"{kind.lower()}.{group}" if group else kind.lower()
        found = cluster.kubectl("get", resource, meta["name"], *namespace, "-o", "json", check=False)
        if kind == "ValidatingWebhookConfiguration":
            # registered pointing at the local operator; the chart's own form is accepted as well
            dry = cluster.kubectl(
                "apply", "--server-side", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
            )
            assert dry.returncode == 0, dry.stderr
        assert found.returncode == 0, f"{kind} {meta['name']}: {found.stderr}"


def test_the_kubectl_manifests_are_accepted_by_the_api_server(cluster):
    # cert-manager is not installed here: stand-in definitions of its two kinds let the API server take
    # the Issuers and Certificates (their fields are cert-manager's to check).
    for plural, kind in (("certificates", "Certificate"), ("issuers", "Issuer")):
        cluster.apply(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.cert-manager.io"},
                "spec": {
                    "group": "cert-manager.io",
                    "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            }
        )
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "crd/certificates.cert-manager.io",
        "crd/issuers.cert-manager.io",
    )
    for path in ("manifests/crds/", "manifests/install.yaml"):
        result = cluster.kubectl(
            "apply", "--server-side", "--dry-run=server", "-f", str(render_chart.ROOT / path), check=False
        )
        assert result.returncode == 0, f"{path}: {result.stderr}"


def test_helm_install_against_the_cluster_renders_and_validates(cluster):
    # A second release in its own namespace, with a scheduler name of its own: helm reads the cluster
    # (lookup, API versions) and checks that no object of another release is in the way, without
    # installing anything.
    result = helm(
        "install",
        "trial",
        str(render_chart.CHART),
        "--namespace",
        "trial-system",
        "--create-namespace",
        "--set",
        "scheduler.name=trial-scheduler",
        "--dry-run=server",
        "--kubeconfig",
        str(cluster.cp.kubeconfig),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "schedulerName: trial-scheduler" in result.stdout  # the NOTES
    # which point at the placement record and berth explain, and at the image to build
    assert "berth.dev/placement" in result.stdout and "berth explain" in result.stdout
    assert "No berth image is published" in result.stdout
    # the kube-scheduler of the cluster's version, as helm found it on the API server
    assert "registry.k8s.io/kube-scheduler:v1.36.3" in result.stdout


def test_the_end_to_end_kube_scheduler_loads_the_charts_scheduler_configuration(cluster):
    loaded = yaml.safe_load((cluster.cp.workdir / f"{SCHEDULER}.yaml").read_text())
    chart = cluster.chart.scheduler_config()
    assert loaded.pop("clientConnection") == {"kubeconfig": str(cluster.kubeconfigs["scheduler"])}
    assert loaded["extenders"][0].pop("urlPrefix") == cluster.extender_url
    chart["extenders"][0].pop("urlPrefix")
    assert loaded == chart
    lease = cluster.get("lease", SCHEDULER, CHART_NAMESPACE)
    assert lease["spec"]["holderIdentity"]


def test_berths_processes_run_as_the_charts_service_accounts(cluster):
    for component, kubeconfig in cluster.kubeconfigs.items():
        whoami = cluster.kubectl("auth", "whoami", "--kubeconfig", str(kubeconfig), "-o", "json")
        user = json.loads(whoami.stdout)["status"]["userInfo"]["username"]
        assert user == f"system:serviceaccount:{CHART_NAMESPACE}:berth-{component}"
    peering = cluster.get("clusterkopfpeering", "berth")
    assert peering.get("status"), "the operator keeps itself alive in the peering object"


@pytest.mark.parametrize(
    ("account", "question", "allowed"),
    [
        ("berth-scheduler", "watch placementpolicies.berth.dev", True),
        ("berth-scheduler", "create pods --subresource=binding", True),
        ("berth-scheduler", "create events", True),
        ("berth-scheduler", f"update leases/{SCHEDULER} -n {CHART_NAMESPACE}", True),
        ("berth-scheduler", f"update leases/someone-else -n {CHART_NAMESPACE}", False),
        ("berth-scheduler", "patch placementpolicies.berth.dev", False),
        ("berth-scheduler", "get secrets", False),
        ("berth-operator", "patch placementpolicies.berth.dev --subresource=status", True),
        ("berth-operator", "watch pods", True),
        ("berth-operator", "create events", True),
        ("berth-operator", "patch clusterkopfpeerings.kopf.dev/berth", True),
        ("berth-operator", "patch clusterkopfpeerings.kopf.dev/another", False),
        ("berth-operator", "create pods", False),
        ("berth-operator", "delete placementpolicies.berth.dev", False),
        ("berth-operator", "create validatingwebhookconfigurations.admissionregistration.k8s.io", False),
        ("berth-operator", "list customresourcedefinitions.apiextensions.k8s.io", False),
        ("berth-operator", "get secrets", False),
        ("berth-operator", "get nodes", False),
    ],
    ids=lambda v: str(v),
)
def test_each_service_account_may_do_its_job_and_no_more(cluster, account, question, allowed):
    user = f"--as=system:serviceaccount:{CHART_NAMESPACE}:{account}"
    result = cluster.kubectl("auth", "can-i", *question.split(), user, check=False)
    assert result.stdout.strip() == ("yes" if allowed else "no")


def test_the_charts_probes_pass_on_the_running_processes(cluster):
    extender = cluster.chart.container("-scheduler", "extender")
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # as the kubelet's HTTPS probes
    for probe in (extender["livenessProbe"], extender["readinessProbe"]):
        get = probe["httpGet"]
        assert get["port"] == "metrics" and get["scheme"] == "HTTPS"
        url = f"https://127.0.0.1:{cluster.metrics_port}{get['path']}"
        with urllib.request.urlopen(url, timeout=5, context=context) as response:  # no token
            assert response.status == 200
    operator = cluster.chart.container("-operator", "operator")
    assert operator["livenessProbe"]["httpGet"]["path"] == "/healthz"
    with urllib.request.urlopen(cluster.operator_liveness, timeout=5) as response:
        assert response.status == 200


def test_kube_scheduler_knows_every_flag_the_chart_gives_it(cluster):
    command = cluster.chart.container("-scheduler", "kube-scheduler")["command"]
    assert command[0] == "kube-scheduler"
    result = subprocess.run(
        [str(cluster.cp.bin / "kube-scheduler"), *command[1:], "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_kube_scheduler_health_port_answers_like_the_charts_probe(cluster):
    # The chart probes kube-scheduler's HTTPS /healthz; the e2e scheduler serves it on a free port.
    log = (cluster.cp.logs / f"{SCHEDULER}.log").read_text()
    port = next(a.split("=")[1] for a in log.splitlines()[0].split() if a.startswith("--secure-port="))
    probe = cluster.chart.container("-scheduler", "kube-scheduler")["livenessProbe"]["httpGet"]
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    url = f"https://127.0.0.1:{port}{probe['path']}"
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        assert response.status == 200


def test_install_yaml_is_the_chart_for_berth_system(cluster):
    objects = render_chart.documents(Path(render_chart.INSTALL).read_text())
    assert objects[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CHART_NAMESPACE}}
    namespaced = [o for o in objects[1:] if o["metadata"].get("namespace")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {CHART_NAMESPACE, "kube-system"}
