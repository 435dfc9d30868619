"""The analyses: questions asked of a cluster through the engine, shared by the commands and the
servers. audit (the pods whose node breaks their rules), headroom (how many more pods of a shape fit,
the room left), preemption (the fewest victims under berth's rules), rebalance (the moves that mend what
audit finds), simulate_diff (what a what-if changes), validate and validate_warnings (manifests checked
without a cluster)."""
