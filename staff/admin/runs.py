"""The admin for runs (read-only), the review queue, approvals, reviews and API tokens.

Every button posts to a small view here that goes through staff.access; the
admin never writes a run, a packet or a review itself.
"""
from __future__ import annotations

import json
from datetime import datetime, time

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Case, IntegerField, Value, When
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from engine.approvals import approval_shown
from engine.budgets import Budget, BudgetError, budget_limits
from engine.checks import approval_time_check
from engine.config import budget_defaults
from engine.headlines import run_headline
from engine.models import (
    ApiToken,
    Approval,
    BudgetDefaults,
    Evaluation,
    EvaluationCase,
    EvidenceCheck,
    PacketReview,
    ReviewPacket,
    Run,
    StaffPreference,
    WebhookAttempt,
    WebhookDelivery,
    available_time_zones,
)
from engine.statuses import TERMINAL, Status, stop_name
from engine.timeline import (
    budget_bars,
    evidence_for,
    investigator,
    packet_of,
    run_timeline,
    spent_rows,
    stop_explanation,
)
from evaluation.services import evaluation_figures, result_of
from kit.adminkit import StaffSiteAdmin, admin_site_harden
from kit.csvexport import csv_response
from providers import BuiltInModel
from staff.access import (
    Refused,
    access_approval,
    access_packet,
    access_run,
    can,
    do_answer_approval,
    do_cancel,
    do_evaluation_start,
    do_packet_recheck,
    do_review,
    evaluation_models,
    may_cancel,
    require,
)
from staff.auth import token_create
from staff.dashboard_views import refusal
from staff.middleware import SESSION_KEY as TIME_ZONE_SESSION_KEY
from staff.queue import packet_next_pending, packet_previous_pending, packet_to_review_after
from staff.recheck import ItemCheck, document_links, evidence_changes, needing_acknowledgement
from staff.reviews import packet_decision
from tools.compare import Outcome

PERMISSION_BUDGET = "agentrun.change_budget_defaults"


class ReadOnly:
    """Nothing added, changed or deleted: for model admins and inlines that only show."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnly, StaffSiteAdmin):
    pass


def _post_only(view, page):
    """`view` answers POST only; anything else (a link followed, a page reloaded, a bookmark) is sent to the page
    of the object the action is for, `page(**kwargs)`, where the action's button is."""
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return HttpResponseRedirect(page(**kwargs))
        return view(request, *args, **kwargs)

    return wrapped


def object_pk(object_id: str) -> int:
    """The admin URL's object id as a primary key; one that is not a number names no object (0).

    The access_* check then refuses a user without permission before it looks anything up.
    """
    return int(object_id) if str(object_id).isdigit() else 0


def run_url(run_id: int) -> str:
    return reverse("admin:agentrun_run_change", args=[run_id])


def packet_url(packet_id: int) -> str:
    return reverse("admin:agentrun_reviewpacket_change", args=[packet_id])


