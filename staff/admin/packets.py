"""The review queue (packets), the reviews recorded and the re-checks of cited evidence.

The review button posts to a view that goes through staff.access; the admin never
writes a packet or a review itself.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import capfirst
from django.utils.timesince import timesince

from engine.models import EvidenceCheck, PacketReview, ReviewPacket, Run, queue_place
from engine.packetview import packet_view
from engine.statuses import TERMINAL, Status, stop_name
from staff.access import Refused, access_packet, can, do_packet_recheck, do_review
from staff.admin.base import ReadOnlyAdmin, object_pk, packet_url, post_only
from staff.dashboard import NO_REASON_LABEL, NO_REASON_PARAMETER
from staff.pages import staff_page
from staff.queue import packet_next_pending, packet_previous_pending, packet_to_review_after, packets_search
from staff.recheck import ItemCheck, document_links, evidence_changes, needing_acknowledgement
from staff.templatetags.staff_format import local_times_text
from tickets.models import TicketMessage
from tickets.selectors import TICKET_SEARCH_FIELDS
from tools.compare import Outcome

SUBJECT_SHOWN, SUMMARY_SHOWN = 70, 100  # characters of each a queue row shows


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: cut at a word, with an ellipsis, when longer."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"


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
            yield {
                "selected": self.value() == value,
                "display": label,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
            }


class StopReasonFilter(admin.SimpleListFilter):
    """The endings a packet can have (a run gets its packet when it ends), in plain words."""

    title, parameter_name = "stop reason", "stop_reason"

    def lookups(self, request, model_admin):
        return [(s.value, stop_name(s)) for s in Status if s.is_terminal]

    def queryset(self, request, queryset):
        return queryset.filter(stop_reason=self.value()) if self.value() in TERMINAL else queryset


class RejectionReasonFilter(admin.SimpleListFilter):
    """Rejected packets by the reason of the rejection they stand on (the latest review by a person, which keeps
    it on the packet: staff.reviews), as the dashboard's breakdown counts them; "none" for a rejection recorded
    without one."""

    title, parameter_name = "rejection reason", "reason"

    def lookups(self, request, model_admin):
        return [
            (value, capfirst(label))
            for value, label in (*PacketReview.Reason.choices, (NO_REASON_PARAMETER, NO_REASON_LABEL))
        ]

    def queryset(self, request, queryset):
        if self.value() not in (*PacketReview.Reason.values, NO_REASON_PARAMETER):
            return queryset
        reason = "" if self.value() == NO_REASON_PARAMETER else self.value()
        return queryset.filter(review_state=ReviewPacket.ReviewState.REJECTED, review_reason=reason)


@admin.register(ReviewPacket)
class ReviewPacketAdmin(ReadOnlyAdmin):
    """The review queue: pending packets, oldest first, each under its ticket's reference."""

    list_display = (
        "open_link",
        "customer",
        "subject",
        "summary_line",
        "account",
        "age",
        "stop",
        "review_state",
        "wrote_again",
    )
    list_display_links = None
    list_filter = (ReviewStateFilter, StopReasonFilter, RejectionReasonFilter)
    linked_lookups = ("run__created_at__gte", "run__created_at__lt")  # the dashboard's period (rejected_packets_url)
    list_select_related = ("run__ticket__account", "run__ticket__session__user")
    list_columns = (
        *("id", "summary", "stop_reason", "review_state", "created_at", "run__subject", "run__ticket__ref"),
        *("run__ticket__account__code", "run__ticket__session__user__email"),
    )
    # What the search box offers; staff.queue.packets_search looks there and in the sources each packet cites.
    search_fields = tuple(f"run__ticket__{field}" for field in TICKET_SEARCH_FIELDS)
    search_help_text = (
        "The ticket's reference, subject, description or customer's e-mail (as the ticket list searches),"
        " or a job id or document code the packet cites."
    )
    list_per_page = 50
    show_full_result_count = False  # a second count of every packet (kit.adminkit.LargeListPaginator)

    def get_queryset(self, request):
        """Investigations' packets, each knowing whether its customer wrote after its run started (one query)."""
        later = TicketMessage.objects.filter(
            ticket=OuterRef("run__ticket"),
            number__gt=OuterRef("run__messages_seen"),
            author=TicketMessage.Author.CUSTOMER,
        )
        packets = super().get_queryset(request).filter(run__purpose=Run.Purpose.INVESTIGATION)
        return packets.annotate(customer_wrote_later=Exists(later))

    def get_ordering(self, request):
        """Oldest first; of every state, the pending first. Each order is an index's (engine migration 0021)."""
        if request.GET.get(ReviewStateFilter.parameter_name) == "all":
            return (queue_place().asc(), "created_at", "id")
        return ("created_at", "id")

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Review queue", **(extra_context or {})})

    def get_search_results(self, request, queryset, search_term):
        """The ticket list's search, and the sources the packets cite (staff.queue.packets_search); no row twice."""
        return packets_search(queryset, search_term), False

    @admin.display(description="ticket", ordering="run__ticket__ref")
    def open_link(self, packet):
        """The packet's one handle: its ticket's reference, opening the packet."""
        return format_html(
            '<a class="sa-open" href="{}" title="Open the packet">{}</a>', packet_url(packet.pk), packet.run.ticket.ref
        )

    @admin.display(description="customer", ordering="run__ticket__session__user__email")
    def customer(self, packet):
        user = packet.run.ticket.session.user
        return user.email if user is not None else "—"

    @admin.display(description="summary")
    def summary_line(self, packet):
        """The summary's first line, its times in the viewer's zone, cut at a word; what a packet without a summary
        is instead."""
        handoff = packet.stop_reason == Status.NEEDS_HELP
        text = packet.summary or ("(no summary: handed to a person)" if handoff else "(no summary: stopped early)")
        return shortened(local_times_text(text.strip().split("\n", 1)[0]), SUMMARY_SHOWN)

    @admin.display(description="subject")
    def subject(self, packet):
        return shortened(packet.run.subject, SUBJECT_SHOWN)

    @admin.display(description="account", ordering="run__ticket__account__code")
    def account(self, packet):
        return packet.run.ticket.account.code

    @admin.display(description="age", ordering="created_at")
    def age(self, packet):
        return timesince(packet.created_at, depth=1)

    @admin.display(description="since the run")
    def wrote_again(self, packet):
        """What a pending packet's run did not see: the customer wrote again (PacketView.customer_wrote_again)."""
        pending = packet.review_state == ReviewPacket.ReviewState.PENDING
        return "the customer wrote again" if pending and packet.customer_wrote_later else ""

    @admin.display(description="stop reason", ordering="stop_reason")
    def stop(self, packet):
        return stop_name(packet.stop_reason)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "<int:packet_id>/review/",
                view(post_only(self.review_view, packet_url)),
                name="agentrun_reviewpacket_review",
            ),
            path("run/<int:run_id>/", view(self.of_run_view), name="agentrun_reviewpacket_of_run"),
            *super().get_urls(),
        ]

    @staff_page
    def change_view(self, request, object_id, form_url="", extra_context=None):
        packet = access_packet(user=request.user, packet_id=object_pk(object_id))
        run = packet.run
        previous_id, next_id = packet_previous_pending(packet=packet), packet_next_pending(packet=packet)
        recheck = recheck_context(do_packet_recheck(user=request.user, packet=packet))
        view = packet_view(run=run, packet=packet, evidence_checks=recheck["rechecks"])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Review packet for {view.ticket_ref} (run {view.run_id})",
            "view": view,  # what the page shows of the packet; the rest is the page's own
            "run": run,
            "ticket": run.ticket,
            "customer": run.session.user.email if run.session.user else "an unnamed customer",
            "can_review": can(request.user, "agentrun.review_packet") and not view.superseded,
            "note": request.GET.get("note", ""),
            "reasons": PacketReview.Reason.choices,
            **recheck,
            "previous_url": packet_url(previous_id) if previous_id else "",
            "next_url": packet_url(next_id) if next_id else "",
        }
        return TemplateResponse(request, "admin/agentrun/reviewpacket/detail.html", context)

    @staff_page
    def of_run_view(self, request, run_id: int):
        """The packet of a run (the link packet events carry): its page, which checks who may see it."""
        packet_id = ReviewPacket.objects.filter(run_id=run_id).values_list("pk", flat=True).first()
        if packet_id is None:
            raise Refused("not_found", f"Run {run_id} has no review packet.", 404)
        return HttpResponseRedirect(packet_url(packet_id))

    @staff_page(back_to=packet_url)
    def review_view(self, request, packet_id: int):
        """Record the review, then open the next pending packet (the queue when none is left); a changed decision
        goes back to its packet, which shows it. The same decision sent again adds nothing."""
        action = request.POST.get("decision", "")
        if action not in PacketReview.Action.values:
            messages.error(request, "Choose accept or reject.")
            return HttpResponseRedirect(packet_url(packet_id))
        decision, change = PacketReview.Action(action).decision, request.POST.get("change_decision") == "1"
        review, created = do_review(
            user=request.user,
            packet_id=packet_id,
            decision=decision,
            note=request.POST.get("note", ""),
            reason=request.POST.get("reason", ""),
            reply=request.POST.get("reply") if "reply" in request.POST else None,
            acknowledge_changed_evidence=request.POST.get("acknowledge_changed_evidence") == "on",
            change_decision=change,
        )
        if change:
            done = "changed to " if created else "already "
            messages.success(
                request, f"Packet {packet_id}: decision {done}{decision}. Nothing was sent to the customer."
            )
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
    return {
        "rechecks": [c.as_dict(links) for c in checks],
        "recheck_attention": attention,
        "recheck_unchecked": unchecked,
        "changes": evidence_changes(checks),
    }


