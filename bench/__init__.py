"""berth's benchmarks: a seeded cluster generator, the engine in-process, the extender over HTTP
against the floor of its own server stack, and end to end against kube-scheduler's built-in rules
on a local control plane. `python -m bench --help`; bench/RESULTS.md has the figures."""