def _explanation(run: Run, packet: ReviewPacket | None) -> str:
    """The stop reason in words; a refused proposal's own reason (shown beside it) replaces the run's note."""
    note = "" if packet is not None and packet.refused else run.stop_note
    return stop_explanation(run.status, run.detail, note, model_name=run.model_name)


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
            yield {"selected": self.value() == value, "display": label,
                   "query_string": changelist.get_query_string({self.parameter_name: value})}


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "ticket_link", "status", "detail", "model_name", "requests", "attempts", "created_at",
                    "packet_state")
    list_display_links = ("id",)
    list_filter = ("status", "detail", "model_name", "created_at", PurposeFilter)
    linked_lookups = ("status__in",)  # the dashboard's outcome links (dashboard.runs_url)
    list_select_related = ("ticket", "packet")
    search_fields = ("ticket__ref",)
    list_per_page = 50

    @admin.display(description="ticket", ordering="ticket__ref")
    def ticket_link(self, run):
        return format_html('<a href="{}">{}</a>', reverse("admin:tickets_ticket_change", args=[run.ticket_id]),
                           run.ticket.ref)

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
            path("<int:run_id>/cancel/", view(_post_only(self.cancel_view, run_url)), name="agentrun_run_cancel"),
            path("<int:run_id>/approval/", view(_post_only(self.approval_view, run_url)), name="agentrun_run_approval"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        try:
            run = access_run(user=request.user, run_id=object_pk(object_id))
        except Refused as exc:
            return refusal(request, exc)
        packet = packet_of(run)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Run {run.pk} on {run.ticket.ref}",
            "run": run,
            "packet": packet,
            "actor": investigator(run.model_name),
            "model_named": run.model_name != BuiltInModel.RULES,  # the rules investigator is named by `actor`
            "explanation": _explanation(run, packet),
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

    def progress_view(self, request, run_id: int):
        try:
            run = access_run(user=request.user, run_id=run_id)
        except Refused as exc:
            return refusal(request, exc)
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

    def cancel_view(self, request, run_id: int):
        try:
            run = do_cancel(user=request.user, run_id=run_id)
        except Refused as exc:
            messages.error(request, exc.message)
        else:
            note = "cancelled" if run.status == Status.CANCELLED else "will stop before its next operation"
            messages.success(request, f"Run {run.pk} {note}.")
        return HttpResponseRedirect(run_url(run_id))

    def approval_view(self, request, run_id: int):
        decision = request.POST.get("decision")
        if decision not in Approval.Answer.values:
            messages.error(request, "Choose approve or deny.")
            return HttpResponseRedirect(run_url(run_id))
        grant = decision == Approval.Answer.GRANT
        try:
            run = do_answer_approval(user=request.user, run_id=run_id, grant=grant,
                                     note="" if grant else request.POST.get("reason", ""))
        except Refused as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(run_url(run_id))
        word = "approved" if grant else "denied"
        messages.success(request, f"Call {word}. Run {run.pk}: {stop_name(run.status).lower()}.")
        return HttpResponseRedirect(reverse("admin:agentrun_run_progress", args=[run.pk]))


class ReviewStateFilter(admin.SimpleListFilter):
    """The queue opens on pending packets; the other states, and all, are a click away."""

    title, parameter_name = "review state", "state"

    def lookups(self, request, model_admin):
        return [*ReviewPacket.ReviewState.choices, ("all", "All")]

    def value(self):
        return super().value() or ReviewPacket.ReviewState.PENDING

    def queryset(self, request, queryset):
        return queryset if self.value() == "all" else queryset.filter(review_state=self.value())

    def choices(self, changelist):
        for value, label in self.lookup_choices:
            yield {"selected": self.value() == value, "display": label,
                   "query_string": changelist.get_query_string({self.parameter_name: value})}


class StopReasonFilter(admin.SimpleListFilter):
    """The endings a packet can have (a run gets its packet when it ends), in plain words."""

    title, parameter_name = "stop reason", "stop_reason"

    def lookups(self, request, model_admin):
        return [(s.value, stop_name(s)) for s in Status if s.is_terminal]

    def queryset(self, request, queryset):
        return queryset.filter(stop_reason=self.value()) if self.value() in TERMINAL else queryset


@admin.register(ReviewPacket)
class ReviewPacketAdmin(ReadOnlyAdmin):
    """The review queue: pending packets, oldest first."""

    list_display = ("open_link", "ticket", "subject", "account", "age", "stop", "review_state")
    list_display_links = None
    list_filter = (ReviewStateFilter, StopReasonFilter)
    list_select_related = ("run__ticket__account",)
    search_fields = ("run__ticket__ref", "run__subject")
    list_per_page = 50

    def get_queryset(self, request):
        return super().get_queryset(request).filter(run__purpose=Run.Purpose.INVESTIGATION)

    def get_ordering(self, request):
        pending_first = Case(When(review_state=ReviewPacket.ReviewState.PENDING, then=Value(0)), default=Value(1),
                             output_field=IntegerField())
        return (pending_first.asc(), "created_at", "id")

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Review queue", **(extra_context or {})})

    @admin.display(description="packet", ordering="id")
    def open_link(self, packet):
        return format_html('<a class="sa-open" href="{}">Review {}</a>', packet_url(packet.pk), packet.pk)

    @admin.display(description="ticket", ordering="run__ticket__ref")
    def ticket(self, packet):
        ticket = packet.run.ticket
        return format_html('<a href="{}">{}</a>', reverse("admin:tickets_ticket_change", args=[ticket.pk]), ticket.ref)

    @admin.display(description="summary")
    def short_summary(self, packet):
        handoff = packet.stop_reason == Status.NEEDS_HELP
        text = packet.summary or ("(no summary: handed to a person)" if handoff else "(no summary: stopped early)")
        return text if len(text) <= 90 else text[:89] + "…"

    @admin.display(description="subject")
    def subject(self, packet):
        text = packet.run.subject
        return text if len(text) <= 70 else text[:69] + "…"

    @admin.display(description="account", ordering="run__ticket__account__code")
    def account(self, packet):
        return packet.run.ticket.account.code

    @admin.display(description="age", ordering="created_at")
    def age(self, packet):
        return timesince(packet.created_at, depth=1)

    @admin.display(description="stop reason", ordering="stop_reason")
    def stop(self, packet):
        return stop_name(packet.stop_reason)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:packet_id>/review/", view(_post_only(self.review_view, packet_url)),
                 name="agentrun_reviewpacket_review"),
            path("run/<int:run_id>/", view(self.of_run_view), name="agentrun_reviewpacket_of_run"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        try:
            packet = access_packet(user=request.user, packet_id=object_pk(object_id))
        except Refused as exc:
            return refusal(request, exc)
        run = packet.run
        previous_id, next_id = packet_previous_pending(packet=packet), packet_next_pending(packet=packet)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Review packet for {run.ticket.ref} (run {run.pk})",
            "packet": packet,
            "run": run,
            "ticket": run.ticket,
            "customer": run.session.user.email if run.session.user else "an unnamed customer",
            "actor": investigator(run.model_name),
            "spent": spent_rows(packet.budget_spent),
            "handoff": packet.stop_reason == Status.NEEDS_HELP,
            "stop_name": stop_name(packet.stop_reason),
            "headline": run_headline(run=run, packet=packet),
            "evidence": evidence_for(ticket_id=run.ticket_id, refs=list(packet.evidence_refs)),
            "explanation": _explanation(run, packet),
            "reviews": list(packet.reviews.select_related("reviewer")),
            "approvals": approvals_shown(run),
            "can_review": can(request.user, "agentrun.review_packet")
                          and packet.review_state != ReviewPacket.ReviewState.SUPERSEDED,
            "decision": packet_decision(packet=packet),
            "note": request.GET.get("note", ""),
            **recheck_context(do_packet_recheck(user=request.user, packet=packet)),
            "previous_url": packet_url(previous_id) if previous_id else "",
            "next_url": packet_url(next_id) if next_id else "",
        }
        return TemplateResponse(request, "admin/agentrun/reviewpacket/detail.html", context)

    def of_run_view(self, request, run_id: int):
        """The packet of a run (the link packet events carry): its page, which checks who may see it."""
        packet_id = ReviewPacket.objects.filter(run_id=run_id).values_list("pk", flat=True).first()
        if packet_id is None:
            return refusal(request, Refused("not_found", f"Run {run_id} has no review packet.", 404))
        return HttpResponseRedirect(packet_url(packet_id))

    def review_view(self, request, packet_id: int):
        """Record the review, then open the next pending packet (the queue when none is left); a changed decision
        goes back to its packet, which shows it. The same decision sent again adds nothing."""
        action = request.POST.get("decision", "")
        if action not in PacketReview.Action.values:
            messages.error(request, "Choose accept or reject.")
            return HttpResponseRedirect(packet_url(packet_id))
        decision, change = PacketReview.Action(action).decision, request.POST.get("change_decision") == "1"
        try:
            review, created = do_review(
                user=request.user, packet_id=packet_id, decision=decision, note=request.POST.get("note", ""),
                acknowledge_changed_evidence=request.POST.get("acknowledge_changed_evidence") == "on",
                change_decision=change,
            )
        except Refused as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(packet_url(packet_id))
        if change:
            done = "changed to " if created else "already "
            messages.success(request, f"Packet {packet_id}: decision {done}{decision}. "
                             "Nothing was sent to the customer.")
            return HttpResponseRedirect(packet_url(packet_id))
        following = packet_to_review_after(packet=review.packet)
        left = "Next pending packet." if following else "No pending packet is left."
        done = decision if created else f"was already {decision} by you; nothing was added"
        messages.success(request, f"Packet {packet_id} {done}. Nothing was sent to the customer. {left}")
        if following:
            return HttpResponseRedirect(packet_url(following))
        return HttpResponseRedirect(reverse("admin:agentrun_reviewpacket_changelist"))


