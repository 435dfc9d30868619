"""Decisions for people: an aligned table, and with --detail the chain step by step."""

from __future__ import annotations

from berth.engine.types import Decision, NodeResult


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _part_label(step: str) -> str:
    return step.split("/", 1)[-1].upper()


def table(decision: Decision, *, detail: bool = False) -> str:
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
        for name in node.parts:
            if name not in part_names:
                part_names.append(name)
    header = ["", "NODE", "FEASIBLE", "SCORE", *(_part_label(p) for p in part_names), "REASONS"]
    rows = [header]
    for node in sorted(decision.nodes, key=_order):
        mark = "*" if node.name == decision.chosen else ""
        feasible = "yes" if node.feasible else "no"
        parts = [
            _fmt(node.parts[p].weighted) if (node.feasible and p in node.parts) else "" for p in part_names
        ]
        reasons = "; ".join(str(r) for r in node.reasons)
        rows.append([mark, node.name, feasible, _fmt(node.score), *parts, reasons])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append(("  ".join(cells) + "  " + row[-1]).rstrip())

    if decision.events:
        lines.append("")
        lines.append("events:")
        for event in decision.events:
            lines.append(f"  {event.type:<7} {event.reason}: {event.message}")
    if detail:
        lines.append("")
        lines.append("chain: " + " -> ".join(decision.chain))
        for i, trace in enumerate(decision.steps, 1):
            note = f"  ({trace.note})" if trace.note else ""
            lines.append(f"{i:>2}. {trace.step} [{trace.phase}] {len(trace.remaining)} remaining{note}")
            for node, reason in trace.removed.items():
                lines.append(f"      - {node}: {reason}")
            for node, part in trace.scores.items():
                lines.append(
                    f"      + {node}: raw {_fmt(part.raw)}, normalised {_fmt(part.normalised)}, "
                    f"weighted {_fmt(part.weighted)}"
                )
    return "\n".join(lines)


def _order(node: NodeResult) -> tuple:
    # Candidates first by score, then the set-aside, then the infeasible, each by name.
    rank = 0 if node.candidate else (1 if node.feasible else 2)
    return (rank, -(node.score or 0.0), node.name)
