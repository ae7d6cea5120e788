"""The admin for runs (read-only) and the approvals staff answer on a run's page.

Every button posts to a small view here that goes through staff.access; the
admin never writes a run or an approval itself.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from engine.approvals import approval_shown
from engine.headlines import run_headline
from engine.models import Approval, Run
from engine.selectors import run_model_names
from engine.statuses import Status, stop_name
from engine.timeline import budget_bars, evidence_for, investigator, packet_of, run_timeline, stop_explanation
from providers import BuiltInModel
from staff.access import access_approval, access_run, can, do_answer_approval, do_cancel, may_cancel
from staff.admin.base import ReadOnlyAdmin, object_pk, packet_url, post_only, run_explanation, run_url
from staff.pages import staff_page
from staff.templatetags.staff_format import call_html


class PurposeFilter(admin.SimpleListFilter):
    """The run list opens on investigations; a candidate model's evaluation runs are a click away."""

    title, parameter_name = "purpose", "purpose"

    def lookups(self, request, model_admin):
        return Run.Purpose.choices

    def value(self):
        return super().value() or Run.Purpose.INVESTIGATION

    def queryset(self, request, queryset):
        return queryset.filter(purpose=self.value()) if self.value() in Run.Purpose.values else queryset.none()

    def choices(self, changelist):
        for value, label in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "display": label,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
            }