def recheck_context(checks: list[ItemCheck]) -> dict:
    """The packet page's re-check banner, per-item statuses (templates/admin/agentrun/_recheck.html) and, for each
    item changed or gone, what changed, shown in its evidence card (`changes`, by ref)."""
    links = document_links(checks)
    attention = needing_acknowledgement(checks)
    unchecked = [c.ref for c in checks if c.comparison.outcome == Outcome.COULD_NOT_CHECK]
    return {"rechecks": [c.as_dict(links) for c in checks], "recheck_attention": attention,
            "recheck_unchecked": unchecked, "changes": evidence_changes(checks)}


@admin.register(PacketReview)
class PacketReviewAdmin(ReadOnlyAdmin):
    list_display = ("id", "packet_link", "decision", "reviewer", "created_at", "acknowledged_changed_evidence",
                    "note")
    list_filter = ("decision",)
    list_select_related = ("reviewer", "packet__run__ticket")

    @admin.display(description="packet")
    def packet_link(self, review):
        return format_html('<a href="{}">{} (run {})</a>', packet_url(review.packet_id),
                           review.packet.run.ticket.ref, review.packet.run_id)


@admin.register(EvidenceCheck)
class EvidenceCheckAdmin(ReadOnlyAdmin):
    """Every re-check of a cited evidence item when its packet was opened (read-only, append-only)."""

    list_display = ("id", "checked_at", "packet_link", "evidence_ref", "result", "what_changed", "checked_by")
    list_filter = ("result", "checked_at")
    list_select_related = ("packet__run__ticket", "evidence", "checked_by")
    search_fields = ("=packet__id", "packet__run__ticket__ref")
    list_per_page = 50

    @admin.display(description="packet")
    def packet_link(self, check):
        return format_html('<a href="{}">{} (packet {})</a>', packet_url(check.packet_id),
                           check.packet.run.ticket.ref, check.packet_id)

    @admin.display(description="evidence")
    def evidence_ref(self, check):
        return check.evidence.ref

    @admin.display(description="difference or reason")
    def what_changed(self, check):
        return "; ".join(d.get("text", "") for d in check.differences) or check.reason


