"""kube's resource scores worked out over arrays of nodes and over one node's numbers give the same
values: the fast path (arrays) and the rule and the few nodes changed between two pods (numbers)
are one function."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.vocab.kube.node_resources import NUMBERS, balanced_allocation, least_allocated

# Quantities as berth reads them: millicores and bytes, 0 for a resource a node does not declare.
CPU = st.integers(0, 256_000)
MEMORY = st.integers(0, 2**40)
NODE = st.tuples(CPU, MEMORY, CPU, MEMORY)  # allocatable cpu and memory, requested cpu and memory


@settings(max_examples=300, deadline=None)
@given(st.lists(NODE, min_size=1, max_size=20), CPU, MEMORY)
def test_the_scores_over_arrays_are_the_scores_of_each_node(nodes, want_cpu, want_memory) -> None:
    cpu, memory, used_cpu, used_memory = (np.array(column, np.int64) for column in zip(*nodes, strict=True))
    least = least_allocated(cpu, memory, used_cpu + want_cpu, used_memory + want_memory)
    balanced = balanced_allocation(cpu, memory, used_cpu, used_memory, want_cpu, want_memory)
    for i, (c, m, uc, um) in enumerate(nodes):
        one_least = least_allocated(c, m, uc + want_cpu, um + want_memory, NUMBERS)
        one_balanced = balanced_allocation(c, m, uc, um, want_cpu, want_memory, NUMBERS)
        assert (type(one_least), type(one_balanced)) == (int, int)
        assert (one_least, one_balanced) == (least[i], balanced[i]), nodes[i]


def test_kubes_values_for_a_half_used_node() -> None:
    # 4 CPUs and 8 GiB, 2 CPUs and 2 GiB used, a pod asking 1 CPU and 2 GiB: LeastAllocated is the mean of
    # 100 x 1/4 and 100 x 4/8 = 37; BalancedAllocation: |3/4 - 4/8| / 2 = 0.125 with the pod, 87, and
    # |2/4 - 2/8| / 2 = 0.125 without, 87: 50 + (50 + 87 - 87) / 2 = 75. A pod asking 1 CPU and no
    # memory leaves the node less balanced: |3/4 - 2/8| / 2 = 0.25 with it, 75: 50 + (50 + 75 - 87) / 2 = 69.
    gib = 2**30
    assert least_allocated(4000, 8 * gib, 3000, 4 * gib, NUMBERS) == 37
    assert balanced_allocation(4000, 8 * gib, 2000, 2 * gib, 1000, 2 * gib, NUMBERS) == 75
    assert balanced_allocation(4000, 8 * gib, 2000, 2 * gib, 1000, 0, NUMBERS) == 69
