"""The admin for tickets and what the agent reads. Staff start investigations from the ticket page."""

from __future__ import annotations

import json

import pydantic
from django import forms
from django.contrib import admin, messages
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, Subquery
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from engine.models import ReviewPacket, Run, RunRequest
from engine.statuses import Status, stop_name
from engine.watchdog import runs_expire_overdue
from kit.adminkit import StaffSiteAdmin
from kit.sources import followable_url
from staff.access import Refused, can, do_document_publish, do_investigate
from staff.admin.base import ReadOnly, ReadOnlyAdmin
from staff.pages import staff_page
from tickets.documents import BODY_MAX, CODE_MAX, CODE_PATTERN, Change, DocumentText
from tickets.models import (
    Account,
    CustomerSession,
    CustomerUser,
    Document,
    DocumentRevision,
    Evidence,
    Incident,
    Job,
    SearchSynonym,
    Service,
    Ticket,
)
from tickets.selectors import TICKET_SEARCH_FIELDS, document_current, tickets_search
from tickets.services import PublishOutcome, ticket_create


def _progress_url(run_id: int) -> str:
    return reverse("admin:agentrun_run_progress", args=[run_id])


def _ticket_url(ticket_id: int) -> str:
    return reverse("admin:tickets_ticket_change", args=[ticket_id])


class LatestRunFilter(admin.SimpleListFilter):
    title, parameter_name = "latest run", "latest_run"

    def lookups(self, request, model_admin):
        return [("never", "Never investigated"), *((s.value, stop_name(s)) for s in Status)]

    def queryset(self, request, queryset):
        """Found from the runs (those of the status, then whether one came after on their ticket) rather than from
        each ticket's latest run: 910 ms for the count alone at 72,780 tickets (bench/pages_bench.py)."""
        if self.value() == "never":
            return queryset.exclude(Exists(Run.objects.filter(ticket=OuterRef("pk"))))
        if self.value() not in Status.values:
            return queryset
        later = Run.objects.filter(ticket=OuterRef("ticket")).filter(
            Q(created_at__gt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), pk__gt=OuterRef("pk"))
        )
        latest = Run.objects.filter(status=self.value()).exclude(Exists(later))
        return queryset.filter(pk__in=latest.values("ticket"))


class PendingPacketFilter(admin.SimpleListFilter):
    title, parameter_name = "pending packet", "pending"

    def lookups(self, request, model_admin):
        return [("yes", "A packet waits for review"), ("no", "No packet waits")]

    def queryset(self, request, queryset):
        """Whether a packet waits is asked here, when filtering by it, alone: as an annotation of every listed ticket
        it made PostgreSQL find every pending packet's ticket first (20 ms at 100,000 runs, more as the queue grows)."""
        if self.value() not in ("yes", "no"):
            return queryset
        pending = ReviewPacket.objects.filter(run__ticket=OuterRef("pk"), review_state=ReviewPacket.ReviewState.PENDING)
        return queryset.filter(Exists(pending) if self.value() == "yes" else ~Exists(pending))


class AutoHeldFilter(admin.SimpleListFilter):
    """Tickets a cap of their account kept from automatic investigation (engine.autocaps), for supervisors."""

    title, parameter_name = "automatic investigation", "auto_held"

    def lookups(self, request, model_admin):
        return [("waiting", "Held by a cap, not investigated since"), ("all", "Held by a cap")]

    def queryset(self, request, queryset):
        if self.value() == "waiting":
            return queryset.filter(auto_held_at__isnull=False, latest_status__isnull=True)
        if self.value() == "all":
            return queryset.filter(auto_held_at__isnull=False)
        return queryset


class TicketForm(forms.ModelForm):
    """What staff write on a ticket; the ticket acts for its customer's session, which must belong to
    the ticket's account. The ref, source and external id are the system's (shown, never typed), and
    `evaluation_copy` and `evidence_count` are internal: they are on no form."""

    class Meta:
        model = Ticket
        fields = ("account", "session", "subject", "body")

    def clean(self):
        cleaned = super().clean()
        account, session = cleaned.get("account"), cleaned.get("session")
        if account and session and session.account_id != account.pk:
            self.add_error(
                "session",
                f"Session {session.ref} belongs to account {session.account.code}, "
                f"not {account.code}: choose one of {account.code}'s sessions.",
            )
        return cleaned