def approvals_shown(run: Run):
    now = timezone.now()
    return [approval_shown(a, run, now) for a in run.approvals.all()]


def waiting_approval(run: Run):
    """The run's pending approval as staff see it (expired once the deadline passed), or None; or the
    one nobody answered before the run ended at its deadline."""
    def unanswered(approval: Approval) -> bool:
        return approval.state == Approval.State.PENDING or (
            run.status == Status.DEADLINE and approval.state == Approval.State.EXPIRED and not approval.decided_by)

    shown = [w for w in approvals_shown(run) if unanswered(w.approval)]
    return shown[0] if shown else None


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("id", "run_link", "tool", "args", "shown_state", "time_left", "reason", "requested_at",
                    "decided_by", "note")
    list_filter = ("state", "tool")
    list_select_related = ("run__ticket",)

    def get_queryset(self, request):  # an evaluation answers its own calls: they are nobody's to answer
        return super().get_queryset(request).filter(run__purpose=Run.Purpose.INVESTIGATION)

    @admin.display(description="run")
    def run_link(self, approval):
        return format_html('<a href="{}">run {} on {}</a>', run_url(approval.run_id), approval.run_id,
                           approval.run.ticket.ref)

    @admin.display(description="state", ordering="state")
    def shown_state(self, approval):
        return approval_shown(approval, approval.run, timezone.now()).state_shown

    @admin.display(description="time left")
    def time_left(self, approval):
        return approval_shown(approval, approval.run, timezone.now()).time_left

    def change_view(self, request, object_id, form_url="", extra_context=None):
        try:
            approval = access_approval(user=request.user, approval_id=object_pk(object_id))
        except Refused as exc:
            return refusal(request, exc)
        return HttpResponseRedirect(run_url(approval.run_id))


