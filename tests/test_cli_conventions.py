"""kubectl's conventions in the `berth` command: -o/--output, --no-headers, -A, errors with the
subcommand's own usage, examples in every --help, `berth version` and `berth completion`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from berth import __version__, version
from berth.cli import build_parser, main
from tests.builders import k8s_list, node, pod

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = str(ROOT / "examples/cluster.yaml")
WEB = str(ROOT / "examples/pods/web.yaml")

RESULT_COMMANDS = {
    "simulate": ["simulate", "--cluster", CLUSTER, "--pod", WEB, "--seed", "1"],
    "capacity": ["capacity", "--cluster", CLUSTER, "--pod", WEB],
    "explain": ["explain", "shop/web-0", "--cluster", CLUSTER],
    "audit": ["audit", "--cluster", CLUSTER],
}


@pytest.mark.parametrize("command", list(RESULT_COMMANDS))
def test_json_and_yaml_are_the_same_document(command, capsys):
    argv = RESULT_COMMANDS[command]
    main([*argv, "-o", "json"])
    as_json = json.loads(capsys.readouterr().out)
    main([*argv, "--output", "yaml"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def test_o_json_is_taken_after_the_subcommand(capsys):
    # `berth audit -o json` once failed with "unrecognized arguments" and berth's top-level usage
    assert main(["audit", "--cluster", CLUSTER, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["clean"] is True


def test_simulate_name_prints_the_chosen_node_as_kubectl_names_it(capsys):
    assert main([*RESULT_COMMANDS["simulate"], "-o", "name"]) == 0
    assert capsys.readouterr().out == "node/node-d\n"


def test_simulate_wide_adds_the_chain_and_no_headers_drops_the_column_header(capsys):
    main([*RESULT_COMMANDS["simulate"], "-o", "wide"])
    wide = capsys.readouterr().out
    assert "chain: 44 steps; " in wide
    main(RESULT_COMMANDS["simulate"])
    plain = capsys.readouterr().out
    assert "chain:" not in plain and "NODE" in plain.splitlines()[1]
    main([*RESULT_COMMANDS["simulate"], "--no-headers"])
    headless = capsys.readouterr().out.splitlines()
    assert not any(line.split()[:2] == ["NODE", "FEASIBLE"] for line in headless)
    assert headless[1].startswith("*") and "node-d" in headless[1]


def test_capacity_name_lists_the_nodes_that_take_one_more(capsys):
    main([*RESULT_COMMANDS["capacity"], "-o", "name"])
    names = capsys.readouterr().out.split()
    assert names and all(n.startswith("node/") for n in names)
    main([*RESULT_COMMANDS["capacity"], "--no-headers"])
    assert not any(line.startswith("NODE") for line in capsys.readouterr().out.splitlines())


def test_explain_finds_a_pod_in_any_namespace_with_all_namespaces(tmp_path, capsys):
    assert main(["explain", "web-0", "-A", "--cluster", CLUSTER, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pod"] == "shop/web-0"
    assert main(["explain", "web-0", "--cluster", CLUSTER]) == 2  # not in the default namespace
    assert "no pod default/web-0" in capsys.readouterr().err
    twice = tmp_path / "c.yaml"
    twice.write_text(
        yaml.safe_dump(
            k8s_list(node("n1"), pod("a", namespace="x", node="n1"), pod("a", namespace="y", node="n1"))
        )
    )
    assert main(["explain", "a", "-A", "--cluster", str(twice)]) == 2
    assert "pods named a in 2 namespaces (x/a, y/a)" in capsys.readouterr().err


def test_audit_takes_all_namespaces_but_not_with_a_namespace(capsys):
    assert main(["audit", "--cluster", CLUSTER, "-A"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["audit", "--cluster", CLUSTER, "-A", "-n", "shop"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "--cluster", CLUSTER, "--bogus"], "unrecognized arguments: --bogus"),
        (["simulate", "--cluster", CLUSTER], "the following arguments are required: --pod"),
        (
            ["capacity", "--cluster", CLUSTER, "--pod", WEB, "-o", "xml"],
            "argument -o/--output: invalid choice: 'xml'",
        ),
    ],
)
def test_an_error_in_a_subcommand_shows_that_subcommands_usage(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith(f"usage: berth {argv[0]} ")
    assert f"berth {argv[0]}: error: {message}" in err


def _commands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)


@pytest.mark.parametrize("command", list(_commands()))
def test_every_subcommand_help_has_examples_that_parse(command):
    sub = _commands()[command]
    text = sub.format_help()
    assert "\nexamples:\n" in text
    examples = text.split("\nexamples:\n", 1)[1].splitlines()
    assert examples
    for line in examples:
        words = line.split("| ")[-1].split()  # a pipe into berth: the berth part
        if ">" in words:
            words = words[: words.index(">")]
        assert words[:2] == ["berth", command], line
        assert build_parser().parse_args(words[1:]).command == command


def test_version_prints_the_version_and_the_commit(capsys, monkeypatch):
    monkeypatch.setenv("BERTH_COMMIT", "0123abc")
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"berth {__version__} (commit 0123abc)\n"
    assert main(["version", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": __version__, "commit": "0123abc"}


def test_the_commit_of_a_checkout_is_its_head_and_unknown_elsewhere(monkeypatch, tmp_path):
    monkeypatch.delenv("BERTH_COMMIT", raising=False)
    found = version.commit()
    if (ROOT / ".git").exists():
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert found == head.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", found)
    monkeypatch.setattr(version, "__file__", str(tmp_path / "berth" / "version.py"))
    assert version.commit() == "unknown"  # installed outside a checkout, with nothing given


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_subcommand_and_their_options(shell, capsys):
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    for command in ("simulate", "audit", "explain", "capacity", "version", "completion"):
        assert command in script
    assert "fail-on" in script and "all-namespaces" in script


def test_the_bash_completion_script_is_valid_bash(tmp_path, capsys):
    main(["completion", "bash"])
    script = tmp_path / "berth.bash"
    script.write_text(capsys.readouterr().out)
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_version_runs_as_the_installed_command():
    result = subprocess.run(
        [sys.executable, "-m", "berth.cli", "version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout.startswith(f"berth {__version__} (commit ")
