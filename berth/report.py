"""Decisions for people: an aligned table, and with --detail the steps that acted.

The table has a column per score part that told nodes apart (a part that is 0 on every node adds
nothing to read). The detail lists the steps that acted, in the order they ran, with what they did:
the nodes each removed or set aside with the reason, the scores it gave; the steps that skipped or
changed nothing are named once, on one line. On a large cluster a step that removed many nodes is
summarised by reason, with a few of the nodes named, and a scorer shows its highest scores.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from berth.engine.decision import Decision
from berth.engine.types import NodeResult, StepTrace

if TYPE_CHECKING:
    from berth.analysis.audit import AuditReport
    from berth.analysis.rebalance import Plan
    from berth.analysis.room import Capacity, Room, RoomLeft
    from berth.analysis.simulate_diff import PodChange

# Above this many nodes in one step, --detail summarises instead of listing every node.
DETAIL_NODES = 12
EXAMPLES = 3


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _part_label(step: str) -> str:
    vocabulary, _, name = step.rpartition("/")
    if vocabulary == "kube":  # kube-scheduler's scores, named for whose they are
        return "KUBE-PREFERRED" if name == "preferences" else "KUBE-SCORE"
    return name.removeprefix("score-").upper()


def table(decision: Decision, *, detail: bool = False, headers: bool = True) -> str:
    lines: list[str] = []
    if decision.error:
        head = f"pod {decision.pod}: not placed ({decision.error.code}) - {decision.error.message}"
    else:
        head = f"pod {decision.pod}: placed on {decision.chosen}"
        if decision.had_no_choice:
            head += " (had no choice: the only feasible node)"
    lines.append(f"{head}   [seed {decision.seed}]")
    if decision.error and len(decision.error.errors) > 1:
        lines.extend(f"  - {e}" for e in decision.error.errors)

    part_names: list[str] = []
    for node in decision.nodes:
        for name, part in node.parts.items():
            if name not in part_names and node.feasible and part.weighted:
                part_names.append(name)
    order = {name: i for i, name in enumerate(decision.chain)}
    part_names.sort(key=lambda name: order.get(name, len(order)))
    header = ["", "NODE", "FEASIBLE", "SCORE", *(_part_label(p) for p in part_names), "REASONS"]
    rows = [header]  # measured with the header, so columns line up with or without it
    for node in sorted(decision.nodes, key=_order):
        mark = "*" if node.name == decision.chosen else ""
        feasible = "yes" if node.feasible else "no"
        parts = [
            _fmt(node.parts[p].weighted) if (node.feasible and p in node.parts) else "" for p in part_names
        ]
        reasons = "; ".join(str(r) for r in node.reasons)
        rows.append([mark, node.name, feasible, _fmt(node.score), *parts, reasons])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for row in rows if headers else rows[1:]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append(("  ".join(cells) + "  " + row[-1]).rstrip())

    # The refusal's event says what the first line said: not twice.
    said = decision.error.message if decision.error else None
    events = [e for e in decision.events if e.message != said]
    if events:
        lines.append("")
        lines.append("events:")
        for event in events:
            lines.append(f"  {event.type:<7} {event.reason}: {event.message}")
    if detail:
        lines.append("")
        lines.extend(_steps(decision))
    return "\n".join(lines)


def _steps(decision: Decision) -> list[str]:
    """The steps that removed, set aside or scored nodes, numbered by their place in the chain; the
    others (skipped, or keeping every node and scoring none) summed up in one line, each named once.
    `-o json` holds every step's trace."""
    acted = [(i, t) for i, t in enumerate(decision.steps, 1) if _acted(t)]
    idle = list(dict.fromkeys(t.step for t in decision.steps if not _acted(t)))
    lines = [f"chain: {len(decision.steps)} steps; {len(acted)} removed, set aside or scored nodes:"]
    for i, trace in acted:
        note = f"  ({trace.note})" if trace.note else ""
        lines.append(f"{i:>2}. {trace.step} [{trace.phase}] {len(trace.remaining)} remaining{note}")
        lines.extend(_removed(trace))
        lines.extend(_scores(trace))
    if idle:
        lines.append(f"the other {len(idle)} kept every node and scored none: {', '.join(idle)}")
    return lines


def _acted(trace: StepTrace) -> bool:
    return bool(trace.removed) or any(part.weighted for part in trace.scores.values())


def _removed(trace: StepTrace) -> list[str]:
    if len(trace.removed) <= DETAIL_NODES:
        return [f"      - {node}: {reason}" for node, reason in trace.removed.items()]
    groups: dict[str, list[str]] = defaultdict(list)
    for node, reason in trace.removed.items():
        groups[reason.short()].append(node)
    lines = []
    for text, nodes in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        shown = ", ".join(nodes[:EXAMPLES]) + (", ..." if len(nodes) > EXAMPLES else "")
        lines.append(f"      - {len(nodes)} node(s): {text} ({shown})")
    return lines


