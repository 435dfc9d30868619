"""The allocator pipeline (Triton's sdc-designation) on berth's engine.

What users write is compiled once: the configuration when it is loaded (config.py: the defaults
table, packages, custom algorithms; description.py: the chain), a pod's annotations when the pod is
decided (request.py, hints.py). The steps read only that and the cluster view's counters:

    base.py           the Setup every step is built with, the pod's sizes, a node's capacity and ratios
    state_filters.py  setup, running, reserved, headnode, invalid, virtual, reservoir, force-failure
    capacity.py       min-ram, min-cpu, min-disk, min-free-disk, vm-count, capness, ratios, large servers
    traits.py         traits                  platform.py   platform versions, feature platforms
    network.py        NIC tags (vlans)        locality.py   locality hints and affinity rules
    scorers.py        the weighted scorers    data.py       identity and the bookkeeping algorithms
    registry.py       every name of sdc-designation: its step, or why it has no meaning on Kubernetes
    custom.py         custom algorithms (entry points, class paths)

berth.configure builds the chain from a configuration; docs/allocator.md is the user's reference.
"""

from berth.vocab.alloc.config import AllocatorConfig, load_config, parse_config

__all__ = ["AllocatorConfig", "load_config", "parse_config"]
