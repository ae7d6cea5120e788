"""Supervisors edit the budget new runs start with; staff cannot; a bad budget is refused whole."""
import pytest
from django.urls import reverse

from agentrun.config import default_budget
from agentrun.models import BudgetDefaults
from agentrun.services import run_start

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
    from tickets.models import Ticket

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
