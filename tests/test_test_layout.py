"""The tests' own layout, as tests/README.md describes it: a test file's name says which it is, once."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _test_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).glob("test_*.py"))


def test_the_tree_holds_both_suites():
    assert len(_test_files("tests")) > 50 and len(_test_files("e2e")) > 20


def test_no_two_test_files_share_a_name_across_the_two_suites():
    names = [p.name for p in _test_files("tests") + _test_files("e2e")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_end_to_end_test_file_is_named_after_its_suite():
    assert [p.name for p in _test_files("e2e") if not re.fullmatch(r"test_\w+_e2e\.py", p.name)] == []
    assert [p.name for p in _test_files("tests") if p.name.endswith("_e2e.py")] == []


def test_each_extender_module_with_behaviour_of_its_own_has_its_test_module():
    # berth.extender's concerns, each tested under its own name (wire, openapi and protocol are the
    # HTTP surface, tested through the app in test_placer and test_hot_protocol).
    for module in ("placer", "preempt", "sample", "requeue", "pod_events", "decisions"):
        assert (ROOT / "tests" / f"test_{module}.py").exists(), module
