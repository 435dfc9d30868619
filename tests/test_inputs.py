"""Files as users hand them to berth: encodings, standard input, and every kind of bad input refused
in one line naming the file, exit 2, never a traceback."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth import inputs
from berth.cli import main
from berth.errors import InputError
from berth.inputs import read_documents
from tests.builders import k8s_list, node, pod

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples/cluster.yaml"
WEB = ROOT / "examples/pods/web.yaml"


@pytest.fixture(autouse=True)
def _fresh_stdin(monkeypatch):
    # standard input is read once per process and kept: each test starts without it
    monkeypatch.setattr(inputs, "_stdin", None)


@pytest.mark.parametrize(
    ("encoding", "prefix"),
    [
        pytest.param("utf-8", b"", id="UTF-8"),
        pytest.param("utf-8", b"\xef\xbb\xbf", id="UTF-8 with a byte order mark"),
        pytest.param("utf-16", b"", id="UTF-16 with its mark, as PowerShell writes"),
        pytest.param("utf-16-le", b"\xff\xfe", id="UTF-16 LE"),
        pytest.param("utf-16-be", b"\xfe\xff", id="UTF-16 BE"),
    ],
)
def test_a_snapshot_in_each_unicode_encoding_is_simulated_the_same(tmp_path, capsys, encoding, prefix):
    path = tmp_path / "cluster.yaml"
    path.write_bytes(prefix + CLUSTER.read_text().encode(encoding))
    assert (
        main(["simulate", "--cluster", str(path), "--pod", str(WEB), "--seed", "1", "--output", "json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["chosen"] == "node-d"


def test_a_json_snapshot_in_utf16_is_read(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_bytes(json.dumps(k8s_list(node("n1"), pod("a", node="n1"))).encode("utf-16"))
    assert [o["kind"] for o in read_documents(path)] == ["Node", "Pod"]


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    files = {
        "latin1.yaml": "kind: Pod\nmetadata:\n  name: café\n".encode("latin-1"),
        "utf16-no-mark.yaml": "kind: Node\n".encode("utf-16-le"),
        "malformed.yaml": b"a: [1,\n b: }\n",
        "numbers.json": b"[1, 2, 3]",
        "kind.json": b'{"kind": 5}',
        "items.yaml": b"kind: List\nitems: {a: 1}\n",
        "scalar.yaml": b"just text\n",
        "metadata-list.yaml": b"kind: Pod\nmetadata: [1]\nspec: {containers: []}\n",
        "node-allocatable.yaml": b"kind: Node\nmetadata: {name: n}\nstatus: {allocatable: [1]}\n",
    }
    out = {}
    for name, data in files.items():
        out[name] = tmp_path / name
        out[name].write_bytes(data)
    (tmp_path / "a-directory").mkdir()
    out["a-directory"] = tmp_path / "a-directory"
    out["missing.yaml"] = tmp_path / "missing.yaml"
    return out


@pytest.mark.parametrize("role", ["--cluster", "--pod"])
@pytest.mark.parametrize(
    "name",
    [
        "latin1.yaml",
        "utf16-no-mark.yaml",
        "malformed.yaml",
        "numbers.json",
        "kind.json",
        "items.yaml",
        "scalar.yaml",
        "metadata-list.yaml",
        "node-allocatable.yaml",
        "a-directory",
        "missing.yaml",
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_exit_2(tmp_path, capsys, role, name):
    bad = _bad_inputs(tmp_path)[name]
    args = {"--cluster": str(CLUSTER), "--pod": str(WEB)} | {role: str(bad)}
    code = main(["simulate", "--cluster", args["--cluster"], "--pod", args["--pod"]])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"berth: {bad}"), err


def test_latin1_is_refused_saying_what_to_do(tmp_path):
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xe9 at offset 31\); save it as UTF-8"):
        read_documents(_bad_inputs(tmp_path)["latin1.yaml"])


def test_malformed_yaml_names_the_line_and_column(tmp_path):
    with pytest.raises(InputError, match=r"not valid YAML or JSON: .* at line 2, column 5$"):
        read_documents(_bad_inputs(tmp_path)["malformed.yaml"])


@pytest.mark.parametrize("command", ["capacity", "audit", "explain"])
def test_every_command_refuses_bad_input_in_one_line(tmp_path, capsys, command):
    bad = str(_bad_inputs(tmp_path)["latin1.yaml"])
    argv = {
        "capacity": ["capacity", "--cluster", bad, "--pod", str(WEB)],
        "audit": ["audit", "--cluster", bad],
        "explain": ["explain", "shop/web-0", "--cluster", bad],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8 text" in err


def test_a_bad_allocator_configuration_file_is_one_line(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_bytes("defaults:\n  name: é\n".encode("latin-1"))
    assert main(["simulate", "--cluster", str(CLUSTER), "--pod", str(WEB), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{config}: not UTF-8 text" in err


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        pytest.param([], "no Node in it", id="an empty file"),
        pytest.param([k8s_list()], "no Node in it", id="an empty List"),
        pytest.param([pod("web-0")], "no Node in it", id="a pod manifest given as the cluster"),
        pytest.param([k8s_list(node("n1"), node("n1"))], "node n1 appears twice", id="a node twice"),
    ],
)
def test_a_cluster_with_no_node_or_a_node_twice_is_bad_input_not_zero_nodes_available(
    tmp_path, capsys, objects, message
):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects))
    code = main(["simulate", "--cluster", str(cluster), "--pod", str(WEB)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"berth: {cluster}: {message}") and "nodes are available" not in err


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def test_the_cluster_is_read_from_stdin_with_a_dash(monkeypatch, capsys):
    _stdin(monkeypatch, CLUSTER.read_text())
    assert main(["simulate", "--cluster", "-", "--pod", str(WEB), "--seed", "1", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == "node-d"


def test_the_pod_is_read_from_stdin_with_a_dash(monkeypatch, capsys):
    _stdin(monkeypatch, WEB.read_text())
    assert main(["simulate", "--cluster", str(CLUSTER), "--pod", "-", "--seed", "1", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == "node-d"


def test_capacity_reads_a_cluster_on_stdin_once_for_every_pod_shape(monkeypatch, tmp_path, capsys):
    _stdin(monkeypatch, CLUSTER.read_text())
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(yaml.safe_dump_all([pod("a", cpu="1"), pod("b", cpu="2")]))
    assert main(["capacity", "--cluster", "-", "--pod", str(shapes), "--output", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["pods"]) == 2


def test_only_one_input_can_be_stdin(monkeypatch, capsys):
    _stdin(monkeypatch, "")
    assert main(["simulate", "--cluster", "-", "--pod", "-"]) == 2
    assert "only one input can be read from standard input" in capsys.readouterr().err


def test_a_bad_stdin_is_named_stdin(monkeypatch, capsys):
    _stdin(monkeypatch, "a: [1,\n")
    assert main(["simulate", "--cluster", "-", "--pod", str(WEB)]) == 2
    assert capsys.readouterr().err.startswith("berth: <stdin>: not valid YAML or JSON")


def test_no_traceback_from_the_installed_command_on_a_pipe_of_garbage():
    result = subprocess.run(
        [sys.executable, "-m", "berth.cli", "audit", "--cluster", "-"],
        input=b"\x00\xff\xfe garbage",
        capture_output=True,
        check=False,
    )
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr and result.stderr.count(b"\n") == 1


WRONG_TYPES = st.sampled_from([None, 7, -1.5, True, "x", [], {}, [1, "a"], {"a": [1]}, {"key": None}])
RICH_POD = yaml.safe_load(
    """
