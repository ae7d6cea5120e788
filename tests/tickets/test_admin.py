"""Tickets in the admin: the latest run in the list, the Investigate button and bulk action, the progress page."""
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from agentrun.models import Run, RunRequest
from tickets.models import Account, CustomerSession, Ticket
from tests.support.staff import client_for, make_runs


def test_ticket_list_shows_the_latest_run_status_and_packet_state(staff_client, demo):
    make_runs(2, endings=[("NEEDS_HELP", ""), ("COMPLETED", "")])  # the first is the newest
    page = staff_client.get(reverse("admin:tickets_ticket_changelist")).content.decode()
    assert "T-1001" in page and "NEEDS_HELP" in page and "pending" in page


def test_investigate_button_starts_a_run_and_lands_on_its_progress_page(staff_user, ticket_t1001):
    client = client_for(staff_user)
    page = client.get(reverse("admin:tickets_ticket_change", args=[ticket_t1001.pk])).content.decode()
    assert 'id="investigate"' in page
    response = client.post(reverse("admin:tickets_ticket_investigate", args=[ticket_t1001.pk]))
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:agentrun_run_progress", args=[run.pk])
    assert RunRequest.objects.get(run=run).requested_by == staff_user
    progress = client.get(response["Location"]).content.decode()
    assert 'data-status="COMPLETED"' in progress
    assert "3 of 8" in progress and "2 of 6" in progress  # model requests and tool attempts against limits
    assert 'http-equiv="refresh"' not in progress  # an ended run stops refreshing
    assert "Open the review packet" in progress


def test_progress_page_refreshes_while_the_run_is_active(staff_client, demo):
    run = make_runs(1, endings=[("RUNNING", "")])[0]
    page = staff_client.get(reverse("admin:agentrun_run_progress", args=[run.pk])).content.decode()
    assert 'http-equiv="refresh"' in page and "Time left" in page and " s of 45" in page


def test_bulk_action_investigates_selected_tickets(staff_user, ticket_t1001):
    client = client_for(staff_user)
    response = client.post(reverse("admin:tickets_ticket_changelist"),
                           {"action": "investigate_selected", "_selected_action": [ticket_t1001.pk]})
    run = Run.objects.get()
    assert response["Location"] == reverse("admin:agentrun_run_progress", args=[run.pk])
    assert run.status == "COMPLETED"


def test_user_without_a_role_sees_no_button_and_is_refused_with_a_message(outsider, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    client = client_for(outsider)
    assert client.get(reverse("admin:tickets_ticket_change", args=[ticket.pk])).status_code == 403
    response = client.post(reverse("admin:tickets_ticket_investigate", args=[ticket.pk]), follow=True)
    assert "Only Support staff may start investigations." in response.content.decode()
    assert Run.objects.count() == 0


def test_investigate_needs_post(staff_client, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    assert staff_client.get(reverse("admin:tickets_ticket_investigate", args=[ticket.pk])).status_code == 405
    assert Run.objects.count() == 0


def test_a_second_investigation_while_one_is_active_is_refused(staff_client, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    make_runs(1, endings=[("WAITING_APPROVAL", "")])
    response = staff_client.post(reverse("admin:tickets_ticket_investigate", args=[ticket.pk]), follow=True)
    assert "is still WAITING_APPROVAL" in response.content.decode()
    assert Run.objects.count() == 1


def _add_ticket(client, **extra):
    acme = Account.objects.get(code="ACME")
    data = {"account": acme.pk, "session": CustomerSession.objects.get(ref="S-ACME-1").pk,
            "subject": "Export fails", "body": "The export button does nothing.", "_save": "Save", **extra}
    return client.post(reverse("admin:tickets_ticket_add"), data)


def test_add_ticket_offers_only_what_staff_write(staff_client, demo):
    page = staff_client.get(reverse("admin:tickets_ticket_add")).content.decode()
    for shown in ("id_account", "id_session", "id_subject", "id_body"):
        assert f'id="{shown}"' in page
    for internal in ("evaluation_copy", "evidence_count", "source", "external_id", "ref"):
        assert f'name="{internal}"' not in page, internal


def test_internal_fields_posted_to_add_ticket_are_ignored_and_the_ref_is_assigned(staff_client, demo):
    response = _add_ticket(staff_client, evaluation_copy="on", evidence_count="7", source="zendesk",
                           external_id="99999999", ref="ZD-99999999")
    assert response.status_code == 302
    ticket = Ticket.objects.get(subject="Export fails")
    assert (ticket.ref, ticket.evaluation_copy, ticket.evidence_count, ticket.source, ticket.external_id) == \
        ("T-1008", False, 0, "", "")  # the demo's tickets are T-1001 to T-1007
    listed = staff_client.get(reverse("admin:tickets_ticket_changelist")).content.decode()
    assert "T-1008" in listed  # not hidden as an evaluation's copy


def test_each_added_ticket_takes_the_next_ref_past_odd_ones(staff_client, demo):
    Ticket.objects.filter(ref="T-1007").update(ref="T-1007x")  # a ref typed by hand before refs were assigned
    Ticket.objects.filter(ref="T-1006").update(ref="T-999999")
    _add_ticket(staff_client)
    _add_ticket(staff_client, subject="Second")
    assert Ticket.objects.get(subject="Export fails").ref == "T-1000000"
    assert Ticket.objects.get(subject="Second").ref == "T-1000001"


def test_a_ticket_page_shows_its_ref_and_source_but_they_cannot_be_changed(demo):
    root = User.objects.create_superuser("root", password="a-long-test-password")
    client = client_for(root)
    ticket = Ticket.objects.get(ref="T-1001")
    Ticket.objects.filter(pk=ticket.pk).update(source="zendesk", external_id="48213")
    url = reverse("admin:tickets_ticket_change", args=[ticket.pk])
    page = client.get(url).content.decode()
    assert "T-1001" in page and "48213" in page and 'name="external_id"' not in page and 'name="ref"' not in page
    response = client.post(url, {"account": ticket.account_id, "session": ticket.session_id, "subject": "Renamed",
                                 "body": ticket.body, "ref": "T-1", "external_id": "1", "evaluation_copy": "on",
                                 "_save": "Save"})
    assert response.status_code == 302
    ticket.refresh_from_db()
    assert (ticket.subject, ticket.ref, ticket.external_id, ticket.evaluation_copy) == ("Renamed", "T-1001", "48213",
                                                                                        False)


@pytest.mark.parametrize("separator", ["\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\x85"])
def test_a_subject_of_more_than_one_line_is_refused(staff_client, demo, separator):
    response = _add_ticket(staff_client, subject=f"Export fails{separator}Priority: urgent")
    assert response.status_code == 200
    assert "Use one line" in response.content.decode()
    assert not Ticket.objects.filter(subject__startswith="Export fails").exists()
