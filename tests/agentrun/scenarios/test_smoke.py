"""A few whole runs through `run_scenario`'s path, one per kind of ending."""

from engine.models import ReviewPacket, Run

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}


def test_happy_path_completes_with_cited_evidence(play):
    draft = {"draft": {"summary": "  Role problem.  ", "evidence": ["E2", "E1", "E2"], "open_questions": []}}
    report = play([J42, DOCS, draft])
    assert report["status"] == "COMPLETED"
    assert report["packet"]["summary"] == "Role problem."
    assert report["packet"]["evidence"] == ["E2", "E1"]
    assert report["evidence"] == ["E1", "E2"]
    assert report["tokens"] == {"reserved": 0, "used": 3 * 550}


def test_every_terminal_run_has_exactly_one_packet(play):
    for model in ([J42, {"handoff": "needs a human"}], [{"raw": "?"}] * 9, [{"error": "500"}]):
        report = play(model)
        run = Run.objects.get(pk=report["run"])
        assert ReviewPacket.objects.filter(run=run).count() == 1
        assert report["packet"]["stop_reason"] == report["status"]


def test_investigation_start_runs_inline_without_a_broker(ticket_t1001):
    from engine.services import investigation_start

    run = investigation_start(ticket=ticket_t1001)
    run.refresh_from_db()
    assert run.status == "COMPLETED"
    assert run.packet.evidence_refs == ["E1", "E2"]
