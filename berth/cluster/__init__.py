"""The cluster view: compact records of nodes and pods with per-node counters.

The modules are imported by name (berth.cluster.view, berth.cluster.convert, ...): this package
imports none of them, so that a leaf module here (model, selectors, quantity) never pulls in the rest.
"""
