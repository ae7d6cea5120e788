"""Caps on automatic investigation: the decision (a table, no database), then signed Zendesk requests through
a live server: a burst of new tickets starts no more runs than the account's caps allow, the others say why,
supervisors find them, a metric counts them, and staff can still investigate them by hand."""

import json
import re
import threading
import urllib.request
from decimal import Decimal

import pytest
from django.test import Client

from engine.autocaps import AutoCaps, AutoUsage, Cap, auto_cap_reached
from engine.models import Run, RunRequest
from engine.statuses import Status
from tests.support.metrics import parse, value
from tests.support.staff import bearer
from tests.tickets.test_zendesk import PAYLOAD, SECRET, _send, _signed
from tickets.models import Account, Ticket

HALF = 500_000  # the default budget's max_cost_micros: $0.50


@pytest.mark.parametrize(
    ("runs_per_hour", "per_day", "runs", "spent", "held"),
    [
        (3, 2_000_000, 0, 0, None),
        (3, 2_000_000, 2, 0, None),
        (3, 2_000_000, 3, 0, Cap.RUNS_PER_HOUR),  # a fourth would pass 3
        (3, 2_000_000, 0, 1_500_000, None),  # 1.50 + 0.50 is the cap, not past it
        (3, 2_000_000, 0, 1_500_001, Cap.DOLLARS_PER_DAY),
        (3, 2_000_000, 3, 1_900_000, Cap.RUNS_PER_HOUR),  # runs are checked first
        (0, 2_000_000, 0, 0, Cap.RUNS_PER_HOUR),  # 0: no automatic runs
        (3, 0, 0, 0, Cap.DOLLARS_PER_DAY),
    ],
)
def test_a_run_starts_only_within_both_caps(runs_per_hour, per_day, runs, spent, held):
    reached = auto_cap_reached(
        caps=AutoCaps(runs_per_hour=runs_per_hour, micros_per_day=per_day),
        usage=AutoUsage(runs_last_hour=runs, micros_today=spent),
        next_run_micros=HALF,
    )
    assert (reached.cap if reached else None) == held


def test_a_cap_of_no_dollars_holds_even_a_free_run():
    caps, usage = AutoCaps(runs_per_hour=5, micros_per_day=0), AutoUsage(runs_last_hour=0, micros_today=0)
    assert auto_cap_reached(caps=caps, usage=usage, next_run_micros=0).reached == "$0.00 per day"


# --- through a live server ----------------------------------------------------------------


@pytest.fixture
def zendesk(live_server, demo_committed, settings):
    settings.INTAKE_ZENDESK_SECRET = SECRET
    settings.AGENT_AUTO_INVESTIGATE = True
    return live_server.url


def _new_ticket(url: str, n: int) -> tuple[int, dict]:
    body = json.dumps({**PAYLOAD, "external_id": f"5{n:04d}"}).encode()
    return _send(url, body, _signed(body))


def _held_metric(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        return value(parse(response.read().decode()), "supportagent_tickets_auto_held")


def _automatic_runs() -> list[Run]:
    return list(Run.objects.filter(request__via=RunRequest.Via.INTAKE).order_by("pk"))


def _held() -> list[Ticket]:
    return list(Ticket.objects.filter(auto_held_at__isnull=False).order_by("pk"))


NOTE = r"not investigated automatically: ACME reached {} at \d\d:\d\d UTC"


def test_a_cap_of_3_runs_per_hour_starts_3_of_5_new_tickets(zendesk, staff_user, supervisor_user):
    Account.objects.filter(code="ACME").update(auto_runs_per_hour=3)
    assert [_new_ticket(zendesk, n)[0] for n in range(5)] == [201] * 5
    runs = _automatic_runs()
    assert len(runs) == 3 and {r.status for r in runs} == {Status.COMPLETED}
    held = _held()
    assert [t.external_id for t in held] == ["50003", "50004"]
    assert all(re.fullmatch(NOTE.format("3 runs per hour"), t.auto_held_note) for t in held)
    assert not held[0].runs.exists()
    assert _held_metric(zendesk) == 2

    supervisors = Client()
    supervisors.force_login(supervisor_user)
    page = supervisors.get(f"/admin/tickets/ticket/{held[0].pk}/change/").content.decode()
    assert held[0].auto_held_note in page and 'id="auto-held"' in page
    listed = supervisors.get("/admin/tickets/ticket/?auto_held=waiting").context["cl"].result_list
    assert sorted(t.ref for t in listed) == sorted(t.ref for t in held)

    request = urllib.request.Request(
        f"{zendesk}/api/tickets/{held[0].ref}/investigations",
        method="POST",
        headers={"Authorization": bearer(staff_user)["HTTP_AUTHORIZATION"]},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 202
    assert held[0].runs.get().request.via == RunRequest.Via.API
    assert _held_metric(zendesk) == 1
    assert supervisors.get("/admin/tickets/ticket/?auto_held=waiting").context["cl"].result_count == 1


def test_the_dollar_cap_counts_the_whole_budget_of_runs_still_going(zendesk, settings):
    settings.AGENT_REQUIRE_APPROVAL = ["search_docs"]  # each run waits for a supervisor: still going
    Account.objects.filter(code="ACME").update(auto_dollars_per_day=Decimal("1.20"))
    assert [_new_ticket(zendesk, n)[0] for n in range(5)] == [201] * 5
    runs = _automatic_runs()
    assert [r.status for r in runs] == [Status.WAITING_APPROVAL] * 2  # $0.50 each; a third makes $1.50
    assert sum(r.cost_used_micros for r in runs) == 0  # nothing spent yet: their budgets are what counts
    held = _held()
    assert len(held) == 3 and all(re.fullmatch(NOTE.format(r"\$1\.20 per day"), t.auto_held_note) for t in held)
    assert _held_metric(zendesk) == 3


def test_an_account_without_caps_follows_the_settings_and_0_starts_none(zendesk, settings):
    settings.AGENT_AUTO_RUNS_PER_HOUR = 1
    assert _new_ticket(zendesk, 0)[0] == _new_ticket(zendesk, 1)[0] == 201
    assert len(_automatic_runs()) == 1 and len(_held()) == 1
    Account.objects.filter(code="ACME").update(auto_runs_per_hour=5, auto_dollars_per_day=Decimal("0"))
    assert _new_ticket(zendesk, 2)[0] == 201
    assert len(_automatic_runs()) == 1
    assert re.fullmatch(NOTE.format(r"\$0\.00 per day"), _held()[-1].auto_held_note)


def test_webhooks_arriving_together_start_no_more_runs_than_the_cap(zendesk):
    Account.objects.filter(code="ACME").update(auto_runs_per_hour=3)
    replies: list[int] = []
    threads = [threading.Thread(target=lambda n=n: replies.append(_new_ticket(zendesk, n)[0])) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert replies == [201] * 6
    assert len(_automatic_runs()) == 3 and len(_held()) == 3
