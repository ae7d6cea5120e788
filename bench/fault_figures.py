"""The fault benchmark's figures for one case, its invariants, and the table (bench/fault_bench.py)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from engine.models import ModelRequest, ReviewPacket, Run, ToolAttempt
from engine.statuses import TERMINAL, Status
from tickets.models import Evidence

FAILED = {
    ToolAttempt.Outcome.INTERRUPTED,
    ToolAttempt.Outcome.TIMEOUT,
    ToolAttempt.Outcome.TRANSIENT_ERROR,
    ToolAttempt.Outcome.ERROR,
}
TASK_DIED = re.compile(r"raised unexpected")
WATCHDOG_DISCARDED = re.compile(r"Discarding revoked task: agentrun\.watchdog")
LATE_BY_S = 1.0  # a run that ends more than this after its deadline is late


def p95(values: list[float]) -> float | None:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)] if values else None


def _at(moment: datetime) -> float:
    return moment.timestamp()


@dataclass(frozen=True)
class Reference:
    """What a quiet run's packet of T-1001 holds: the source refs of its evidence (J-42, DOC-EXPORT-7@r3, ...)
    and its open questions."""

    sources: frozenset[str]
    questions: frozenset[str]


def reference_of(run_id: int) -> Reference:
    packet = ReviewPacket.objects.select_related("run").get(run_id=run_id)
    return Reference(frozenset(_sources([packet.run], {run_id: packet})[run_id]), frozenset(packet.open_questions))


def case_figures(ids: list[int], window, reference: Reference, worker_logs: str) -> dict:
    """The figures of the runs `ids` around the fault in `window`, against a quiet run's packet."""
    runs = list(Run.objects.filter(pk__in=ids).order_by("pk"))
    packets = {p.run_id: p for p in ReviewPacket.objects.filter(run_id__in=ids)}
    attempts = defaultdict(list)
    for attempt in ToolAttempt.objects.filter(run_id__in=ids).order_by("run_id", "seq"):
        attempts[attempt.run_id].append(attempt)
    sources = _sources(runs, packets)
    ended = [run for run in runs if run.status in TERMINAL]
    missing = [run for run in ended if run.pk in packets and not reference.sources <= sources[run.pk]]
    named = [run for run in missing if _named_incomplete(packets[run.pk], attempts[run.pk], reference)]
    ends = [_at(run.ended_at) for run in ended if run.ended_at]
    after = [_at(packets[run.pk].created_at) for run in ended if run.pk in packets]
    after = [moment for moment in after if moment >= window.fault_end]
    return {
        "runs": len(runs),
        "with_packet": sum(1 for run in ended if run.pk in packets),
        "with_two_packets": _with_two_packets(ids),
        "not_ended": len(runs) - len(ended),
        "statuses": dict(sorted(Counter(str(run.status) for run in runs).items())),
        "missing_evidence": len(missing),
        "named_incomplete": len(named),
        "task_deaths": len(TASK_DIED.findall(worker_logs)),
        "watchdog_discarded": len(WATCHDOG_DISCARDED.findall(worker_logs)),
        "past_deadline": sum(1 for run in runs if _late(run)),
        "last_start_s": round(window.last_start - window.began, 2),
        "fault_s": [round(window.fault_start - window.began, 2), round(window.fault_end - window.began, 2)],
        "recover_last_s": round(max(max(ends) - window.fault_end, 0.0), 2) if ends else None,
        "recover_first_packet_s": round(min(after) - window.fault_end, 2) if after else None,
        "p95_run_s": _p95_run_time(ended),
        "start_while_down_s": window.start_while_down_s,
        "start_while_down_error": window.start_error,
        "invariant_violations": invariant_violations(ids + window.extra_ids),
    }


def _sources(runs: list[Run], packets: dict[int, ReviewPacket]) -> dict[int, set[str]]:
    """For each run, the source refs of the evidence its packet cites (J-42, DOC-EXPORT-7@r3, ...)."""
    rows = {(e.ticket_id, e.number): e.source_ref for e in Evidence.objects.filter(ticket__runs__in=runs).distinct()}
    found = {}
    for run in runs:
        packet = packets.get(run.pk)
        numbers = [int(ref[1:]) for ref in (packet.evidence_refs if packet else []) if ref[1:].isdigit()]
        found[run.pk] = {
            part.strip() for n in numbers for part in rows.get((run.ticket_id, n), "").split(",") if part.strip()
        }
    return found


def _named_incomplete(packet: ReviewPacket, attempts: list[ToolAttempt], reference: Reference) -> bool:
    """Whether a lookup of the run whose attempts all failed is named (an argument of it) in an open question
    the quiet run's packet does not ask (its questions name J-42 already)."""
    by_call = defaultdict(list)
    for attempt in attempts:
        by_call[attempt.call_key].append(attempt)
    questions = " ".join(q for q in packet.open_questions or [] if q not in reference.questions).lower()
    for tried in by_call.values():
        if all(a.outcome in FAILED for a in tried):
            values = [str(v).lower() for v in (tried[0].args or {}).values() if str(v).strip()]
            if any(value in questions for value in values):
                return True
    return False


def _late(run: Run) -> bool:
    if run.status == Status.DEADLINE:
        return True
    if run.ended_at is None:
        return datetime.now(run.deadline_at.tzinfo).timestamp() - _at(run.deadline_at) > LATE_BY_S
    return (run.ended_at - run.deadline_at).total_seconds() > LATE_BY_S


