"""Evidence re-checked at review time (agentrun/recheck.py), through the API and the admin.

T-1001's investigation cites E1 (job J-42, failed) and E2 (a search citing DOC-EXPORT-7 r3). The
data then changes, and the packet, opened again, says what changed. Every tool in the TOOLS table
is wrapped in a counting one, so the tests see how often a policy or a backend was really called.
"""

import json
import re
import time
from dataclasses import replace

import pytest
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse

from engine.models import EvidenceCheck, PacketReview, ReviewPacket, ToolAttempt
from tests.support.operatorserver import Answer, OperatorServer, demo_jobs, statuspage_summary
from tests.support.staff import bearer, client_for, make_runs
from tickets.models import CustomerSession, DocumentRevision, Evidence, Job
from tickets.selectors import SessionScope
from tickets.services import document_publish, document_retire, evidence_record
from tools.lookups import UNBOUNDED
from tools.registry import TOOLS

pytestmark = pytest.mark.usefixtures("settle")

NEW_EXPORT_TEXT = (
    "CSV export requires the editor role; jobs started by a viewer fail with EXPORT_ROLE_REQUIRED. "
    "Owners can now grant the exporter role instead, under Settings > Members."
)


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str]]:
    """(tool, "policy" | "backend") for every call of the tools' own functions, in order."""
    seen: list[tuple[str, str]] = []
    for name, tool in list(TOOLS.items()):

        def policy(scope, args, _tool=tool, _name=name):
            seen.append((_name, "policy"))
            return _tool.policy(scope, args)

        def backend(scope, args, lookup=UNBOUNDED, _tool=tool, _name=name):
            seen.append((_name, "backend"))
            return _tool.backend(scope, args, lookup)

        monkeypatch.setitem(TOOLS, name, replace(tool, policy=policy, backend=backend))
    return seen


@pytest.fixture
def packet(client, staff_user, ticket_t1001, calls) -> ReviewPacket:
    """T-1001 investigated (E1: J-42, E2: the export documents); the calls it made are forgotten."""
    client.post("/api/tickets/T-1001/investigations", **bearer(staff_user))
    calls.clear()
    packet = ReviewPacket.objects.select_related("run").get()
    assert packet.evidence_refs == ["E1", "E2"]
    return packet


def _checks(client, user, packet) -> dict[str, dict]:
    response = client.get(f"/api/packets/{packet.pk}", **bearer(user))
    assert response.status_code == 200, response.content
    return {c["ref"]: c for c in response.json()["evidence_checks"]}


def _texts(check) -> list[str]:
    return [d["text"] for d in check["differences"]]


def _accept(client, user, packet, **extra):
    body = json.dumps({"decision": "accept", **extra})
    return client.post(f"/api/packets/{packet.pk}/review", body, content_type="application/json", **bearer(user))


def test_evidence_as_it_was_is_unchanged_and_charges_the_run_nothing(client, staff_user, packet, calls):
    attempts, counters = ToolAttempt.objects.count(), (packet.run.tool_attempts, packet.run.model_requests)
    checks = _checks(client, staff_user, packet)
    assert {ref: c["result"] for ref, c in checks.items()} == {"E1": "unchanged", "E2": "unchanged"}
    assert ("read_job_status", "backend") in calls and ("search_docs", "backend") in calls
    packet.run.refresh_from_db()
    assert ToolAttempt.objects.count() == attempts
    assert (packet.run.tool_attempts, packet.run.model_requests) == counters
    stored = EvidenceCheck.objects.order_by("evidence__number")
    assert [(c.evidence.ref, c.result, c.checked_by) for c in stored] == [
        ("E1", "unchanged", staff_user),
        ("E2", "unchanged", staff_user),
    ]


def test_a_job_whose_status_changed_is_flagged_with_the_difference(client, staff_user, packet):
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    checks = _checks(client, staff_user, packet)
    assert checks["E1"]["result"] == "changed"
    assert _texts(checks["E1"])[:2] == ["status: failed → succeeded", "error_code: EXPORT_ROLE_REQUIRED → none"]
    assert checks["E2"]["result"] == "unchanged"
    stored = EvidenceCheck.objects.get(evidence__number=1)
    assert stored.result == "changed" and stored.differences[0]["text"] == "status: failed → succeeded"


