"""The names of berth's own steps outside the allocator's (whose names are the seed's algorithm
names, berth.vocab.alloc.registry): one place for each name, which the steps, the chain builder,
the configuration's checks and the docs all use. A leaf module: it imports nothing of berth."""

REQUIRE_WITH_TAG = "tags/require_with_tag"
REQUIRE_WITHOUT_TAG = "tags/require_without_tag"
TAG_AFFINITY = "tags/tag-affinity"
PLACEMENT_POLICY = "policy/placement-policy"
KUBE_SCORE = "kube/default-score"
PLANNED_TARGET = "rebalance/planned-target"

# berth's own rules: they hold under any chain. A configured allocationDescription that leaves one
# out still runs it (the hard filters before the chain, the tier before its first preference).
ALWAYS_HARD = (REQUIRE_WITH_TAG, REQUIRE_WITHOUT_TAG, PLACEMENT_POLICY)
ALWAYS = (*ALWAYS_HARD, PLANNED_TARGET, TAG_AFFINITY)
