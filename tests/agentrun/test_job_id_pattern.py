"""AGENT_JOB_ID_PATTERN: the operator's job ids, in the schema, the offered description and the rules (issue 40)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from engine.decisions import Call, NormalizedCall, normalize_call
from providers.context import Context
from providers.rules import Investigation
from providers.tooldefs import tool_definitions
from tests.support.commands import manage_check
from tools.read_job_status import job_ids_in

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SHAPES = [
    # pattern, an id as a ticket writes it, the id looked up, an id of another shape
    ("exp_[0-9a-f]{6}", "EXP_5F2C9A", "exp_5f2c9a", "J-42"),
    ("[0-9]{4,6}", "7310", "7310", "J-42"),
    (UUID, "3F2B8C1E-9A4D-4E6F-8B7A-0C1D2E3F4A5B", "3f2b8c1e-9a4d-4e6f-8b7a-0c1d2e3f4a5b", "exp_5f2c9a"),
]


def normalized_job_id(job_id: str) -> str | None:
    result = normalize_call(Call("read_job_status", {"job_id": job_id}))
    return result.args["job_id"] if isinstance(result, NormalizedCall) else None


@pytest.mark.parametrize("pattern, written, canonical, other", SHAPES)
def test_the_argument_takes_the_operators_shape_and_no_other(pattern, written, canonical, other):
    with override_settings(AGENT_JOB_ID_PATTERN=pattern):
        assert normalized_job_id(written) == canonical
        assert normalized_job_id(f" {canonical} ") == canonical
        assert normalized_job_id(other) is None
        assert normalized_job_id(canonical + "z") is None  # the whole id matches, not a part of it


@pytest.mark.parametrize("pattern, written, canonical, other", SHAPES)
def test_the_model_is_offered_the_pattern(pattern, written, canonical, other):
    with override_settings(AGENT_JOB_ID_PATTERN=pattern):
        (jobs,) = [d for d in tool_definitions() if d.name == "read_job_status"]
        job_id = jobs.parameters["properties"]["job_id"]
        assert job_id["pattern"] == f"^(?:{pattern})$"
        assert pattern in job_id["description"]


@pytest.mark.parametrize("pattern, written, canonical, other", SHAPES)
def test_the_rules_read_the_operators_ids_from_the_ticket(pattern, written, canonical, other):
    body = f"Our export {written} failed (ref {other}); also see {written.lower()}. Thanks, ticket 20261206x."
    with override_settings(AGENT_JOB_ID_PATTERN=pattern):
        assert job_ids_in(body) == [canonical]
        decision = Investigation(Context("T-9", "Export failed", body, True)).next_decision()
        assert decision == {"call": {"tool": "read_job_status", "args": {"job_id": canonical}}}
        assert isinstance(normalize_call(Call("read_job_status", decision["call"]["args"])), NormalizedCall)


def test_the_default_is_the_demos_shape():
    assert normalized_job_id("j-42") == "J-42"
    assert normalized_job_id("exp_5f2c9a") is None
    assert job_ids_in("J-42 failed, then j-43; not XJ-44 nor J-45b") == ["J-42", "J-43"]


@pytest.mark.parametrize("value", ["exp_[0-9a-f", "[0-9]*"])
def test_a_bad_pattern_stops_the_process_with_the_reason(value):
    done = manage_check(AGENT_JOB_ID_PATTERN=value)
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and "AGENT_JOB_ID_PATTERN" in done.stderr


def test_a_good_pattern_starts():
    assert manage_check(AGENT_JOB_ID_PATTERN=UUID).returncode == 0