def test_a_newer_document_revision_is_flagged_with_a_link(client, staff_user, packet):
    document_publish(code="DOC-EXPORT-7", title="CSV export permissions", body=NEW_EXPORT_TEXT, public=True)
    checks = _checks(client, staff_user, packet)
    assert checks["E2"]["result"] == "changed"
    (difference,) = [d for d in checks["E2"]["differences"] if d["document"] == "DOC-EXPORT-7"]
    assert difference["text"] == "DOC-EXPORT-7: r3 → r4"
    assert difference["link"].startswith("/admin/tickets/document/")


def test_a_deleted_job_is_gone(client, staff_user, packet):
    Job.objects.filter(ref="J-42").delete()
    check = _checks(client, staff_user, packet)["E1"]
    assert check["result"] == "gone" and check["reason"] == "the customer's session may no longer read it"


def test_an_unverified_session_could_not_check_and_reads_nothing(client, staff_user, packet, calls):
    CustomerSession.objects.filter(ref="S-ACME-1").update(verified=False)
    checks = _checks(client, staff_user, packet)
    assert {c["result"] for c in checks.values()} == {"could_not_check"}
    assert checks["E1"]["reason"] == "the customer's session is no longer verified; nothing was read"
    assert calls == []  # neither a policy nor a backend was asked


def test_a_second_open_within_the_reuse_window_calls_no_backend_and_stores_nothing(
    client, staff_user, packet, calls, settings
):
    settings.AGENT_RECHECK_REUSE_SECONDS = 1
    first = _checks(client, staff_user, packet)
    backend_calls = calls.count(("read_job_status", "backend")) + calls.count(("search_docs", "backend"))
    assert backend_calls == 2 and EvidenceCheck.objects.count() == 2
    calls.clear()
    second = _checks(client, staff_user, packet)
    assert calls == [] and EvidenceCheck.objects.count() == 2
    assert all(c["reused"] for c in second.values()) and second["E1"]["checked_at"] == first["E1"]["checked_at"]
    time.sleep(1.2)  # the cached results and the stored ones expire
    third = _checks(client, staff_user, packet)
    assert ("read_job_status", "backend") in calls and EvidenceCheck.objects.count() == 4
    assert not any(c["reused"] for c in third.values())


def test_accepting_changed_evidence_needs_the_acknowledgement_in_the_api(client, staff_user, packet, calls):
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    refused = _accept(client, staff_user, packet)
    assert refused.status_code == 409 and refused.json()["code"] == "evidence_changed"
    assert "E1" in refused.json()["message"]
    assert PacketReview.objects.count() == 0
    calls.clear()
    accepted = _accept(client, staff_user, packet, acknowledge_changed_evidence=True)
    assert accepted.status_code == 201, accepted.content
    assert accepted.json()["acknowledged_changed_evidence"] is True and accepted.json()["changed_evidence"] == ["E1"]
    # the acceptance read every cited item again, though checks a moment old were stored and cached
    assert calls.count(("read_job_status", "backend")) == 1 and calls.count(("search_docs", "backend")) == 1
    review = PacketReview.objects.get()
    assert review.acknowledged_changed_evidence and review.changed_evidence == ["E1"]


def test_accepting_unchanged_evidence_and_rejecting_need_nothing_new(client, staff_user, supervisor_user, packet):
    assert _accept(client, staff_user, packet).status_code == 201
    Job.objects.filter(ref="J-42").delete()
    body = json.dumps(
        {"decision": "reject", "reason": "wrong_conclusion", "note": "J-42 is gone.", "change_decision": True}
    )
    rejected = client.post(
        f"/api/packets/{packet.pk}/review", body, content_type="application/json", **bearer(supervisor_user)
    )
    assert rejected.status_code == 201 and rejected.json()["changed_evidence"] == []
    review = PacketReview.objects.get(decision="accepted")
    assert not review.acknowledged_changed_evidence and review.changed_evidence == []


def test_accepting_gone_evidence_needs_the_checkbox_in_the_admin(staff_user, packet):
    Job.objects.filter(ref="J-42").delete()
    admin = client_for(staff_user)
    page = admin.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert 'id="recheck-E1" data-result="gone"' in page and 'id="acknowledge-changed-evidence"' in page
    assert "Evidence E1 changed or is gone since the packet was written." in page
    url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    refused = admin.post(url, {"decision": "accept"}, follow=True).content.decode()
    assert "acknowledge the changed evidence to accept the packet" in refused
    assert PacketReview.objects.count() == 0
    admin.post(url, {"decision": "accept", "acknowledge_changed_evidence": "on"})
    review = PacketReview.objects.get()
    assert review.decision == "accepted" and review.acknowledged_changed_evidence
    assert review.changed_evidence == ["E1"]


