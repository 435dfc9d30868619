"""`kubectl berth`: kubectl's global flags wherever they stand, the live cluster by default."""

from __future__ import annotations

import pytest

from berth import kubectl_plugin
from berth.kubectl_plugin import berth_argv


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--context", "prod", "simulate", "--pod", "w.yaml", "-n", "shop"],
            ["simulate", "--context", "prod", "--namespace", "shop", "--live", "--pod", "w.yaml"],
        ),
        (
            ["explain", "web-0", "--kubeconfig=/k", "--namespace=shop"],
            ["explain", "--kubeconfig", "/k", "--namespace", "shop", "--live", "web-0"],
        ),
        (
            ["simulate", "--cluster", "c.yaml", "--pod", "p"],
            ["simulate", "--cluster", "c.yaml", "--pod", "p"],
        ),
        (["rebalance", "-n", "shop"], ["rebalance", "--namespace", "shop", "--live"]),
        (["capacity", "--pod", "p.yaml"], ["capacity", "--live", "--pod", "p.yaml"]),
        (["validate", "a.yaml"], ["validate", "a.yaml"]),
        (["--version"], ["--version"]),
        ([], None),
        (["--context", "prod"], None),
    ],
)
def test_kubectl_flags_move_to_the_command_and_live_is_the_default(argv, expected):
    assert berth_argv(argv) == expected


def test_the_namespace_flag_places_pods_of_the_file_and_must_agree_with_it(capsys):
    args = [
        "simulate",
        "--cluster",
        "examples/cluster.yaml",
        "--pod",
        "examples/pods/web.yaml",
        "--seed",
        "1",
    ]
    assert kubectl_plugin.main([*args, "-n", "shop"]) == 0
    assert capsys.readouterr().out.startswith("pod shop/web-1: placed on")
    assert kubectl_plugin.main([*args, "-n", "other"]) == 2
    assert capsys.readouterr().err == (
        "berth: examples/pods/web.yaml: Pod web-1 is in namespace shop, not other "
        "(as kubectl: the file and -n must agree)\n"
    )


def test_without_a_command_it_prints_its_usage(capsys):
    assert kubectl_plugin.main([]) == 0
    assert capsys.readouterr().out.startswith("usage: kubectl berth [--kubeconfig FILE] [--context NAME]")


def test_the_usage_says_which_commands_change_the_cluster(capsys):
    assert kubectl_plugin.main([]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert set(lines) == {"simulate", "explain", "audit", "capacity", "rebalance", "check"}
    assert "with --apply it EVICTS pods" in lines["rebalance"]
    assert all("reads only" in lines[c] for c in ("simulate", "explain", "audit", "capacity", "check"))