apiVersion: v1
kind: Pod
metadata:
  name: rich
  namespace: shop
  labels: {app: web, tier: front}
  annotations: {berth.dev/tags: '["web"]', berth.dev/affinity: '{"prefer_with_tag": ["db"]}'}
spec:
  nodeSelector: {disk: ssd}
  tolerations: [{key: dedicated, operator: Equal, value: web, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 10, preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway,
     labelSelector: {matchLabels: {app: web}}}
  containers:
  - name: main
    image: busybox
    ports: [{containerPort: 80, hostPort: 8080}]
    resources: {requests: {cpu: 250m, memory: 128Mi}}
"""
)


DEPLOYMENT = yaml.safe_load(
    """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: {berth.dev/tags: '["web"]'}}
    spec:
      containers: [{name: main, image: busybox, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
"""
)


def _places(tree, at=()):
    """The path of every value in a parsed document."""
    yield at
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        yield from _places(value, (*at, key))


def _put(tree, at, value):
    for key in at[:-1]:
        tree = tree[key]
    tree[at[-1]] = value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_field_of_the_wrong_type_anywhere_is_refused_by_name_never_a_traceback(tmp_path, capsys, data):
    # A list where kubectl writes a string, a number where a label value should be (`version: 1.0`):
    # every reader names what it cannot use, and main() maps only those errors, so anything else
    # would be a traceback here.
    cluster = yaml.safe_load(CLUSTER.read_text())
    pod_doc = copy.deepcopy(data.draw(st.sampled_from([RICH_POD, DEPLOYMENT])))
    tree = data.draw(st.sampled_from([cluster, pod_doc]))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(list(_places(tree))[1:]))
        _put(tree, at, copy.deepcopy(data.draw(WRONG_TYPES)))
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod_doc))
    files = ["--cluster", str(tmp_path / "cluster.yaml")]
    command = data.draw(
        st.sampled_from(
            [
                ["simulate", *files, "--pod", str(tmp_path / "pod.yaml"), "--detail"],
                ["capacity", *files, "--pod", str(tmp_path / "pod.yaml")],
                ["audit", *files],
                ["rebalance", *files],
            ]
        )
    )
    code = main(command)  # returns: nothing raised
    err = capsys.readouterr().err
    assert code in (0, 1, 2)
    assert all(line.startswith("berth") for line in err.splitlines()), err


@pytest.mark.parametrize("field", ["name", "namespace"])
def test_a_workload_named_by_anything_but_a_string_is_refused_naming_the_field(tmp_path, capsys, field):
    # its replicas are named and placed after it, and kube's spreading reads it as their controller
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["metadata"][field] = {"a": [1]}
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(deployment))
    assert main(["simulate", "--cluster", str(CLUSTER), "--pod", str(tmp_path / "web.yaml")]) == 2
    err = capsys.readouterr().err
    assert err == f"berth: {tmp_path / 'web.yaml'}: Deployment: metadata.{field}: should be a string\n"


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        pytest.param(
            ("nodeSelector",),
            {"disk": 1},
            "spec.nodeSelector: should map strings to strings",
            id="a number in the nodeSelector",
        ),
        pytest.param(
            ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "preference"),
            [{"key": "zone"}],
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference: "
            "should be a node selector term",
            id="a list where a term should be",
        ),
        pytest.param(
            (
                "affinity",
                "nodeAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution",
                0,
                "preference",
                "matchExpressions",
                0,
                "values",
            ),
            "a",
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
            ".matchExpressions[0].values: should be a list of strings",
            id="a string where the values should be",
        ),
    ],
)
def test_node_affinity_of_the_wrong_shape_is_refused_when_read_naming_the_field(
    tmp_path, capsys, path, value, named
):
    # kube-scheduler's filter and score read these for every node: a file's mistake is found when read
    pod_doc = copy.deepcopy(RICH_POD)
    _put(pod_doc["spec"], path, value)
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod_doc))
    assert main(["simulate", "--cluster", str(CLUSTER), "--pod", str(tmp_path / "pod.yaml")]) == 2
    assert named in capsys.readouterr().err