@admin.register(Ticket)
class TicketAdmin(StaffSiteAdmin):
    form = TicketForm
    list_display = ("ref", "subject", "account", "latest_run_status", "packet_state", "created_at")
    list_select_related = ("account",)
    list_columns = ("id", "ref", "subject", "created_at", "account__code")
    list_filter = ("account", LatestRunFilter, PendingPacketFilter, AutoHeldFilter)
    search_fields = TICKET_SEARCH_FIELDS  # what the search box offers; tickets.selectors.tickets_search looks there
    show_full_result_count = False  # a second count of every ticket (kit.adminkit.LargeListPaginator)
    list_per_page = 50  # as the run list
    readonly_fields = ("ref", "source", "external_id", "external_updated_at", "extra_fields", "auto_held_note")
    actions = ["investigate_selected"]
    change_form_template = "admin/tickets/ticket/change_form.html"

    def get_queryset(self, request):
        latest = Run.objects.filter(ticket=OuterRef("pk")).order_by("-created_at", "-id")
        packet = ReviewPacket.objects.filter(run__ticket=OuterRef("pk")).order_by("-run__created_at", "-run_id")
        return (
            super()
            .get_queryset(request)
            .filter(evaluation_copy=False)
            .annotate(
                latest_status=Subquery(latest.values("status")[:1]),
                latest_run_id=Subquery(latest.values("pk")[:1]),
                latest_packet_state=Subquery(packet.values("review_state")[:1]),
                latest_packet_id=Subquery(packet.values("pk")[:1]),
            )
        )

    def get_search_results(self, request, queryset, search_term):
        """Every term in the reference, subject, description or customer's e-mail, through their indexes."""
        return tickets_search(queryset, search_term), False

    @admin.display(description="latest run", ordering="latest_status")
    def latest_run_status(self, ticket):
        if not ticket.latest_run_id:
            return "never investigated"
        return format_html(
            '<a href="{}">run {}: {}</a>',
            reverse("admin:agentrun_run_change", args=[ticket.latest_run_id]),
            ticket.latest_run_id,
            stop_name(ticket.latest_status),
        )

    @admin.display(description="latest packet", ordering="latest_packet_state")
    def packet_state(self, ticket):
        if not ticket.latest_packet_id:
            return "—"
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:agentrun_reviewpacket_change", args=[ticket.latest_packet_id]),
            ticket.latest_packet_state,
        )

    def get_fields(self, request, obj=None):
        """A new ticket gets its ref on save (tickets.services.ticket_create); an existing one shows it."""
        if obj is None:
            return TicketForm.Meta.fields
        held = ("auto_held_note",) if obj.auto_held_at else ()
        return ("ref", "source", "external_id", "external_updated_at", *TicketForm.Meta.fields, "extra_fields", *held)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    @admin.display(description="fields intake did not read")
    def extra_fields(self, ticket):
        """What the help desk sent beyond a ticket's shape, name by name, so nothing it added goes unseen."""
        if not ticket.extra:
            return "none"
        return format_html_join(
            "\n", "<div><code>{}</code>: {}</div>", ((k, json.dumps(v)) for k, v in sorted(ticket.extra.items()))
        )

    def save_model(self, request, obj, form, change):
        """A change writes the form's fields alone: the counters intake and runs bump under the ticket's lock
        (messages, evidence) keep what they reached while the form was open."""
        if change:
            obj.save(update_fields=list(TicketForm.Meta.fields))
        else:
            ticket_create(ticket=obj)

    def has_investigate_permission(self, request):
        return can(request.user, "agentrun.start_investigation")

    def get_urls(self):
        view = self.admin_site.admin_view(self.investigate_view)
        return [path("<int:ticket_id>/investigate/", view, name="tickets_ticket_investigate"), *super().get_urls()]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        ticket = Ticket.objects.filter(pk=object_id).first() if str(object_id).isdigit() else None
        if ticket is not None:
            runs_expire_overdue(ticket_id=ticket.pk)  # its runs as they stand: none waiting past its deadline
            runs = ticket.runs.select_related("packet").order_by("-created_at", "-id")[:10]
            pending = ReviewPacket.objects.filter(run__ticket=ticket, review_state=ReviewPacket.ReviewState.PENDING)
            extra.update(
                runs=runs,
                can_investigate=can(request.user, "agentrun.start_investigation"),
                investigate_url=reverse("admin:tickets_ticket_investigate", args=[ticket.pk]),
                pending_packet=pending.order_by("-created_at").first(),
                ticket_messages=ticket.messages.order_by("written_at", "number"),  # as written, then as they came
            )
        return super().change_view(request, object_id, form_url, extra_context=extra)

    @method_decorator(require_POST)
    @staff_page(requires=("agentrun.start_investigation", "tickets.view_ticket"), back_to=_ticket_url)
    def investigate_view(self, request, ticket_id: int):
        """Start a run from the ticket's page. Permission is checked before the ticket is looked up,
        so that a user who may not investigate gets the same answer for any ticket id."""
        ticket = Ticket.objects.filter(pk=ticket_id).first()
        if ticket is None:
            messages.error(request, f"There is no ticket {ticket_id}.")
            return HttpResponseRedirect(reverse("admin:tickets_ticket_changelist"))
        run, _ = do_investigate(user=request.user, ticket=ticket, via=RunRequest.Via.ADMIN)
        messages.success(request, f"Investigation of {ticket.ref} started (run {run.pk}).")
        return HttpResponseRedirect(_progress_url(run.pk))

    @admin.action(description="Investigate selected tickets", permissions=["investigate"])
    def investigate_selected(self, request, queryset):
        started = []
        for ticket in queryset.order_by("ref"):
            try:
                run, _ = do_investigate(user=request.user, ticket=ticket, via=RunRequest.Via.ADMIN)
            except Refused as exc:
                messages.error(request, f"{ticket.ref}: {exc.message}")
            else:
                started.append(run)
        if started:
            messages.success(request, "Started: " + ", ".join(f"{r.ticket.ref} (run {r.pk})" for r in started))
        if len(started) == 1:
            return HttpResponseRedirect(_progress_url(started[0].pk))
        return None


