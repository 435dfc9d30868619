"""The names of berth's own steps outside the allocator's (whose names are sdc-designation's algorithm
names, berth.vocab.alloc.registry): one place for each name, which the steps, the chain builder,
the configuration's checks and the docs all use. A leaf module: it imports nothing of berth."""

REQUIRE_WITH_TAG = "tags/require_with_tag"
REQUIRE_WITHOUT_TAG = "tags/require_without_tag"
TAG_AFFINITY = "tags/tag-affinity"
PLACEMENT_POLICY = "policy/placement-policy"
KUBE_PREFERENCES = "kube/preferences"
KUBE_SCORE = "kube/default-score"
PLANNED_TARGET = "rebalance/planned-target"

# kube-scheduler's filters as berth runs them offline, in kube-scheduler's order.
KUBE_NODE_READY = "kube/node-ready"
KUBE_NODE_UNSCHEDULABLE = "kube/node-unschedulable"
KUBE_NODE_NAME = "kube/node-name"
KUBE_TAINTS = "kube/taints"
KUBE_NODE_AFFINITY = "kube/node-affinity"
KUBE_NODE_PORTS = "kube/node-ports"
KUBE_RESOURCES = "kube/resources"
KUBE_TOPOLOGY_SPREAD = "kube/topology-spread"
KUBE_INTER_POD_AFFINITY = "kube/inter-pod-affinity"

# berth's own rules, and the pod's preferences as kube-scheduler scores them: they hold under any chain.
# A configured allocationDescription that leaves one out still runs it (the hard filters before the
# chain, the tiers before its first preference).
ALWAYS_HARD = (REQUIRE_WITH_TAG, REQUIRE_WITHOUT_TAG, PLACEMENT_POLICY)
ALWAYS_TIERS = (PLANNED_TARGET, TAG_AFFINITY, KUBE_PREFERENCES)
ALWAYS = (*ALWAYS_HARD, *ALWAYS_TIERS)

# Every step a chain may name besides the allocator's (whose names are berth.vocab.alloc.plugin_names): the
# chain builder (berth.configure) resolves each to its class, and checks it has one for every name.
OTHER_STEPS = (
    KUBE_NODE_READY,
    KUBE_NODE_UNSCHEDULABLE,
    KUBE_NODE_NAME,
    KUBE_TAINTS,
    KUBE_NODE_AFFINITY,
    KUBE_NODE_PORTS,
    KUBE_RESOURCES,
    KUBE_TOPOLOGY_SPREAD,
    KUBE_INTER_POD_AFFINITY,
    KUBE_PREFERENCES,
    KUBE_SCORE,
    REQUIRE_WITH_TAG,
    REQUIRE_WITHOUT_TAG,
    PLACEMENT_POLICY,
    PLANNED_TARGET,
    TAG_AFFINITY,
)
