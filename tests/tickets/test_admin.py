"""Tickets in the admin: the latest run in the list, the Investigate button and bulk action, the progress page."""
from django.urls import reverse

from agentrun.models import Run, RunRequest
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