def test_checks_are_listed_read_only_in_the_admin(staff_user, client, packet):
    _checks(client, staff_user, packet)
    admin = client_for(staff_user)
    listing = admin.get(reverse("admin:agentrun_evidencecheck_changelist"))
    assert listing.status_code == 200 and "T-1001 (packet" in listing.content.decode()
    check = EvidenceCheck.objects.first()
    delete = reverse("admin:agentrun_evidencecheck_delete", args=[check.pk])
    assert admin.post(delete, {"post": "yes"}).status_code == 403
    with pytest.raises(ValueError):
        check.save()
    assert EvidenceCheck.objects.count() == 2


# --- the http backend: the same backend, the same timeout discipline ----------------------------


@pytest.fixture
def operator(settings, packet):
    """The job lookups go to the operator's service from here on (the run itself read the database)."""
    server = OperatorServer(jobs=demo_jobs(), summary=statuspage_summary())
    settings.AGENT_JOB_STATUS_BACKEND = "http"
    settings.AGENT_JOB_STATUS_URL = server.job_url
    yield server
    server.close()


def test_a_job_read_over_http_is_compared_and_an_answer_too_late_could_not_check(
    client, staff_user, packet, operator, settings
):
    operator.jobs["J-42"] = {**operator.jobs["J-42"], "status": "running"}
    check = _checks(client, staff_user, packet)["E1"]
    assert check["result"] == "changed" and "status: failed → running" in _texts(check)
    assert operator.received[0].headers["x-account"] == "ACME"
    cache.clear()
    settings.AGENT_RECHECK_TIMEOUT = 0.5
    operator.answers = [Answer(delay_seconds=5)]
    started = time.monotonic()
    check = _checks(client, staff_user, packet)["E1"]
    assert time.monotonic() - started < 3
    assert check["result"] == "could_not_check" and "did not answer in time" in check["reason"]
    calls_before = len(operator.received)
    _checks(client, staff_user, packet)  # a failure to answer is not reused: the next open asks again
    assert len(operator.received) == calls_before + 1


# --- an acceptance re-reads every cited item now, whatever the cache holds ------------------------


def _investigate(client, user) -> ReviewPacket:
    response = client.post("/api/tickets/T-1001/investigations", **bearer(user))
    assert response.status_code == 202, response.content
    return ReviewPacket.objects.get(pk=response.json()["packet_id"])


def test_an_acceptance_within_the_reuse_window_still_sees_a_job_that_changed(client, staff_user, packet):
    """Three packets of T-1001 accepted, J-42 then succeeds, a fourth packet citing it is opened and accepted
    within the minute: its page may reuse the check from a moment ago, the acceptance may not."""
    assert _accept(client, staff_user, packet).status_code == 201
    for _ in range(2):
        assert _accept(client, staff_user, _investigate(client, staff_user)).status_code == 201
    fourth = _investigate(client, staff_user)
    assert fourth.evidence_refs == ["E1", "E2"]
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    opened = _checks(client, staff_user, fourth)
    assert opened["E1"]["reused"] and opened["E1"]["result"] == "unchanged"  # the page may reuse a recent check
    refused = _accept(client, staff_user, fourth)
    assert refused.status_code == 409 and refused.json()["code"] == "evidence_changed", refused.content
    assert "E1" in refused.json()["message"] and not fourth.reviews.exists()
    reopened = _checks(client, staff_user, fourth)  # the acceptance's own re-read is what the page shows now
    assert reopened["E1"]["result"] == "changed" and "status: failed → succeeded" in _texts(reopened["E1"])
    accepted = _accept(client, staff_user, fourth, acknowledge_changed_evidence=True)
    assert accepted.status_code == 201 and accepted.json()["changed_evidence"] == ["E1"]


