"""The placement engine.

Flow of one decision (`decide`):
1. the pipeline compiles the pod's berth annotations once (a problem is a 400 Decision, never an
   exception);
2. the chain runs over the candidate nodes: `pipe` feeds each step the survivors of the one before,
   `or` takes the first alternative that leaves any node; each step's `prepare` runs once per pod and
   its per-node method reads only that state and the node's counters;
3. hard filters remove nodes with a Reason (unmet or exhausted); the tier and soft filters set nodes
   aside; scorers add weighted, normalised parts;
4. the highest total among the nodes left wins, a tie is broken by the seed; nothing left is a 409
   that names the user constraint that removed nodes;
5. the Decision carries every node's result, the trace of every step, and the events for the pod.

Cost (bench/RESULTS.md): a decision costs what its steps do, not O(nodes x steps) of bookkeeping. The
candidates travel as one dict a step hands on unchanged when it removes nothing; steps that concern a
few nodes find them through the view's indexes (the nodes holding a tag, running an app, failing a
node-only check); removals and scores are kept compact (berth.engine.ledger) and the per-node results
and traces are built from them only when read. The extender reads `candidate_names()`,
`failure_texts()` and `scores()` and never builds them.
"""

from berth.engine.chain import Member, Or, Pipe, describe, flatten
from berth.engine.decide import decide, indexed_candidates
from berth.engine.decision import Decision
from berth.engine.pipeline import Pipeline
from berth.engine.step import SKIP, NodeFilter, PodContext, Scorer, SetFilter, Step, Tier, skip
from berth.engine.types import (
    ErrorInfo,
    Event,
    Kind,
    NodeResult,
    Phase,
    Reason,
    ScorePart,
    StepTrace,
)

__all__ = [
    "SKIP",
    "Decision",
    "ErrorInfo",
    "Event",
    "Kind",
    "Member",
    "NodeFilter",
    "NodeResult",
    "Or",
    "Phase",
    "Pipe",
    "Pipeline",
    "PodContext",
    "Reason",
    "ScorePart",
    "Scorer",
    "SetFilter",
    "Step",
    "StepTrace",
    "Tier",
    "decide",
    "describe",
    "flatten",
    "indexed_candidates",
    "skip",
]