@admin.register(PacketReview)
class PacketReviewAdmin(ReadOnlyAdmin):
    list_display = ("id", "packet_link", "decision", "reviewer", "created_at", "acknowledged_changed_evidence", "note")
    list_filter = ("decision",)
    list_select_related = ("reviewer", "packet__run__ticket")
    list_columns = (
        *("id", "decision", "created_at", "acknowledged_changed_evidence", "note"),
        *("reviewer__username", "packet__run__ticket__ref"),
    )
    show_full_result_count = False  # a second count of every review (kit.adminkit.LargeListPaginator)
    list_per_page = 50  # as the run list

    @admin.display(description="packet")
    def packet_link(self, review):
        return format_html(
            '<a href="{}">{} (run {})</a>',
            packet_url(review.packet_id),
            review.packet.run.ticket.ref,
            review.packet.run_id,
        )


@admin.register(EvidenceCheck)
class EvidenceCheckAdmin(ReadOnlyAdmin):
    """Every re-check of a cited evidence item when its packet was opened (read-only, append-only)."""

    list_display = ("id", "checked_at", "packet_link", "evidence_ref", "result", "what_changed", "checked_by")
    list_filter = ("result", "checked_at")
    list_select_related = ("packet__run__ticket", "evidence", "checked_by")
    search_fields = ("=packet__id", "packet__run__ticket__ref")
    list_per_page = 50
    show_full_result_count = False  # a second count of every check (kit.adminkit.LargeListPaginator)

    @admin.display(description="packet")
    def packet_link(self, check):
        return format_html(
            '<a href="{}">{} (packet {})</a>', packet_url(check.packet_id), check.packet.run.ticket.ref, check.packet_id
        )

    @admin.display(description="evidence")
    def evidence_ref(self, check):
        return check.evidence.ref

    @admin.display(description="difference or reason")
    def what_changed(self, check):
        return local_times_text("; ".join(d.get("text", "") for d in check.differences) or check.reason)
