"""The kube-scheduler extender: the HTTP verbs over the engine, and `berth serve`."""
