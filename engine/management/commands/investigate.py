import json
import textwrap

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from engine.config import ConfigError
from engine.headlines import run_headline
from engine.loop import run_advance
from engine.packetview import PacketView, packet_view
from engine.selectors import run_report, ticket_active_run
from engine.services import RunError, investigation_start, run_start
from engine.statuses import Status
from engine.timeline import packet_of, stop_explanation
from engine.watchdog import runs_expire_overdue
from tickets.models import CustomerSession, Ticket


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Investigate a ticket with the configured model and print the review packet."

    def add_arguments(self, parser):
        parser.add_argument("ticket", help="ticket reference, e.g. T-1001")
        parser.add_argument("--model", help=f"model to use (default AGENT_MODEL, now {settings.AGENT_MODEL!r})")
        parser.add_argument("--session", help="customer session to act for (default: the ticket's)")
        parser.add_argument("--json", action="store_true", help="print the run_scenario JSON shape")
        parser.add_argument("--enqueue", action="store_true", help='start the run on the workers; print {"run": ID}')

    def handle(self, *args, ticket: str, model: str | None, session: str | None, json: bool, enqueue: bool, **options):
        found = Ticket.objects.select_related("session").filter(ref=ticket).first()
        if found is None:
            raise CommandError(f"no ticket {ticket!r} (load the demo data with `manage.py seed_demo`)")
        acting = found.session
        if session:
            chosen = CustomerSession.objects.filter(ref=session).first()
            if chosen is None:
                raise CommandError(f"no customer session {session!r}")
            acting = chosen
        runs_expire_overdue(ticket_id=found.pk)  # a run past its deadline no longer holds the ticket
        active = ticket_active_run(ticket=found)
        if active is not None:
            raise CommandError(
                f"run {active.pk} on {found.ref} is still {active.status}; wait for it to end"
                f" (show_run {active.pk} --wait SECONDS)"
            )
        try:
            if enqueue:
                run = investigation_start(ticket=found, session=acting, model_name=model)
                self.stdout.write(_json_dump({"run": run.pk}))
                return
            run = run_start(ticket=found, session=acting, model_name=model)
        except (RunError, ConfigError) as exc:
            raise CommandError(str(exc)) from None
        run = run_advance(run.pk)
        report = run_report(run_id=run.pk)
        if json:
            self.stdout.write(_json_dump(report))
            return
        packet = packet_of(run)
        if packet is None or run.status == Status.WAITING_APPROVAL:  # no packet yet: the run as it stands
            self.stdout.write(render_run(report, headline=run_headline(run=run, packet=packet).text))
            return
        self.stdout.write(render_packet(packet_view(run=run, packet=packet)))


def _json_dump(report) -> str:
    return json.dumps(report)


def render_packet(view: PacketView) -> str:
    """The packet in the words staff read, every line a projection of its PacketView."""
    by_ref = {a["evidence"]: a for a in view.attempts if a.get("evidence")}
    lines = [
        f"Review packet for {view.ticket_ref} (run {view.run_id}, model {view.model_name})",
        f"Stop reason: {view.stop_reason}" + (f" / {view.detail}" if view.detail else ""),
        *([f"  {view.headline.text}"] if view.headline.text else []),
        f"  {view.stop_sentence}",
        *([f"  Note: {view.stop_note}"] if view.stop_note else []),
    ]
    if view.summary:
        lines += ["", "Summary:", *textwrap.wrap(view.summary, 96, initial_indent="  ", subsequent_indent="  ")]
    lines += ["", "Evidence:"]
    for ref in view.evidence_refs:
        a = by_ref.get(ref)
        lines.append(f"  {ref}: {a['tool']} {json.dumps(a['args'])}" if a else f"  {ref}: from an earlier run")
    lines += ["", "Attempted operations:"]
    lines += [f"  {a['tool']} {json.dumps(a['args'])} -> {a['outcome']}" for a in view.attempts] or ["  none"]
    lines += ["", "Open questions:"]
    lines += [f"  - {q}" for q in view.open_questions] or ["  none"]
    if view.reply:
        lines += ["", "Suggested reply (for staff to edit and send from the help desk):"]
        lines += [f"  | {line}".rstrip() for line in view.reply.splitlines()]
    lines += ["", "Budget spent: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in view.budget_spent.items())]
    lines.append("Nothing was sent to the customer; nothing was changed.")
    return "\n".join(lines)


def render_run(report: dict, *, headline: str = "") -> str:
    """A run that has no packet yet (it waits for a supervisor's approval), from its report."""
    status = report["status"]
    lines = [
        f"Review packet for {report['ticket']} (run {report['run']}, model {report['model']})",
        f"Stop reason: {status}" + (f" / {report['detail']}" if report["detail"] else ""),
        *([f"  {headline}"] if headline else []),
        f"  {stop_explanation(status, report['detail'] or '', model_name=report['model'])}",
        "",
        "Evidence:",
        "",
        "Attempted operations:",
    ]
    lines += [f"  {d['tool']} {json.dumps(d['args'])} -> {d['outcome']}" for d in report["dispatched"]] or ["  none"]
    lines += [
        "",
        "Open questions:",
        "  none",
        "",
        "Budget spent: ",
        "Nothing was sent to the customer; nothing was changed.",
    ]
    return "\n".join(lines)