def _p95_run_time(ended: list[Run]) -> float | None:
    value = p95([(run.ended_at - run.created_at).total_seconds() for run in ended if run.ended_at])
    return round(value, 2) if value is not None else None


def _with_two_packets(ids: list[int]) -> int:
    return ReviewPacket.objects.filter(run_id__in=ids).values("run_id").annotate(n=Count("id")).filter(n__gt=1).count()


# --- invariants ----------------------------------------------------------------------------------


def invariant_violations(ids: list[int]) -> list[str]:
    """What breaks the loop's invariants among the runs `ids` (empty: none).

    Every run has ended with one packet naming its status; an ended run holds no
    reservation (no pending model request or attempt, nothing reserved); its
    counters equal its rows; its packet cites no evidence twice and no lookup is
    recorded twice as evidence of its ticket; no counter is over its budget.
    """
    runs = list(Run.objects.filter(pk__in=ids).order_by("pk"))
    packets = {p.run_id: p for p in ReviewPacket.objects.filter(run_id__in=ids)}
    requests = Counter(ModelRequest.objects.filter(run_id__in=ids).values_list("run_id", flat=True))
    tries = Counter(ToolAttempt.objects.filter(run_id__in=ids).values_list("run_id", flat=True))
    pending = set(ModelRequest.objects.filter(run_id__in=ids, outcome=ModelRequest.Outcome.PENDING).values_list(
        "run_id", flat=True
    )) | set(ToolAttempt.objects.filter(run_id__in=ids, outcome=ToolAttempt.Outcome.PENDING).values_list(
        "run_id", flat=True
    ))  # fmt: skip
    problems = [f"{n} runs with two packets" for n in [_with_two_packets(ids)] if n]
    for run in runs:
        problems += _run_violations(run, packets.get(run.pk), requests[run.pk], tries[run.pk], run.pk in pending)
    lookups = Counter(
        (ticket_id, json.dumps(args, sort_keys=True), tool)
        for ticket_id, tool, args in Evidence.objects.filter(ticket__runs__in=runs)
        .distinct()
        .values_list("ticket_id", "tool", "args")
    )
    problems += [f"ticket {key[0]}: {key[2]} {key[1]} recorded {n} times" for key, n in lookups.items() if n > 1]
    return problems


def _run_violations(run: Run, packet: ReviewPacket | None, requests: int, tries: int, pending: bool) -> list[str]:
    name, problems = f"run {run.pk}", []
    if run.status not in TERMINAL:
        return [f"{name} did not end ({run.status})"]
    if packet is None or packet.stop_reason != run.status:
        problems.append(f"{name} ended {run.status} with {'no packet' if packet is None else packet.stop_reason}")
    if pending or run.tokens_reserved or run.cost_reserved_micros:
        problems.append(f"{name} ended with a reservation left")
    if (run.model_requests, run.tool_attempts) != (requests, tries):
        problems.append(f"{name} counts {run.model_requests}/{run.tool_attempts}, rows {requests}/{tries}")
    if packet is not None and len(set(packet.evidence_refs)) != len(packet.evidence_refs):
        problems.append(f"{name}'s packet cites evidence twice: {packet.evidence_refs}")
    budget = run.get_budget()
    over = [
        what
        for what, used, most in (
            ("model requests", run.model_requests, budget.max_model_requests),
            ("tool attempts", run.tool_attempts, budget.max_tool_attempts),
            ("tokens", run.tokens_used, budget.max_total_tokens),
            ("cost", run.cost_used_micros, budget.max_cost_micros),
        )
        if used > most
    ]
    return problems + ([f"{name} over budget: {', '.join(over)}"] if over else [])


# --- the report ----------------------------------------------------------------------------------

COLUMNS = (
    ("case", "case"),
    ("with_packet", "packets"),
    ("with_two_packets", "two"),
    ("missing_evidence", "missing ev."),
    ("named_incomplete", "named"),
    ("task_deaths", "deaths"),
    ("past_deadline", "late"),
    ("recover_last_s", "recover s"),
    ("recover_first_packet_s", "1st pkt s"),
    ("p95_run_s", "p95 s"),
    ("watchdog_discarded", "wd disc."),
    ("invariants", "invariants"),
    ("statuses", "statuses"),
)


def report(rows: list[dict], plan, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"plan": vars(plan), "cases": rows}))
        return 0
    cells = [[_cell(key, row) for key, _ in COLUMNS] for row in rows]
    heads = [head for _, head in COLUMNS]
    widths = [max(len(head), *(len(line[i]) for line in cells)) for i, head in enumerate(heads)]
    for line in [heads, *cells]:
        print("  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip())
    for row in rows:
        if "error" in row:
            print(f"{row['case']}: failed: {row['error']}")
            continue
        extra = f", start while down {row['start_while_down_s']} s" if row["start_while_down_s"] is not None else ""
        extra += f" ({row['start_while_down_error']})" if row["start_while_down_error"] else ""
        print(
            f"{row['case']}: {row['runs']} runs started by {row['last_start_s']} s,"
            f" the fault from {row['fault_s'][0]} s to {row['fault_s'][1]} s{extra}"
        )
        for problem in row["invariant_violations"][:10]:
            print(f"  invariant: {problem}")
    return 0


def _cell(key: str, row: dict) -> str:
    if "error" in row:
        return row["case"] if key == "case" else "-"
    if key == "invariants":
        return "ok" if not row["invariant_violations"] else f"{len(row['invariant_violations'])} broken"
    if key == "statuses":
        return " ".join(f"{status}:{n}" for status, n in row["statuses"].items())
    value = row.get(key)
    return "-" if value is None else str(value)
