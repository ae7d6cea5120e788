"""engine.packetview: one view of a packet, of which the page, the API, the webhook and the command are projections."""

import inspect
from datetime import UTC, datetime

import pytest
from django.urls import reverse
from django.utils.html import escape

from engine.management.commands.investigate import render_packet
from engine.models import ReviewPacket
from engine.packetview import PacketView, packet_view
from integrations.webhooks import packet_event, packet_event_of
from staff.api import PacketOut, packet_out
from tests.support.staff import bearer


class OnlyTheView:
    """A PacketView that will not hand over the models it was built from: a projection that reads `run` or
    `packet` computes a field from the models instead of taking the view's. It records what it was asked."""

    def __init__(self, view: PacketView):
        self._view, self.read = view, set()

    def __getattr__(self, name):
        if name in ("run", "packet"):
            raise AssertionError(f"a projection read the model through view.{name}")
        self.read.add(name)
        return getattr(self._view, name)


@pytest.fixture
def investigated(client, staff_user, ticket_t1001):
    """T-1001 investigated through the API (the rules model, inline): its packet, and the API's auth."""
    auth = bearer(staff_user)
    packet_id = client.post("/api/tickets/T-1001/investigations", **auth).json()["packet_id"]
    return ReviewPacket.objects.select_related("run__ticket").get(pk=packet_id), auth


def test_the_api_packet_takes_every_field_from_the_view_alone(investigated):
    packet, _ = investigated
    assert list(inspect.signature(packet_out).parameters) == ["view"]
    view = OnlyTheView(packet_view(run=packet.run, packet=packet))

    out = packet_out(view)

    assert set(out) == set(PacketOut.model_fields)
    assert out["summary"] == packet.summary and out["stop_explanation"] == view.stop_explanation
    assert [e.ref for e in out["evidence"]] == packet.evidence_refs == ["E1", "E2"]


def test_the_webhook_and_the_command_take_their_fields_from_the_view_alone(investigated):
    packet, _ = investigated
    view = OnlyTheView(packet_view(run=packet.run, packet=packet))

    event = packet_event_of(view, review=None, now=datetime.now(UTC))
    text = render_packet(view)

    assert event.packet.summary == packet.summary and event.run.stop_reason == view.stop_explanation
    assert {"summary", "stop_explanation", "ticket_ref", "detail"} <= view.read
    assert f"Review packet for T-1001 (run {packet.run_id}" in text and "  E1: read_job_status" in text


def test_the_page_the_api_and_the_webhook_show_the_same_packet(client, staff_client, investigated):
    packet, auth = investigated
    api = client.get(f"/api/packets/{packet.pk}", **auth).json()
    page = staff_client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk]))
    event = packet_event(run=packet.run, packet=packet, review=None, now=datetime.now(UTC))
    shown = page.context["view"]

    assert isinstance(shown, PacketView)
    assert shown.summary == api["summary"] == event.packet.summary
    assert [e.ref for e in shown.evidence] == [e["ref"] for e in api["evidence"]] == shown.evidence_refs
    assert shown.stop_reason == api["stop_reason"] == "COMPLETED"
    assert shown.stop_explanation == api["stop_explanation"] == event.run.stop_reason
    assert [c["ref"] for c in shown.evidence_checks] == [c["ref"] for c in api["evidence_checks"]]
    assert f'<p class="sa-explain" id="stop-explanation">{escape(shown.explanation)}</p>' in page.content.decode()


def test_the_decision_is_the_latest_staff_review(client, investigated, supervisor_user):
    packet, auth = investigated
    assert packet_view(run=packet.run, packet=packet).decision is None
    client.post(f"/api/packets/{packet.pk}/review", {"decision": "accept"}, content_type="application/json", **auth)
    client.post(
        f"/api/packets/{packet.pk}/review",
        {"decision": "reject", "reason": "wrong_conclusion", "note": "Wrong job.", "change_decision": True},
        content_type="application/json",
        **bearer(supervisor_user),
    )
    packet.refresh_from_db()

    view = packet_view(run=packet.run, packet=packet)

    assert [r.decision for r in view.reviews] == ["accepted", "rejected"]
    assert view.decision.decision == "rejected" and view.decision.reviewer == supervisor_user
