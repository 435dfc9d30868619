"""The AND of placement rules: one node at a time (first_failure) and over a set of nodes
(and_failures) give the same answer, the first failure no eviction can help, else the first one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from berth.vocab.policy.combine import and_failures, first_failure

NODES = ["a", "b", "c", "d"]
# A failure is (rule index, hopeless); None: the rule holds on the node.
rules = st.lists(st.fixed_dictionaries({n: st.one_of(st.none(), st.booleans()) for n in NODES}), max_size=5)


def _hopeless(failure: tuple[int, bool]) -> bool:
    return failure[1]


@given(rules)
def test_over_a_set_every_node_gets_what_one_node_at_a_time_gets(table):
    asked: list[set[str]] = []

    def part(i: int):
        def failures(among):
            asked.append(set(among))
            return {n: (i, table[i][n]) for n in among if table[i][n] is not None}

        return failures

    together = and_failures([part(i) for i in range(len(table))], dict.fromkeys(NODES), _hopeless)
    for node in NODES:
        alone = first_failure(
            ((i, row[node]) if row[node] is not None else None for i, row in enumerate(table)), _hopeless
        )
        assert together.get(node) == alone
    # A node failed for good is not asked about by the later rules.
    for i, among in enumerate(asked):
        for node in among:
            assert not any(table[j][node] for j in range(i))


def test_the_first_hopeless_failure_wins_over_an_earlier_one_an_eviction_could_help():
    found = [None, ("capacity", False), ("tag", True), ("later", True)]
    assert first_failure(iter(found), lambda f: f[1]) == ("tag", True)
    assert first_failure(iter([None, ("capacity", False)]), lambda f: f[1]) == ("capacity", False)
    assert first_failure(iter([None, None]), lambda f: f[1]) is None
