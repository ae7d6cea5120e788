"""The staff lists at a year of data: counted without reading every row, every row still reachable, searched and
filtered through indexes (kit.adminkit.LargeListPaginator, tickets.selectors.tickets_search, the filters)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import kit.adminkit
from engine.models import Run
from engine.selectors import run_model_names
from staff.admin.runs import RunAdmin
from tests.support.staff import make_runs
from tickets.models import Ticket

RUN_LINK = re.compile(r'href="/admin/agentrun/run/(\d+)/change/')
NEXT_PAGE = re.compile(r'<a href="([^"]+)" class="sa-next-page">')


def _run_list(client, query: str = "") -> tuple[int, str]:
    response = client.get(reverse("admin:agentrun_run_changelist") + query)
    return response.status_code, response.content.decode()


def test_a_list_past_the_exact_count_is_estimated_and_every_row_stays_reachable(supervisor_client, demo, monkeypatch):
    monkeypatch.setattr(kit.adminkit, "EXACT_COUNT_UP_TO", 5)
    monkeypatch.setattr(RunAdmin, "list_per_page", 4)
    runs = make_runs(13)
    status, page = _run_list(supervisor_client)
    assert status == 200
    seen: list[int] = []
    if connection.vendor == "postgresql":  # the planner's estimate, shown as such; the next page always linked
        assert re.search(r"about \d+ runs", page)
        while match := NEXT_PAGE.search(page):
            seen += [int(pk) for pk in RUN_LINK.findall(page)]
            status, page = _run_list(supervisor_client, match.group(1).replace("&amp;", "&"))
            assert status == 200
        seen += [int(pk) for pk in RUN_LINK.findall(page)]
    else:  # SQLite counts exactly: the usual page links
        assert "13 runs" in page and "about" not in page
        for number in range(1, 5):
            seen += [int(pk) for pk in RUN_LINK.findall(_run_list(supervisor_client, f"?p={number}")[1])]
    assert seen == [r.pk for r in runs]  # newest first, each once


def test_a_list_within_the_exact_count_says_how_many_exactly(supervisor_client, demo):
    make_runs(7)
    status, page = _run_list(supervisor_client)
    assert status == 200 and "7 runs" in page and "about" not in page and "sa-next-page" not in page


def _ticket_refs(client, query: str) -> set[str]:
    page = client.get(reverse("admin:tickets_ticket_changelist") + query).content.decode()
    return set(re.findall(r">(T-\d+)<", page))


def test_ticket_search_looks_in_the_ref_subject_description_and_customer_e_mail(staff_client, demo):
    t1001 = Ticket.objects.get(ref="T-1001")
    assert "T-1001" in _ticket_refs(staff_client, "?q=T-1001")
    assert "T-1001" in _ticket_refs(staff_client, "?q=renamed+workspace")  # every term, any case
    assert "T-1001" in _ticket_refs(staff_client, f"?q={t1001.body.split()[3]}")
    assert "T-1001" in _ticket_refs(staff_client, "?q=dana%40acme")
    assert "T-1001" not in _ticket_refs(staff_client, "?q=renamed+nowhere-at-all")


def test_latest_run_filter_reads_each_tickets_latest_run_only(staff_client, demo):
    t1001, t1002 = Ticket.objects.get(ref="T-1001"), Ticket.objects.get(ref="T-1002")
    make_runs(2, ticket=t1001, endings=[("COMPLETED", ""), ("INVALID_OR_FORBIDDEN", "forbidden")])  # newest first
    make_runs(1, ticket=t1002, endings=[("INVALID_OR_FORBIDDEN", "forbidden")])
    assert _ticket_refs(staff_client, "?latest_run=INVALID_OR_FORBIDDEN") == {"T-1002"}
    assert _ticket_refs(staff_client, "?latest_run=COMPLETED") == {"T-1001"}
    never = _ticket_refs(staff_client, "?latest_run=never")
    assert "T-1001" not in never and "T-1002" not in never and never


def test_the_pending_filter_lists_tickets_a_packet_waits_for_and_the_others(staff_client, demo):
    make_runs(2)  # T-1001's packets wait for review
    waiting, others = _ticket_refs(staff_client, "?pending=yes"), _ticket_refs(staff_client, "?pending=no")
    assert waiting == {"T-1001"}
    assert "T-1001" not in others and "T-1002" in others


@pytest.mark.parametrize(
    "url,table,unread",
    [
        ("admin:agentrun_run_changelist", "agentrun_run", ("body", "evidence_refs", "pending_call")),
        ("admin:agentrun_reviewpacket_changelist", "agentrun_reviewpacket", ("attempts", "evidence_refs")),
        ("admin:agentrun_reviewpacket_changelist", "agentrun_run", ("body", "budget")),
        ("admin:agentrun_packetreview_changelist", "agentrun_reviewpacket", ("summary", "attempts")),
        ("admin:tickets_ticket_changelist", "tickets_ticket", ("body", "extra")),
    ],
)
def test_a_list_reads_only_the_columns_its_rows_show(supervisor_client, demo, url, table, unread):
    make_runs(3)
    with CaptureQueriesContext(connection) as captured:
        page = supervisor_client.get(reverse(url))
    assert page.status_code == 200
    model_table = page.context["cl"].model._meta.db_table
    rows = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(f'SELECT "{model_table}"."id", ')]
    assert len(rows) == 1 and f'"{table}"."id"' in rows[0]  # the page's rows, with those selected with them
    assert not [column for column in unread if f'"{table}"."{column}"' in rows[0]]


def test_model_filter_offers_every_model_runs_were_made_with(supervisor_client, demo):
    make_runs(3)
    Run.objects.filter(pk=Run.objects.order_by("pk").first().pk).update(model_name="openai:gpt-4.1-mini")
    assert run_model_names() == ["openai:gpt-4.1-mini", "rules"]
    status, page = _run_list(supervisor_client, "?model_name=openai%3Agpt-4.1-mini")
    assert status == 200 and "?model_name=rules" in page and len(RUN_LINK.findall(page)) == 1


@pytest.mark.parametrize(
    "table,index",
    [
        ("tickets_ticket", "ticket_subject_trgm"),
        ("tickets_ticket", "ticket_body_trgm"),
        ("tickets_evidence", "evidence_source_ref_trgm"),
        ("agentrun_run", "run_subject_trgm"),
    ],
)
def test_search_trigram_indexes_exist_on_postgresql_alone(db, table, index):
    with connection.cursor() as cursor:
        names = set(connection.introspection.get_constraints(cursor, table))
    assert (index in names) == (connection.vendor == "postgresql")
