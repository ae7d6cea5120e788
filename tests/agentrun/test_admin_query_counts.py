"""Query counts of the run list, the review queue (and its search), the ticket list and the dashboard do not grow
with rows.

A supervisor's admin pages read the calls waiting for approval once (the count in the header); the
ticket list reads the accounts for its filter; the dashboard reads the review backlog."""

import pytest
from django.urls import reverse

from tests.support.staff import make_runs

PAGES = [
    ("run list", lambda: reverse("admin:agentrun_run_changelist"), 9),
    ("review queue", lambda: reverse("admin:agentrun_reviewpacket_changelist"), 8),
    ("review queue search", lambda: reverse("admin:agentrun_reviewpacket_changelist") + "?state=all&q=dana+J-42", 8),
    ("ticket list", lambda: reverse("admin:tickets_ticket_changelist"), 9),
    ("approvals", lambda: reverse("admin:agentrun_approval_changelist"), 9),
    ("review history", lambda: reverse("admin:agentrun_packetreview_changelist"), 8),
    ("dashboard", lambda: reverse("outcomes"), 12),  # six of them count the outcomes (staff.dashboard.outcomes_of)
    ("api run list", lambda: "/api/runs?limit=100", 7),  # the page's ids, then their rows
]


@pytest.mark.parametrize("rows", [10, 500])
@pytest.mark.parametrize("name,url,bound", PAGES, ids=[p[0] for p in PAGES])
def test_page_queries_stay_bounded(
    supervisor_client, supervisor_user, demo, django_assert_max_num_queries, rows, name, url, bound
):
    from staff.reviews import packet_review

    runs = make_runs(rows)
    for run in runs[: rows // 2]:
        packet_review(packet_id=run.packet.pk, reviewer=supervisor_user, decision="accepted")
    target = url()
    supervisor_client.get(target)  # warm the session and content-type caches
    with django_assert_max_num_queries(bound):
        response = supervisor_client.get(target)
    assert response.status_code == 200