class WebhookAttemptInline(ReadOnly, admin.TabularInline):
    model = WebhookAttempt
    fields = ("number", "started_at", "outcome", "http_status", "error", "latency_ms")
    readonly_fields = fields
    extra = 0


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Packet events sent to the help desk, with every attempt (read-only)."""

    list_display = ("id", "event_type", "run_link", "status", "attempt_count", "created_at", "next_attempt_at",
                    "finished_at")
    list_filter = ("status", "event_type", "created_at")
    search_fields = ("=event_id", "=run__id")
    fields = ("event_id", "event_type", "run", "status", "attempt_count", "created_at", "next_attempt_at",
              "finished_at", "payload_json")
    readonly_fields = fields
    inlines = [WebhookAttemptInline]
    list_per_page = 50

    @admin.display(description="run")
    def run_link(self, delivery):
        return format_html('<a href="{}">run {}</a>', run_url(delivery.run_id), delivery.run_id) if delivery.run_id else "—"

    @admin.display(description="payload")
    def payload_json(self, delivery):
        return format_html("<pre>{}</pre>", json.dumps(delivery.payload, indent=2, ensure_ascii=False))


@admin.register(ApiToken)
class ApiTokenAdmin(StaffSiteAdmin):
    """Each user manages their own tokens; the token text is shown once, at creation."""

    list_display = ("name", "prefix", "user", "created_at", "last_used_at", "revoked_at")
    fields = ("name",)
    actions = ["revoke"]

    def get_queryset(self, request):
        tokens = super().get_queryset(request).select_related("user")
        return tokens if request.user.is_superuser else tokens.filter(user=request.user)

    def has_change_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        token, raw = token_create(user=request.user, name=obj.name)
        obj.pk, obj.user, obj.prefix, obj.digest, obj.created_at = token.pk, token.user, token.prefix, token.digest, token.created_at
        messages.warning(request, f"Your new API token (copy it now, it is not shown again): {raw}")

    @admin.action(description="Revoke selected tokens", permissions=["delete"])
    def revoke(self, request, queryset):
        n = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        messages.success(request, f"{n} token(s) revoked.")


class BudgetDefaultsForm(forms.ModelForm):
    """One field per limit of Budget, described as Budget describes it, showing the value in force.

    A value left as configuration gives it (AGENT_BUDGET_DEFAULTS over CONFORMANCE §2), or emptied,
    is not stored as an override: it keeps following the configuration.
    """

    class Meta:
        model = BudgetDefaults
        fields = BudgetDefaults.FIELDS
        help_texts = {name: bound.help for name, (_, bound) in budget_limits().items()}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.update({name: value for name, value in _budget_in_force(self.instance).items()
                             if name in BudgetDefaults.FIELDS})
        self.fields["deadline_seconds"].help_text += (
            " A run whose calls may need a supervisor's approval gets at least "
            f"{settings.AGENT_APPROVAL_DEADLINE_SECONDS:g} s (AGENT_APPROVAL_DEADLINE_SECONDS).")

    def clean(self):
        cleaned = super().clean()
        edited = {name: cleaned.get(name) for name in BudgetDefaults.FIELDS if cleaned.get(name) is not None}
        try:
            Budget.from_mapping(budget_defaults(edited))
        except BudgetError as exc:
            raise forms.ValidationError(str(exc)) from None
        configured = _budget_configured()
        for name, value in edited.items():
            if value == configured.get(name):
                cleaned[name] = None  # as configured: no override
        return cleaned


def _budget_configured() -> dict:
    """The budget configuration gives new runs, before supervisors' overrides."""
    try:
        return Budget.from_mapping(settings.AGENT_BUDGET_DEFAULTS).as_dict()
    except BudgetError:
        return Budget().as_dict()