def _scores(trace: StepTrace) -> list[str]:
    ranked = sorted(trace.scores.items(), key=lambda item: (-item[1].weighted, item[0]))
    shown = ranked if len(ranked) <= DETAIL_NODES else ranked[:EXAMPLES]
    lines = [
        f"      + {node}: raw {_fmt(part.raw)}, normalised {_fmt(part.normalised)}, "
        f"weighted {_fmt(part.weighted)}"
        for node, part in shown
    ]
    if len(shown) < len(ranked):
        lines.append(
            f"      + ... {len(ranked) - len(shown)} more node(s), "
            f"the lowest weighted {_fmt(ranked[-1][1].weighted)}"
        )
    return lines


def _order(node: NodeResult) -> tuple:
    # Candidates first by score, then the set-aside, then the infeasible, each by name.
    rank = 0 if node.candidate else (1 if node.feasible else 2)
    return (rank, -(node.score or 0.0), node.name)


def capacity_table(report: Capacity, *, wide: bool = False, headers: bool = True) -> str:
    """`berth capacity` for people: how many more pods fit, per node how many went there, and why
    each node refused the next one; wide adds the decision that refuses the next pod."""
    if report.invalid:
        return f"pod {report.pod}: none fit: the specification is invalid: {report.invalid}"
    total = (
        str(report.total) if report.bounded else f"at least {report.total} (stopped at --max {report.limit})"
    )
    lines = [f"pod {report.pod}: {total} more fit in the cluster"]
    if report.refusal is not None and report.refusal.error is not None:
        lines.append(f"the next one is refused: {report.refusal.error.message}")
    rows = [
        [node.name, str(node.fits), str(node.pods), node.limited_by or "-"]
        for node in sorted(report.nodes, key=lambda n: (-n.fits, n.name))
    ]
    lines += aligned(["NODE", "FITS", "PODS", "LIMITED BY"], rows, headers=headers)
    if any("cpu_cap" in node.limited_by for node in report.nodes):
        lines.append("(cpu_cap is the allocator's CPU unit: 100 = one CPU, 25 = 250m)")
    if wide and report.refusal is not None:
        lines += ["", "the next one:", table(report.refusal, headers=headers)]
    return "\n".join(lines)


def room_table(room: RoomLeft, *, headers: bool = True) -> str:
    """`berth capacity` without a pod: the room each node and each zone has left."""

    def row(r: Room) -> list[str]:
        cpu, memory, pods = r.allocatable
        return [
            r.name,
            f"{_cpu(r.cpu)}/{_cpu(cpu)}",
            f"{_bytes(r.memory)}/{_bytes(memory)}",
            f"{r.pods}/{pods}",
            r.note or "-",
        ]

    lines = ["room left per zone (nodes that take new pods), free/allocatable:"]
    lines += aligned(
        ["ZONE", "CPU", "MEMORY", "PODS", "NODES"], [row(z) for z in room.zones], headers=headers
    )
    lines += ["", "per node:"]
    rows = [[n.zone, *row(n)] for n in room.nodes]
    lines += aligned(["ZONE", "NODE", "CPU", "MEMORY", "PODS", "NOTE"], rows, headers=headers)
    return "\n".join(lines)


def _cpu(millicores: int) -> str:
    return f"{millicores / 1000:g}" if millicores % 1000 == 0 else f"{millicores}m"


def _bytes(value: int) -> str:
    for unit, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f}{unit}".replace(".0" + unit, unit)
    return str(value)


def aligned(header: list[str], rows: list[list[str]], *, headers: bool = True) -> list[str]:
    """Rows in columns as wide as their widest cell (the header's too, shown or not); the last
    column is not padded."""
    every = [header, *rows]
    widths = [max(len(r[i]) for r in every) for i in range(len(header) - 1)]
    return [
        "  ".join([*(c.ljust(widths[i]) for i, c in enumerate(r[:-1])), r[-1]]).rstrip()
        for r in (every if headers else rows)
    ]


def audit_table(report: AuditReport, *, wide: bool = False, headers: bool = True) -> str:
    """`berth audit` for people: one section per kind of finding, violations grouped by rule, each
    with the pods it collides with; wide: one row per finding. The warnings come first, then the
    findings or "clean"."""
    lines = [f"warning: {w}" for w in report.warnings]
    if wide:
        return "\n".join(lines + _audit_rows(report, headers=headers))
    if report.clean:
        return "\n".join([*lines, f"clean: {report.checked} pod(s) checked, nothing found"])
    if headers:
        lines.append(f"{report.findings()} finding(s) in {report.checked} pod(s) checked")

    def section(title: str) -> None:
        if headers:
            lines.extend(["", title])

    if report.violations:
        section(f"VIOLATIONS: the node the pod is on breaks a hard rule ({len(report.violations)})")
        for rule, found in report.by_rule().items():
            if headers:
                lines.append(f"  {rule} ({len(found)})")
            lines += [f"    {v.pod} on {v.node}: {v.reason}{_collides(v.collides_with)}" for v in found]
    if report.refused:
        section(f"REFUSED ON RESCHEDULE: no node satisfies the pod now ({len(report.refused)})")
        for r in report.refused:
            rules = ", ".join(r.rules) or "the chain"
            lines.append(f"  {r.pod} on {r.node}, refused by {rules}: {r.message}")
    if report.deprecated:
        section(f"DEPRECATED: weighted affinity ({len(report.deprecated)})")
        lines += [f"  {n.pod} on {n.node}: {n.message}" for n in report.deprecated]
    if report.invalid:
        section(f"INVALID: the specification is refused ({len(report.invalid)})")
        lines += [f"  {n.pod} on {n.node}: {n.message}" for n in report.invalid]
    return "\n".join(lines)


