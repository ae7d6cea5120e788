"""What is sent to the help desk (the packet webhook's events, the Zendesk notes), with every attempt (read-only)."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from engine.models import WebhookAttempt, WebhookDelivery
from staff.admin.base import ReadOnly, ReadOnlyAdmin, run_url


class WebhookAttemptInline(ReadOnly, admin.TabularInline):
    model = WebhookAttempt
    fields = ("number", "started_at", "outcome", "http_status", "error", "latency_ms")
    readonly_fields = fields
    extra = 0


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Packet events and Zendesk notes sent to the help desk, with every attempt (read-only)."""

    list_display = (
        "id",
        "event_type",
        "target_shown",
        "run_link",
        "status",
        "attempt_count",
        "created_at",
        "next_attempt_at",
        "finished_at",
    )
    list_filter = ("status", "target", "event_type", "created_at")
    search_fields = ("=event_id", "=run__id")
    fields = (
        "event_id",
        "event_type",
        "target_shown",
        "run",
        "status",
        "attempt_count",
        "created_at",
        "next_attempt_at",
        "finished_at",
        "payload_json",
    )
    readonly_fields = fields
    inlines = [WebhookAttemptInline]
    list_per_page = 50

    @admin.display(description="sent to", ordering="target")
    def target_shown(self, delivery):
        """The webhook, or the Zendesk ticket the note goes on."""
        if delivery.target == WebhookDelivery.Target.ZENDESK_NOTE:
            return f"{delivery.get_target_display()} on ticket {delivery.ticket_external_id}"
        return delivery.get_target_display()

    @admin.display(description="run")
    def run_link(self, delivery):
        return (
            format_html('<a href="{}">run {}</a>', run_url(delivery.run_id), delivery.run_id)
            if delivery.run_id
            else "—"
        )

    @admin.display(description="payload")
    def payload_json(self, delivery):
        return format_html("<pre>{}</pre>", json.dumps(delivery.payload, indent=2, ensure_ascii=False))
