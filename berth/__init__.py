"""berth: placement policies for Kubernetes."""

__version__ = "0.1.0"