def _collides(pods: Sequence[str]) -> str:
    return f" (collides with {', '.join(pods)})" if pods else ""


def _audit_rows(report: AuditReport, *, headers: bool) -> list[str]:
    rows = [
        ["violation", v.pod, v.node, v.rule, ",".join(v.collides_with) or "-", v.reason]
        for v in sorted(report.violations, key=lambda v: (v.pod, v.rule))
    ]
    rows += [["refused", r.pod, r.node, ",".join(r.rules) or "-", "-", r.message] for r in report.refused]
    rows += [["deprecated", n.pod, n.node, "-", "-", n.message] for n in report.deprecated]
    rows += [["invalid", n.pod, n.node, "-", "-", n.message] for n in report.invalid]
    return aligned(["KIND", "POD", "NODE", "RULE", "COLLIDES WITH", "REASON"], rows, headers=headers)


@dataclass(frozen=True, slots=True)
class ReplicaSummary:
    """What a simulated workload came to: how many of its pods were placed, where, and the first
    refusal (the later pods of a workload that ran out of room are refused for the same reason)."""

    placed: int
    total: int
    per_node: dict[str, int]
    first_refused: str | None = None
    first_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "placed": self.placed,
            "total": self.total,
            "podsPerNode": self.per_node,
            "firstRefusal": (
                {"pod": self.first_refused, "reason": self.first_reason} if self.first_refused else None
            ),
        }


def replica_summary(decisions: Sequence[Decision]) -> ReplicaSummary:
    per_node = Counter(d.chosen for d in decisions if d.chosen)
    refused = next((d for d in decisions if d.error is not None), None)
    return ReplicaSummary(
        placed=sum(per_node.values()),
        total=len(decisions),
        per_node=dict(sorted(per_node.items())),
        first_refused=refused.pod if refused else None,
        first_reason=f"({refused.error.code}) {refused.error.message}" if refused and refused.error else None,
    )


def summary_table(summary: ReplicaSummary, *, per_node: bool = False, headers: bool = True) -> str:
    """The workload's outcome in a line or two; `per_node`: a table of pods per node, then the totals
    (simulate --summary, in place of one table per replica)."""
    if per_node:
        rows = [[node, str(count)] for node, count in summary.per_node.items()]
        lines = aligned(["NODE", "PODS"], rows, headers=headers) if rows else []
        lines.append(f"placed {summary.placed} of {summary.total}, refused {summary.total - summary.placed}")
    else:
        spread = ", ".join(f"{node} {count}" for node, count in summary.per_node.items()) or "none"
        lines = [f"placed {summary.placed} of {summary.total}; pods per node: {spread}"]
    if summary.first_refused:
        lines.append(f"first refusal: {summary.first_refused} {summary.first_reason}")
    return "\n".join(lines)


def plan_table(found: Plan, *, applied: bool, outcomes: Sequence[Any] = ()) -> str:
    """The plan for people, like Nomad's `job plan`: the moves, then the pods left in place and why."""
    if found.clean:
        return f"clean: {found.checked} pod(s) checked, no node breaks a pod's hard rule"
    lines = [
        f"{len(found.moves)} to move, {len(found.kept)} left in place ({found.checked} pod(s) checked)"
        + ("" if applied else "; dry run: --apply evicts")
    ]
    done = {o.move.pod: o for o in outcomes}
    if found.moves:
        lines += ["", "MOVES"]
        for m in found.moves:
            outcome = done.get(m.pod)
            status = (
                f"  [{outcome.outcome}{': ' + outcome.detail if outcome.detail else ''}]" if outcome else ""
            )
            lines.append(f"  ~ {m.pod}: {m.node} -> {m.target}{status}")
            lines += [f"      {reason}" for reason in m.reasons]
            if m.budget and not outcome:
                lines.append(f"      ! {m.budget}")
    if found.kept:
        lines += ["", "LEFT IN PLACE"]
        for k in found.kept:
            rules = f" ({', '.join(k.rules)})" if k.rules else ""
            lines.append(f"  = {k.pod} on {k.node}{rules}: {k.why}")
    return "\n".join(lines)


def diff_table(found: Sequence[PodChange], pods: int, *, headers: bool = True) -> str:
    """simulate --diff for people: the pods the what-if changes, before -> after, and why."""
    rows = [[c.pod, f"{c.before} -> {c.after}", c.reason] for c in found]
    lines = aligned(["POD", "BEFORE -> AFTER", "REASON"], rows, headers=headers) if rows else []
    lines.append(f"{len(found)} of {pods} pod(s) change with the what-if")
    return "\n".join(lines)