class ModelFilter(admin.AllValuesFieldListFilter):
    """The models runs were made with, each found by one probe of the model_name index (engine.selectors.
    run_model_names) where Django's filter reads every run (`SELECT DISTINCT`: 200 ms at 100,000 runs)."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices = run_model_names()  # type: ignore[assignment]  # Django's own is a queryset of names


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "ticket_link",
        "status",
        "detail",
        "model_name",
        "requests",
        "attempts",
        "created_at",
        "packet_state",
    )
    list_display_links = ("id",)
    list_filter = ("status", "detail", ("model_name", ModelFilter), "created_at", PurposeFilter)
    linked_lookups = ("status__in",)  # the dashboard's outcome links (dashboard.runs_url)
    list_select_related = ("ticket", "packet")
    list_columns = (
        *("id", "status", "detail", "model_name", "model_requests", "tool_attempts", "budget", "created_at"),
        *("ticket__ref", "packet__review_state"),
    )
    search_fields = ("ticket__ref",)
    list_per_page = 50
    show_full_result_count = False  # a second count of every run (kit.adminkit.LargeListPaginator)

    @admin.display(description="ticket", ordering="ticket__ref")
    def ticket_link(self, run):
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:tickets_ticket_change", args=[run.ticket_id]), run.ticket.ref
        )

    @admin.display(description="model requests")
    def requests(self, run):
        return f"{run.model_requests}/{run.budget.get('max_model_requests', '?')}"

    @admin.display(description="tool attempts")
    def attempts(self, run):
        return f"{run.tool_attempts}/{run.budget.get('max_tool_attempts', '?')}"

    @admin.display(description="packet")
    def packet_state(self, run):
        packet = packet_of(run)
        return format_html('<a href="{}">{}</a>', packet_url(packet.pk), packet.review_state) if packet else "—"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:run_id>/progress/", view(self.progress_view), name="agentrun_run_progress"),
            path("<int:run_id>/cancel/", view(post_only(self.cancel_view, run_url)), name="agentrun_run_cancel"),
            path("<int:run_id>/approval/", view(post_only(self.approval_view, run_url)), name="agentrun_run_approval"),
            *super().get_urls(),
        ]

    @staff_page
    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = access_run(user=request.user, run_id=object_pk(object_id))
        packet = packet_of(run)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Run {run.pk} on {run.ticket.ref}",
            "run": run,
            "packet": packet,
            "actor": investigator(run.model_name),
            "model_named": run.model_name != BuiltInModel.RULES,  # the rules investigator is named by `actor`
            "explanation": run_explanation(run, packet),
            "headline": run_headline(run=run, packet=packet),
            "timeline": run_timeline(run=run),
            "evidence": evidence_for(ticket_id=run.ticket_id, refs=list(run.evidence_refs)),
            "bars": budget_bars(run=run),
            "approvals": approvals_shown(run),
            "waiting": waiting_approval(run),
            "requested_by": getattr(getattr(run, "request", None), "requested_by", None),
            "active": run.is_active,
            "can_cancel": run.is_active and may_cancel(request.user, run),
            "can_approve": can(request.user, "agentrun.answer_approval"),
        }
        return TemplateResponse(request, "admin/agentrun/run/detail.html", context)

    @staff_page
    def progress_view(self, request, run_id: int):
        run = access_run(user=request.user, run_id=run_id)
        budget = run.get_budget()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Investigating {run.ticket.ref}",
            "run": run,
            "packet": packet_of(run),
            "active": run.is_active,
            "time_left": max(round(run.time_left(), 1), 0.0) if run.is_active else None,
            "deadline_seconds": budget.deadline_seconds,
            "max_model_requests": budget.max_model_requests,
            "max_tool_attempts": budget.max_tool_attempts,
            "bars": budget_bars(run=run),
            "explanation": stop_explanation(run.status, run.detail, run.stop_note, model_name=run.model_name),
            "headline": run_headline(run=run, packet=packet_of(run)),
        }
        return TemplateResponse(request, "admin/agentrun/run/progress.html", context)

    @staff_page(back_to=run_url)
    def cancel_view(self, request, run_id: int):
        run = do_cancel(user=request.user, run_id=run_id)
        note = "cancelled" if run.status == Status.CANCELLED else "will stop before its next operation"
        messages.success(request, f"Run {run.pk} {note}.")
        return HttpResponseRedirect(run_url(run_id))

    @staff_page(back_to=run_url)
    def approval_view(self, request, run_id: int):
        decision = request.POST.get("decision")
        if decision not in Approval.Answer.values:
            messages.error(request, "Choose approve or deny.")
            return HttpResponseRedirect(run_url(run_id))
        grant = decision == Approval.Answer.GRANT
        run = do_answer_approval(
            user=request.user, run_id=run_id, grant=grant, note="" if grant else request.POST.get("reason", "")
        )
        word = "approved" if grant else "denied"
        messages.success(request, f"Call {word}. Run {run.pk}: {stop_name(run.status).lower()}.")
        return HttpResponseRedirect(reverse("admin:agentrun_run_progress", args=[run.pk]))


def approvals_shown(run: Run):
    now = timezone.now()
    return [approval_shown(a, run, now) for a in run.approvals.all()]


def waiting_approval(run: Run):
    """The run's pending approval as staff see it (expired once the deadline passed), or None; or the
    one nobody answered before the run ended at its deadline."""

    def unanswered(approval: Approval) -> bool:
        return approval.state == Approval.State.PENDING or (
            run.status == Status.DEADLINE and approval.state == Approval.State.EXPIRED and not approval.decided_by
        )

    shown = [w for w in approvals_shown(run) if unanswered(w.approval)]
    return shown[0] if shown else None


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "run_link",
        "call",
        "shown_state",
        "time_left",
        "reason",
        "requested_at",
        "decided_by",
        "note",
    )
    list_filter = ("state", "tool")
    list_select_related = ("run__ticket",)
    list_columns = (
        *("id", "tool", "args", "state", "reason", "requested_at", "decided_by", "note"),
        *("run__status", "run__deadline_at", "run__ticket__ref"),
    )
    show_full_result_count = False  # a second count of every approval (kit.adminkit.LargeListPaginator)
    list_per_page = 50  # as the run list

    def get_queryset(self, request):  # an evaluation answers its own calls: they are nobody's to answer
        return super().get_queryset(request).filter(run__purpose=Run.Purpose.INVESTIGATION)

    @admin.display(description="run")
    def run_link(self, approval):
        return format_html(
            '<a href="{}">run {} on {}</a>', run_url(approval.run_id), approval.run_id, approval.run.ticket.ref
        )

    @admin.display(description="call", ordering="tool")
    def call(self, approval):
        return call_html(approval.tool, approval.args)

    @admin.display(description="state", ordering="state")
    def shown_state(self, approval):
        return approval_shown(approval, approval.run, timezone.now()).state_shown

    @admin.display(description="time left")
    def time_left(self, approval):
        return approval_shown(approval, approval.run, timezone.now()).time_left

    @staff_page
    def change_view(self, request, object_id, form_url="", extra_context=None):
        approval = access_approval(user=request.user, approval_id=object_pk(object_id))
        return HttpResponseRedirect(run_url(approval.run_id))
