"""Bad configuration stops a process with the setting named; bad command arguments get a clear error and change nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from engine.models import Run
from tests.support.commands import manage_check
from tickets.models import Job, Ticket


def test_a_misspelt_tool_in_require_approval_stops_the_process():
    # Ignored, it would switch the approval gate of read_job_status off.
    done = manage_check(AGENT_REQUIRE_APPROVAL="read_job_statuss")
    assert done.returncode != 0
    assert "AGENT_REQUIRE_APPROVAL names no such tool: read_job_statuss" in done.stderr


def test_require_approval_with_real_tools_starts():
    assert manage_check(AGENT_REQUIRE_APPROVAL="read_job_status, search_docs").returncode == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
def test_a_duration_setting_must_be_a_finite_positive_number(value):
    done = manage_check(AGENT_WATCHDOG_INTERVAL=value)
    assert done.returncode != 0 and "AGENT_WATCHDOG_INTERVAL must be" in done.stderr


@pytest.mark.parametrize(
    "name, value",
    [
        ("AGENT_OPENAI_OUTPUT_CAP_FIELD", "max_output_tokens"),
        ("AGENT_OPENAI_PARALLEL_TOOL_CALLS", "no"),
        ("AGENT_OPENAI_TOOL_CHOICE", "auto"),
        ("AGENT_LOG_PROMPTS", "full"),
    ],
)
def test_a_choice_setting_outside_its_choices_stops_the_process(name, value):
    done = manage_check(**{name: value})
    assert done.returncode != 0
    assert f"{name} must be one of" in done.stderr and repr(value) in done.stderr


def test_choice_settings_read_case_insensitively():
    assert (
        manage_check(
            AGENT_OPENAI_OUTPUT_CAP_FIELD="MAX_TOKENS",
            AGENT_OPENAI_PARALLEL_TOOL_CALLS="Omit",
            AGENT_LOG_PROMPTS="Redacted",
        ).returncode
        == 0
    )


def test_investigate_refuses_a_ticket_whose_run_is_still_going(demo_committed):
    ticket = Ticket.objects.get(ref="T-1001")
    call_command("investigate", "T-1001", "--json", stdout=StringIO())
    Run.objects.filter(ticket=ticket).update(status="WAITING_APPROVAL")
    for args in ((), ("--enqueue",)):
        with pytest.raises(CommandError, match="is still WAITING_APPROVAL"):
            call_command("investigate", "T-1001", *args, stdout=StringIO())
    assert Run.objects.filter(ticket=ticket).count() == 1


def test_investigate_is_not_held_up_by_a_run_waiting_past_its_deadline(demo_committed):
    ticket = Ticket.objects.get(ref="T-1001")
    Job.objects.filter(ref="J-42").update(sensitive=True)
    call_command("investigate", "T-1001", stdout=StringIO())
    waiting = Run.objects.get(ticket=ticket)
    assert waiting.status == "WAITING_APPROVAL"
    Run.objects.filter(pk=waiting.pk).update(deadline_at=waiting.created_at)
    call_command("investigate", "T-1001", stdout=StringIO())
    assert Run.objects.filter(ticket=ticket).count() == 2
    assert Run.objects.get(pk=waiting.pk).status == "DEADLINE"


def test_the_replay_model_only_plays_scenario_files(demo_committed):
    with pytest.raises(CommandError, match="only plays scenario files"):
        call_command("investigate", "T-1001", "--model", "replay", stdout=StringIO())
    assert not Run.objects.exists()


@pytest.mark.parametrize("wait", ["inf", "nan", "-1", "3601"])
def test_show_run_refuses_a_wait_that_is_not_a_bounded_number_of_seconds(demo_committed, wait):
    with pytest.raises(CommandError, match="--wait must be"):
        call_command("show_run", "1", "--wait", wait, stdout=StringIO())


def test_run_scenario_refuses_a_file_that_is_not_utf8(demo_committed, tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(CommandError, match="not UTF-8"):
        call_command("run_scenario", str(path))
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("AGENT_METRICS_ALLOWED", "10.0.0.0/8, intranet", "AGENT_METRICS_ALLOWED must list IP addresses or networks"),
        ("AGENT_METRICS_PORT", "70000", "AGENT_METRICS_PORT must be a port number"),
        ("AGENT_METRICS_PORT", "metrics", "AGENT_METRICS_PORT must be a port number"),
        ("AGENT_METRICS_TOKEN", "short", "AGENT_METRICS_TOKEN must be at least 24"),
        ("AGENT_LOG_FORMAT", "xml", "AGENT_LOG_FORMAT must be one of plain, json"),
    ],
)
def test_a_bad_monitoring_setting_stops_the_process(name, value, message):
    done = manage_check(**{name: value})
    assert done.returncode != 0 and message in done.stderr


def test_monitoring_settings_that_fit_start():
    assert (
        manage_check(
            AGENT_METRICS_ALLOWED="10.0.0.0/8, ::1, 192.168.1.7",
            AGENT_METRICS_PORT="9101",
            AGENT_METRICS_TOKEN="t" * 8 + "0123456789abcdef",
            AGENT_LOG_FORMAT="JSON",
        ).returncode
        == 0
    )