@admin.register(Evidence)
class EvidenceAdmin(StaffSiteAdmin):
    list_display = ("ticket", "ref_label", "tool", "source_ref", "truncated", "captured_at")
    list_select_related = ("ticket",)
    list_filter = ("tool",)
    search_fields = ("ticket__ref", "source_ref")

    @admin.display(description="ref", ordering="number")
    def ref_label(self, evidence):
        return evidence.ref

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class DocumentForm(forms.ModelForm):
    """A document's whole text as it reads now (its current revision), checked as `DocumentIn` checks it.

    The form is never saved onto the document: DocumentAdmin publishes `text` as a new revision.
    """

    text: DocumentText  # set by clean() when the form is valid

    code = forms.RegexField(
        regex=CODE_PATTERN,
        max_length=CODE_MAX,
        error_messages={"invalid": "Capitals, digits, '-' and '_' only, like DOC-EXPORT-7."},
    )
    body = forms.CharField(
        label="Text",
        max_length=BODY_MAX,
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100}),
        help_text="Saving a changed text, title or visibility publishes a new revision; "
        "published revisions never change.",
    )

    class Meta:
        model = Document
        fields = ("code", "title", "public")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = document_current(code=self.instance.code) if self.instance.pk else None
        if "body" in self.fields and current is not None:
            self.fields["body"].initial = current.body or ""

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            try:
                self.text = DocumentText(title=cleaned["title"], body=cleaned["body"], public=cleaned["public"])
            except pydantic.ValidationError as exc:
                for error in exc.errors():
                    field = error["loc"][0] if error["loc"] else None
                    self.add_error(field if field in self.fields else None, _sentence(error["msg"]))
        return cleaned


def _sentence(message: str) -> str:
    message = message.removeprefix("Value error, ")
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


class RevisionInline(ReadOnly, admin.TabularInline):
    """The document's revisions, each linked to its page; none is added, changed or deleted here."""

    model = DocumentRevision
    fields = readonly_fields = ("revision", "is_current", "published_at")
    extra = 0

    @admin.display(description="revision")
    def revision(self, revision):
        url = reverse("admin:tickets_documentrevision_change", args=[revision.pk])
        return format_html('<a href="{}">{}</a>', url, revision.label)


