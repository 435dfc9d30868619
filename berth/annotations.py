"""The names berth reads on Kubernetes objects (docs/user-guide.md and docs/allocator.md describe them)."""

from __future__ import annotations

PREFIX = "berth.dev/"

# Pod annotations.
TAGS = "berth.dev/tags"
AFFINITY = "berth.dev/affinity"
TRAITS = "berth.dev/traits"
LOCALITY = "berth.dev/locality"
AFFINITY_RULES = "berth.dev/affinity-rules"
PACKAGE = "berth.dev/package"
IMAGE = "berth.dev/image"
PLACEMENT_POLICY = "berth.dev/placement-policy"

POD_ANNOTATIONS = (TAGS, AFFINITY, TRAITS, LOCALITY, AFFINITY_RULES, PACKAGE, IMAGE, PLACEMENT_POLICY)
# Written by berth on the pods it places (with the binding): why the pod is where it is.
PLACEMENT_RECORD = "berth.dev/placement"
# `berth rebalance`: "never" keeps a pod where it is; the planned target is written on a pod just
# before its eviction, so that berth-scheduler steers the replacement there (berth.vocab.planned_target).
REBALANCE = "berth.dev/rebalance"
REBALANCE_TARGET = "berth.dev/rebalance-target"
# Annotations berth reads or writes that are not rules of the pod.
OPERATIONAL = (PLACEMENT_RECORD, REBALANCE, REBALANCE_TARGET)

# Pod labels.
APP_NAME = "app.kubernetes.io/name"
APP_VERSION = "app.kubernetes.io/version"

# Node labels and annotations.
NODE_TAG_PREFIX = "tag.berth.dev/"
NODE_TRAITS = "berth.dev/traits"
NODE_RESERVED = "berth.dev/reserved"
NODE_PLATFORM = "berth.dev/platform"
NODE_NEXT_REBOOT = "berth.dev/next-reboot"
NODE_NIC_TAGS = "berth.dev/nic-tags"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"

# Size limits on what a pod may carry, so one annotation cannot cost the extender much.
MAX_ANNOTATION_BYTES = 64 * 1024
MAX_TAGS = 256
MAX_TAG_LENGTH = 253
