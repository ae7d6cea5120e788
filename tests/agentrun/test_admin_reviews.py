"""The review queue: pending first, oldest first; accept or reject with a note; append-only history."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from engine.models import ApiToken, PacketReview, ReviewPacket, StaffPreference
from staff.reviews import packet_review
from tests.support.staff import make_runs


def _queue_ids(client, query: str = "") -> list[int]:
    response = client.get(reverse("admin:agentrun_reviewpacket_changelist") + query)
    return [p.pk for p in response.context["cl"].result_list]


def test_queue_lists_pending_packets_first_oldest_first(staff_client, staff_user, demo):
    runs = make_runs(4)  # packets created now, now-1s, now-2s, now-3s
    packets = [r.packet for r in runs]
    packet_review(packet_id=packets[3].pk, reviewer=staff_user, decision="accepted")  # the oldest is reviewed
    assert _queue_ids(staff_client) == [packets[2].pk, packets[1].pk, packets[0].pk]  # the queue opens on pending
    assert _queue_ids(staff_client, "?state=all") == [packets[2].pk, packets[1].pk, packets[0].pk, packets[3].pk]
    assert _queue_ids(staff_client, "?state=accepted") == [packets[3].pk]


def test_the_stop_reason_filter_offers_the_endings_a_packet_can_have_in_plain_words(staff_client, demo):
    packets = [r.packet for r in make_runs(5)]  # COMPLETED, NEEDS_HELP, NO_PROGRESS, ...
    response = staff_client.get(reverse("admin:agentrun_reviewpacket_changelist"))
    [stop_filter] = [f for f in response.context["cl"].filter_specs if f.title == "stop reason"]
    offered = dict(stop_filter.lookup_choices)
    assert offered["NEEDS_HELP"] == "Handed to a person" and offered["NO_PROGRESS"] == "Repeated the last lookup"
    assert not {"QUEUED", "RUNNING", "WAITING_APPROVAL"} & set(offered)
    sidebar = response.content.decode()
    assert ">Handed to a person</a>" in sidebar and ">Queued</a>" not in sidebar and ">NEEDS_HELP<" not in sidebar
    assert _queue_ids(staff_client, "?stop_reason=NEEDS_HELP") == [packets[1].pk]


def test_packet_page_shows_summary_evidence_attempts_questions_and_stop_reason(staff_user, ticket_t1001):
    from tests.support.staff import client_for

    client = client_for(staff_user)
    client.post(reverse("admin:tickets_ticket_investigate", args=[ticket_t1001.pk]))
    packet = ReviewPacket.objects.get()
    page = client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert packet.summary[:40] in page
    assert 'id="evidence-E1"' in page and 'id="evidence-E2"' in page
    assert "EXPORT_ROLE_REQUIRED" in page  # the excerpts are inline
    assert page.count("<tr><td>", page.index('id="attempts"')) >= 2
    assert 'id="open-questions"' in page and '<span id="stop-label">Completed</span>' in page
    assert "Nothing was sent to the customer" in page


def test_accepting_appends_a_review_and_updates_the_queue_state(staff_client, staff_user, demo):
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    response = staff_client.post(url, {"decision": "accept", "note": ""}, follow=True)
    assert f"Packet {packet.pk} accepted. Nothing was sent to the customer." in response.content.decode()
    review = PacketReview.objects.get()
    assert (review.reviewer, review.decision, review.note) == (staff_user, "accepted", "")
    packet.refresh_from_db()
    assert packet.review_state == "accepted" and packet.summary == "s"


def test_rejecting_needs_a_note(staff_client, demo):
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    page = staff_client.post(
        url, {"decision": "reject", "reason": "wrong_conclusion", "note": "   "}, follow=True
    ).content.decode()
    assert "a note is required" in page
    assert PacketReview.objects.count() == 0
    staff_client.post(
        url, {"decision": "reject", "reason": "wrong_conclusion", "note": "Wrong job: the customer means J-41."}
    )
    packet.refresh_from_db()
    assert packet.review_state == "rejected"
    assert PacketReview.objects.get().note == "Wrong job: the customer means J-41."


def test_reviews_are_history_never_edited(staff_user, supervisor_user, demo):
    packet = make_runs(1)[0].packet
    first, _ = packet_review(
        packet_id=packet.pk, reviewer=staff_user, decision="rejected", reason="wrong_conclusion", note="too vague"
    )
    packet_review(
        packet_id=packet.pk, reviewer=supervisor_user, decision="accepted", note="fine after all", change_decision=True
    )
    assert list(PacketReview.objects.filter(packet=packet).values_list("decision", flat=True)) == [
        "rejected",
        "accepted",
    ]
    first.note = "rewritten"
    with pytest.raises(ValueError):
        first.save()
    with pytest.raises(ValueError):
        first.delete()
    assert PacketReview.objects.get(pk=first.pk).note == "too vague"


def test_a_user_without_the_review_permission_is_refused(outsider, demo):
    from tests.support.staff import client_for

    packet = make_runs(1)[0].packet
    client = client_for(outsider)
    response = client.post(reverse("admin:agentrun_reviewpacket_review", args=[packet.pk]), {"decision": "accept"})
    assert response.status_code == 302
    assert PacketReview.objects.count() == 0
    assert client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).status_code == 403


def test_review_history_page_is_read_only(staff_client, staff_user, demo):
    packet = make_runs(1)[0].packet
    review, _ = packet_review(packet_id=packet.pk, reviewer=staff_user, decision="accepted")
    assert staff_client.get(reverse("admin:agentrun_packetreview_changelist")).status_code == 200
    assert (
        staff_client.post(reverse("admin:agentrun_packetreview_delete", args=[review.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert PacketReview.objects.count() == 1


def test_api_tokens_are_created_in_the_admin_and_shown_once(staff_client, staff_user, supervisor_user, demo):
    response = staff_client.post(reverse("admin:agentrun_apitoken_add"), {"name": "my script"}, follow=True)
    token = ApiToken.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    raw = next(m.split(": ", 1)[1] for m in shown if "API token" in m)
    assert token.user == staff_user and raw.startswith(token.prefix) and raw not in token.digest
    api = staff_client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    # each user sees only their own tokens
    from tests.support.staff import client_for

    other = client_for(supervisor_user).get(reverse("admin:agentrun_apitoken_changelist")).content.decode()
    assert "my script" not in other


# --- one honest review: final unless changed on purpose ----------------------------------------------


def _page(client, packet) -> str:
    return client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()


def test_a_reviewed_packet_shows_who_decided_when_in_the_viewers_zone_and_no_accept(staff_user, supervisor_user, demo):
    from tests.support.staff import client_for

    packet = make_runs(1)[0].packet
    review, _ = packet_review(packet_id=packet.pk, reviewer=staff_user, decision="accepted")
    PacketReview.objects.filter(pk=review.pk).update(created_at=datetime(2026, 9, 14, 8, 42, tzinfo=UTC))
    StaffPreference.objects.create(user=supervisor_user, time_zone="Europe/Paris")
    page = _page(client_for(supervisor_user), packet)
    assert "<strong>Accepted by staff at 10:42 (CEST)</strong> on 2026-09-14" in page
    assert 'id="change-decision"' in page and "Change to rejected" in page
    assert 'id="accept"' not in page and 'id="reject"' not in page and 'id="review-form"' not in page


def test_the_same_submit_twice_adds_nothing(staff_client, staff_user, demo):
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    staff_client.post(url, {"decision": "accept"})
    again = staff_client.post(url, {"decision": "accept"}, follow=True).content.decode()  # a double click, `a` twice
    assert f"Packet {packet.pk} was already accepted by you; nothing was added." in again
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted"]


def test_another_decision_needs_change_decision_and_a_note(staff_client, staff_user, demo):
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    staff_client.post(url, {"decision": "accept"})
    plain = staff_client.post(
        url, {"decision": "reject", "reason": "wrong_conclusion", "note": "no"}, follow=True
    ).content.decode()
    assert "is already accepted (by staff)" in plain
    unexplained = staff_client.post(
        url, {"decision": "reject", "reason": "wrong_conclusion", "note": " ", "change_decision": "1"}, follow=True
    )
    assert "a note is required." in unexplained.content.decode()
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted"]
    changed = staff_client.post(
        url,
        {"decision": "reject", "reason": "wrong_conclusion", "note": "Wrong job.", "change_decision": "1"},
        follow=True,
    )
    assert changed.redirect_chain[-1][0] == reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])
    page = changed.content.decode()
    assert f"Packet {packet.pk}: decision changed to rejected." in page
    assert "<strong>Rejected by staff at " in page and "Change to accepted" in page and "Wrong job." in page
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted", "rejected"]
    assert ReviewPacket.objects.get(pk=packet.pk).review_state == "rejected"


def test_a_get_on_a_post_only_url_opens_the_page_of_its_object(staff_client, demo):
    run = make_runs(1)[0]
    review = staff_client.get(reverse("admin:agentrun_reviewpacket_review", args=[run.packet.pk]))
    assert review.status_code == 302 and review["Location"] == reverse(
        "admin:agentrun_reviewpacket_change", args=[run.packet.pk]
    )
    for name in ("agentrun_run_cancel", "agentrun_run_approval"):
        response = staff_client.get(reverse(f"admin:{name}", args=[run.pk]))
        assert response.status_code == 302 and response["Location"] == reverse(
            "admin:agentrun_run_change", args=[run.pk]
        )
    assert not PacketReview.objects.exists()


def test_the_suggested_reply_is_edited_on_the_page_and_kept_with_the_acceptance(staff_client, staff_user, demo):
    packet = make_runs(1)[0].packet
    ReviewPacket.objects.filter(pk=packet.pk).update(reply="Hello,\n\nJ-42 failed <because> of the role.")
    page_url = reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])
    page = staff_client.get(page_url).content.decode()
    assert 'name="reply" form="review-form"' in page and "J-42 failed &lt;because&gt; of the role." in page
    assert 'id="copy-reply"' in page
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    staff_client.post(url, {"decision": "accept", "reply": "Hi Dana,\r\n\r\nAsk an admin for the editor role."})
    review = PacketReview.objects.get(packet=packet)
    assert (review.decision, review.reply) == ("accepted", "Hi Dana,\n\nAsk an admin for the editor role.")
    page = staff_client.get(page_url).content.decode()
    assert 'id="reply-kept-note"' in page and "edited from the suggestion" in page and 'name="reply"' not in page
    assert "Ask an admin for the editor role." in page


def test_a_rejection_without_a_reason_is_refused_on_the_page_and_a_reason_is_shown(staff_client, demo):
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    page = staff_client.post(url, {"decision": "reject", "note": "Wrong job."}, follow=True).content.decode()
    assert "a reason is required" in page and PacketReview.objects.count() == 0
    staff_client.post(url, {"decision": "reject", "reason": "no_article", "note": "Wrong job."})
    page = staff_client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert '<span id="decision-reason">no article answers it</span>' in page