def test_an_acceptance_in_the_admin_shows_what_changed_and_asks_for_the_acknowledgement(client, staff_user, packet):
    admin = client_for(staff_user)
    page_url = reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])
    assert 'id="acknowledge-changed-evidence"' not in admin.get(page_url).content.decode()  # checked: unchanged
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    review_url = reverse("admin:agentrun_reviewpacket_review", args=[packet.pk])
    refused = admin.post(review_url, {"decision": "accept"}, follow=True)
    page = refused.content.decode()
    assert refused.redirect_chain[-1][0] == page_url and not PacketReview.objects.exists()
    assert "acknowledge the changed evidence to accept the packet" in page
    assert 'id="recheck-E1" data-result="changed"' in page and 'id="acknowledge-changed-evidence"' in page


# --- what changed, inside each evidence card -------------------------------------------------------


def _card(page: str, ref: str) -> str:
    start = page.index(f'id="evidence-{ref}"')
    end = page.find('class="sa-evidence', start)
    return page[start : end if end > 0 else len(page)]


def test_a_changed_job_shows_its_old_and_new_status_in_its_card(staff_user, packet):
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    card = _card(page, "E1")
    assert 'id="changed-E1" data-result="changed"' in card and "Changed since the packet was written" in card
    assert 'status: <span class="old">failed</span> → <span class="new">succeeded</span>' in card
    assert 'id="changed-E2"' not in page  # the unchanged item's card says nothing new


def test_a_new_revision_shows_in_its_card_with_links_to_both_revisions(staff_user, packet):
    document_publish(code="DOC-EXPORT-7", title="CSV export permissions", body=NEW_EXPORT_TEXT, public=True)
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    card = _card(page, "E2")
    revisions = {
        r.label: reverse("admin:tickets_documentrevision_change", args=[r.pk])
        for r in DocumentRevision.objects.filter(document__code="DOC-EXPORT-7")
    }
    assert (
        f'DOC-EXPORT-7: <a class="old" href="{revisions["r3"]}">r3</a> → <a class="new" href="{revisions["r4"]}">r4</a>'
    ) in card


def test_a_retired_document_shows_no_longer_found_in_its_card(staff_user, packet):
    document_retire(code="DOC-EXPORT-7")
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    card = _card(page, "E2")
    assert 'id="changed-E2"' in card
    assert re.search(
        r'DOC-EXPORT-7: <a class="old" href="[^"]+">r3</a> → <span class="new">no longer found</span>', card
    )


def _search_evidence(packet: ReviewPacket, query: str) -> Evidence:
    """Evidence of T-1001 from a search for `query` as the backend answers it now."""
    result = TOOLS["search_docs"].backend(SessionScope.of(packet.run.session), {"query": query, "max_results": 3})
    with transaction.atomic():
        return evidence_record(
            ticket_id=packet.run.ticket_id,
            tool="search_docs",
            args={"query": query, "max_results": 3},
            args_key=query,
            content=json.dumps(result.content, sort_keys=True),
            source_ref=result.source_ref,
            truncated=False,
            run_id=packet.run_id,
        )


def test_a_document_reads_the_same_on_every_packet_whatever_query_cited_it(client, staff_user, packet):
    """E2 found DOC-EXPORT-7 r3 by its error code; another packet's item found it by its title's words. r4 drops
    the error code's words, so only the other query still finds it; both items say r3 → r4, neither says "no
    longer found"."""
    by_title = _search_evidence(packet, "CSV export permissions")
    other = make_runs(1)[0].packet
    ReviewPacket.objects.filter(pk=other.pk).update(evidence_refs=[by_title.ref])
    by_code = json.loads(Evidence.objects.get(ticket=packet.run.ticket, number=2).content)
    assert "DOC-EXPORT-7" in {r["id"] for r in by_code["results"]}
    document_publish(
        code="DOC-EXPORT-7",
        title="CSV download permissions",
        body="Only editors and owners may download CSV files; owners grant this under Settings > Members.",
        public=True,
    )
    scope = SessionScope.of(packet.run.session)
    now_by_code = TOOLS["search_docs"].backend(scope, Evidence.objects.get(ticket=packet.run.ticket, number=2).args)
    assert "DOC-EXPORT-7" not in {r["id"] for r in now_by_code.content["results"]}  # its query no longer finds it
    first, second = _checks(client, staff_user, packet)["E2"], _checks(client, staff_user, other)[by_title.ref]
    assert "DOC-EXPORT-7: r3 → r4" in _texts(first) and "DOC-EXPORT-7: r3 → r4" in _texts(second)
    assert not any("no longer found" in t for t in _texts(first) + _texts(second))