def _budget_in_force(row: BudgetDefaults) -> dict:
    """The budget new runs start with under `row`'s overrides (configuration's, should they not fit)."""
    try:
        return Budget.from_mapping(budget_defaults(row.overrides())).as_dict()
    except BudgetError:
        return _budget_configured()


@admin.register(BudgetDefaults)
class BudgetDefaultsAdmin(StaffSiteAdmin):
    """Supervisors edit the budget of new runs; a run keeps the budget it started with."""

    form = BudgetDefaultsForm
    readonly_fields = ["updated_by", "updated_at"]

    def has_module_permission(self, request):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_change_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_add_permission(self, request):
        return False  # the one row is made by changelist_view


    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        try:
            require(request.user, PERMISSION_BUDGET)  # before the one row is made
        except Refused as exc:
            return refusal(request, exc)
        row, _ = BudgetDefaults.objects.get_or_create(pk=1)
        return HttpResponseRedirect(reverse("admin:agentrun_budgetdefaults_change", args=[row.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET":  # agentrun.W001 where the deadline is set
            for warning in approval_time_check():
                messages.warning(request, f"{warning.msg} {warning.hint}")
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        obj.pk, obj.updated_by = 1, request.user.get_username()
        super().save_model(request, obj, form, change)


class StaffPreferenceForm(forms.ModelForm):
    time_zone = forms.ChoiceField(choices=[(z, z) for z in sorted(available_time_zones())])

    class Meta:
        model = StaffPreference
        fields = ["time_zone"]


@admin.register(StaffPreference)
class StaffPreferenceAdmin(StaffSiteAdmin):
    """Each person edits their own preferences; the list opens their own row."""

    form = StaffPreferenceForm

    def get_queryset(self, request):
        return super().get_queryset(request).filter(user=request.user)

    def has_add_permission(self, request):
        return False  # the one row of each user is made by changelist_view

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if request.GET:  # a filtered list: the list itself answers (and refuses lookups it cannot run)
            return super().changelist_view(request, extra_context)
        row, _ = StaffPreference.objects.get_or_create(user=request.user)
        return HttpResponseRedirect(reverse("admin:agentrun_staffpreference_change", args=[row.pk]))

    def save_model(self, request, obj, form, change):
        obj.user = request.user
        super().save_model(request, obj, form, change)
        request.session[TIME_ZONE_SESSION_KEY] = obj.time_zone

    def response_change(self, request, obj):
        messages.success(request, f"Times are now shown in {obj.time_zone}.")
        return HttpResponseRedirect(reverse("admin:agentrun_staffpreference_change", args=[obj.pk]))




# --- evaluations of candidate models ------------------------------------------------

CASE_COLUMNS = (
    "original run", "candidate run", "ticket", "original review", "status", "detail", "drafted", "overlap",
    "model requests", "tokens", "cost micros", "original cost micros", "wall seconds", "agreed", "regression",
    "result",
)


def case_row(case: EvaluationCase) -> list[object]:
    return [
        case.original_run_id, case.candidate_run_id, case.original_run.ticket.ref, case.original_review,
        case.status, case.detail, case.drafted, case.overlap, case.model_requests, case.tokens, case.cost_micros,
        case.original_cost_micros, case.wall_seconds, case.agreed, case.regression, result_of(case).value,
    ]


class EvaluationStartForm(forms.Form):
    """Which packets, how many, which model: the `evaluate` command's choices a supervisor makes in the admin."""

    candidate_model = forms.ChoiceField(label="Candidate model")
    reviewed = forms.ChoiceField(label="Packets reviewed as", choices=Evaluation.Reviewed.choices,
                                 initial=Evaluation.Reviewed.ACCEPTED)
    limit = forms.IntegerField(label="At most this many packets (oldest first)", min_value=1, max_value=10_000,
                               required=False, initial=20)
    since = forms.DateField(label="Only packets written since (YYYY-MM-DD, your time zone)", required=False)
    live_tools = forms.BooleanField(label="Read the live backends, not the results the original runs recorded",
                                    required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["candidate_model"].choices = evaluation_models()

    def since_moment(self):
        day = self.cleaned_data.get("since")
        return timezone.make_aware(datetime.combine(day, time.min)) if day else None


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    """Candidate models tested against reviewed packets (manage.py evaluate, or *Start an evaluation*),
    for supervisors."""

    list_display = ("id", "candidate_model", "reviewed", "live_tools", "cases", "agreement", "regressions",
                    "started_at", "finished_at")
    list_filter = ("candidate_model", "live_tools")
    change_list_template = "admin/agentrun/evaluation/change_list.html"

    @admin.display(description="cases")
    def cases(self, evaluation):
        return evaluation.figures.get("cases", 0)

    @admin.display(description="agreement")
    def agreement(self, evaluation):
        share = evaluation.figures.get("agreement")
        return "—" if share is None else f"{share:.0%}"

    @admin.display(description="regressions")
    def regressions(self, evaluation):
        return len(evaluation.figures.get("regressions", []))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [path("<int:evaluation_id>/csv/", view(self.csv_view), name="agentrun_evaluation_csv"),
                path("start/", view(self.start_view), name="agentrun_evaluation_start"),
                *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        can_start = can(request.user, "agentrun.add_evaluation")
        return super().changelist_view(request, {**(extra_context or {}), "can_start": can_start})

    def start_view(self, request):
        try:
            require(request.user, "agentrun.add_evaluation")
        except Refused as exc:
            return refusal(request, exc)
        form = EvaluationStartForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                evaluation = do_evaluation_start(
                    user=request.user, candidate_model=data["candidate_model"], reviewed=data["reviewed"],
                    limit=data["limit"], since=form.since_moment(), live_tools=data["live_tools"])
            except Refused as exc:
                messages.error(request, exc.message)
            else:
                done = "finished" if evaluation.finished_at else "started on the workers"
                messages.success(request, f"Evaluation {evaluation.pk} of {evaluation.candidate_model} {done}.")
                return HttpResponseRedirect(reverse("admin:agentrun_evaluation_change", args=[evaluation.pk]))
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
                   "title": "Start an evaluation of a candidate model"}
        return TemplateResponse(request, "admin/agentrun/evaluation/start.html", context)

    def _cases(self, request, evaluation_id: int):
        require(request.user, "agentrun.view_evaluation")
        evaluation = Evaluation.objects.filter(pk=evaluation_id).first()
        if evaluation is None:
            raise Refused("not_found", f"There is no evaluation {evaluation_id}.", 404)
        return evaluation, list(evaluation.cases.select_related("original_run__ticket"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        try:
            evaluation, cases = self._cases(request, object_pk(object_id))
        except Refused as exc:
            return refusal(request, exc)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Evaluation {evaluation.pk}: {evaluation.candidate_model} against reviewed packets",
            "evaluation": evaluation,
            "figures": evaluation_figures(cases),  # from the rows below, as they are now
            "rows": [(case, result_of(case), run_url(case.original_run_id),
                      run_url(case.candidate_run_id) if case.candidate_run_id else None) for case in cases],
            "csv_url": reverse("admin:agentrun_evaluation_csv", args=[evaluation.pk]),
        }
        return TemplateResponse(request, "admin/agentrun/evaluation/compare.html", context)

    def csv_view(self, request, evaluation_id):
        try:
            evaluation, cases = self._cases(request, evaluation_id)
        except Refused as exc:
            return refusal(request, exc)
        return csv_response([CASE_COLUMNS, *(case_row(c) for c in cases)], filename=f"evaluation-{evaluation.pk}.csv")


admin.site.site_header = admin.site.site_title = "supportagent"
admin.site.index_title = "Work"

# The last app with admins: Django's own (users, groups) and django-axes' answer like ours.
admin_site_harden(admin.site)