@admin.register(Document)
class DocumentAdmin(StaffSiteAdmin):
    """A document is edited as its whole text: the form shows the current revision, and saving publishes
    a new revision through staff.access.do_document_publish, never an edit in place (nothing changed,
    nothing published). Who holds tickets.change_document edits (Knowledge editors); others only read."""

    form = DocumentForm
    list_display = ("code", "title", "public", "public_url", "origin")
    search_fields = ("code", "title")
    inlines = [RevisionInline]

    def get_fields(self, request, obj=None):
        editable = self.has_change_permission(request, obj) if obj else self.has_add_permission(request)
        return ["code", "title", "public", "body" if editable else "current_text", "public_url", "origin"]

    def get_readonly_fields(self, request, obj=None):
        # origin and url are import_docs' (origin decides what --prune may retire); publishing here clears both,
        # as the API does
        return ("code", "public_url", "origin") if obj else ("public_url", "origin")

    @admin.display(description="public URL", ordering="url")
    def public_url(self, document):
        """The page readers find it on, as a link (an address that is not http(s) is shown as text, never linked)."""
        link = followable_url(document.url)
        if link:
            return format_html('<a href="{}" rel="noopener noreferrer" target="_blank">{}</a>', link, link)
        return document.url or "—"

    @admin.display(description="text")
    def current_text(self, document):
        current = document_current(code=document.code)
        return current.body if current and current.body is not None else "No current revision (retired)."

    def save_model(self, request, obj, form, change):
        """Publish the form's text (the form's instance itself is never saved) and say what that did."""
        try:
            outcome = do_document_publish(user=request.user, code=obj.code, text=form.text)
        except Refused as exc:
            raise PermissionDenied(exc.message) from None
        obj.pk = Document.objects.values_list("pk", flat=True).get(code=outcome.code)
        obj.refresh_from_db()
        messages.add_message(request, *_publish_message(outcome))

    # Django's own responses would add "was changed successfully"; save_model has said what happened.
    def response_add(self, request, obj, post_url_continue=None):
        return self._after_save(request, obj)

    def response_change(self, request, obj):
        return self._after_save(request, obj)

    def _after_save(self, request, obj):
        if "_continue" in request.POST:
            return HttpResponseRedirect(reverse("admin:tickets_document_change", args=[obj.pk]))
        if "_addanother" in request.POST:
            return HttpResponseRedirect(reverse("admin:tickets_document_add"))
        return self.response_post_save_change(request, obj)


def _publish_message(outcome: PublishOutcome) -> tuple[int, str]:
    if outcome.change is Change.UNCHANGED:
        return messages.INFO, (
            f"Nothing changed: {outcome.code} {outcome.revision} already says this, so no revision was published."
        )
    return messages.SUCCESS, (
        f"Published {outcome.code} {outcome.revision}; it is now the current revision, "
        "and earlier revisions keep their text."
    )


@admin.register(DocumentRevision)
class DocumentRevisionAdmin(ReadOnlyAdmin):
    """One revision as evidence cites it ("DOC-EXPORT-7 revision r3"), read-only for everyone: new text is
    published from the document's page as a new revision."""

    list_display = ("document", "label", "is_current", "published_at")
    list_select_related = ("document",)
    list_filter = ("is_current",)
    search_fields = ("document__code", "document__title")
    fields = ("document", "label", "is_current", "published_at", "body")
    readonly_fields = fields

    @admin.display(description="revision", ordering="number")
    def label(self, revision):
        return revision.label


@admin.register(Job)
class JobAdmin(StaffSiteAdmin):
    """Supervisors may mark a job sensitive: lookups of it then wait for a supervisor's approval."""

    list_display = ("ref", "account", "kind", "status", "error_code", "sensitive")
    list_select_related = ("account",)
    list_filter = ("sensitive", "status")

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Job._meta.fields if f.name not in ("id", "sensitive")] if obj else []


class IncidentInline(admin.TabularInline):
    model = Incident
    extra = 0


@admin.register(Service)
class ServiceAdmin(StaffSiteAdmin):
    list_display = ("name", "status")
    inlines = [IncidentInline]


class AccountForm(forms.ModelForm):
    """The intake lists as comma-separated text (stored lower-case: Account.save)."""

    org_ids = SimpleArrayField(
        forms.CharField(max_length=64), required=False, help_text=Account._meta.get_field("org_ids").help_text
    )
    email_domains = SimpleArrayField(
        forms.CharField(max_length=253), required=False, help_text=Account._meta.get_field("email_domains").help_text
    )

    class Meta:
        model = Account
        fields = ("code", "name", "workspace", "org_ids", "email_domains", "auto_runs_per_hour", "auto_dollars_per_day")


admin.site.register(
    Account, StaffSiteAdmin, form=AccountForm, list_display=("code", "name", "workspace", "org_ids", "email_domains")
)
admin.site.register(CustomerUser, StaffSiteAdmin, list_display=("email", "account", "role"))


@admin.register(CustomerSession)
class CustomerSessionAdmin(StaffSiteAdmin):
    """A help desk's session changes only through its help desk: here its source, account and `verified`
    are shown, not edited. Sessions staff make have a blank source and stay theirs."""

    list_display = ("ref", "account", "user", "verified", "source")
    list_filter = ("source",)

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.source:
            return ("source", "ref", "account", "verified")
        return ("source",)


@admin.register(SearchSynonym)
class SearchSynonymAdmin(StaffSiteAdmin):
    """Words the knowledge base's search takes as one ("2FA, two-step login"); a worker reads them within
    tickets.search.SYNONYMS_KEPT_SECONDS. Knowledge editors keep them; staff read them."""

    list_display = ("words",)
    search_fields = ("words",)
