"""Supervisors edit the budget new runs start with; staff cannot; a bad budget is refused whole."""

import re

import pytest
from django.urls import reverse

from engine.config import default_budget
from engine.models import BudgetDefaults
from engine.services import run_start

URL = "admin:agentrun_budgetdefaults_change"


def form(**values):
    data = {name: "" for name in BudgetDefaults.FIELDS}
    data.update({k: str(v) for k, v in values.items()})
    return data


@pytest.fixture
def defaults_url(supervisor_client):
    response = supervisor_client.get(reverse("admin:agentrun_budgetdefaults_changelist"))
    assert response.status_code == 302
    return response["Location"]


def test_a_supervisor_s_defaults_apply_to_new_runs_not_to_running_ones(demo, supervisor_client, defaults_url):
    from tickets.models import Job, Ticket

    Job.objects.update(sensitive=False)  # no call may need approval: runs get deadline_seconds as it is
    before = run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules")
    response = supervisor_client.post(defaults_url, form(max_tool_attempts=3, deadline_seconds=30))
    assert response.status_code == 302

    after = run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules")
    assert (after.get_budget().max_tool_attempts, after.get_budget().deadline_seconds) == (3, 30.0)
    assert after.get_budget().max_model_requests == 8  # untouched fields keep the default
    before.refresh_from_db()
    assert before.get_budget().max_tool_attempts == 6
    assert BudgetDefaults.objects.get().updated_by == "supervisor"


def test_a_budget_that_cannot_be_used_is_refused_and_nothing_is_saved(demo, supervisor_client, defaults_url):
    response = supervisor_client.post(defaults_url, form(max_tool_attempts=3, operation_timeout_seconds=0))
    assert response.status_code == 200
    assert "operation_timeout_seconds" in response.content.decode()
    assert BudgetDefaults.current_overrides() == {}
    assert default_budget("rules").max_tool_attempts == 6


def test_support_staff_cannot_see_or_edit_budget_defaults(demo, staff_client):
    BudgetDefaults.objects.create(pk=1)
    assert staff_client.get(reverse(URL, args=[1])).status_code == 403
    assert staff_client.post(reverse(URL, args=[1]), form(max_tool_attempts=1)).status_code == 403
    assert BudgetDefaults.current_overrides() == {}


def _shown(page: str, name: str) -> str:
    return re.search(rf'<input [^>]*name="{name}"[^>]*>', page).group(0)


def test_the_form_shows_the_values_in_force(demo, supervisor_client, defaults_url, settings):
    settings.AGENT_BUDGET_DEFAULTS = {"max_tool_attempts": 4}
    BudgetDefaults.objects.filter(pk=1).update(deadline_seconds=60)
    page = supervisor_client.get(defaults_url).content.decode()
    assert 'value="4"' in _shown(page, "max_tool_attempts")  # configuration's
    assert 'value="60.0"' in _shown(page, "deadline_seconds")  # the supervisors'
    assert 'value="8"' in _shown(page, "max_model_requests")  # the contract's
    assert "at least 900 s (AGENT_APPROVAL_DEADLINE_SECONDS)" in page


def test_saving_the_values_shown_overrides_only_what_was_changed(demo, supervisor_client, defaults_url, settings):
    settings.AGENT_BUDGET_DEFAULTS = {"max_tool_attempts": 4}
    shown = {**default_budget("rules").as_dict(), "max_model_requests": 5}
    response = supervisor_client.post(defaults_url, form(**{k: shown[k] for k in BudgetDefaults.FIELDS}))
    assert response.status_code == 302
    assert BudgetDefaults.current_overrides() == {"max_model_requests": 5}
    settings.AGENT_BUDGET_DEFAULTS = {"max_tool_attempts": 2}  # the rest keeps following configuration
    assert default_budget("rules").max_tool_attempts == 2


def test_the_page_shows_the_approval_warning(demo, supervisor_client, defaults_url, settings):
    assert "AGENT_APPROVAL_MIN_SECONDS" not in supervisor_client.get(defaults_url).content.decode()
    settings.AGENT_APPROVAL_DEADLINE_SECONDS = 120
    page = supervisor_client.get(defaults_url).content.decode()
    assert "Calls need approval (jobs marked sensitive), but new runs that may wait for one have 120 s" in page
    assert "Raise AGENT_APPROVAL_DEADLINE_SECONDS" in page
