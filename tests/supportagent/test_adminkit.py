"""Every admin list accepts only the lookups its filters offer and answers any other, or one it cannot run
(a year past 9999, a NUL character, a regular expression), with `?e=1`, never a 500."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import CharField, DateField, TextField
from django.test import Client
from django.urls import reverse

from engine.models import BudgetDefaults
from tests.support.staff import PASSWORD, make_runs
from tickets.models import Ticket


def _queries(model) -> list[str]:
    """For each date field a year below 1 and one past 9999; for the first text field a NUL."""
    fields = model._meta.fields
    dates = [f.name for f in fields if isinstance(f, DateField)]  # DateTimeField is a DateField
    texts = [f.name for f in fields if isinstance(f, CharField | TextField)]
    return (
        [f"{d}__year={year}" for d in dates for year in (0, 10000, 99999999999)]
        + [f"{d}__iso_year=99999999999" for d in dates]
        + [f"{t}=%00" for t in texts[:1]]
    )


@pytest.fixture
def root_client(demo) -> Client:
    make_runs(2)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password=PASSWORD))
    return client


def test_every_admin_list_answers_lookups_it_cannot_run_with_e_1(root_client):
    lists = [model for model in admin.site._registry if model is not BudgetDefaults]  # its list is its one row
    assert len(lists) >= 14
    tried = 0
    for model in lists:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for query in _queries(model):
            response = root_client.get(f"{url}?{query}")
            assert (response.status_code, response.get("Location")) == (302, f"{url}?e=1"), query
            tried += 1
    assert tried > 40


def test_a_date_the_database_can_hold_still_filters(root_client):
    url = reverse("admin:agentrun_run_changelist")
    assert root_client.get(f"{url}?created_at__gte=9999-01-01").status_code == 200
    assert root_client.get(f"{url}?created_at__lt=0001-01-02").status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        "subject__regex=(",
        "status__regex=*",
        "summary__regex=[",
        "subject__iregex=^(a%2B)%2B$",
        "body__contains=x",
        "ref=T-1001",
        "session__user__email__regex=(",
        "account__name__startswith=A",
        "evaluation_copy=1",
    ],
)
def test_a_lookup_no_filter_offers_redirects_with_e_1(root_client, query):
    url = reverse("admin:tickets_ticket_changelist")
    response = root_client.get(f"{url}?{query}")
    assert (response.status_code, response.get("Location")) == (302, f"{url}?e=1")


def test_every_admin_list_refuses_a_regular_expression_on_each_text_field(root_client):
    tried = 0
    for model in [model for model in admin.site._registry if model is not BudgetDefaults]:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for field in model._meta.fields:
            if isinstance(field, CharField | TextField):
                response = root_client.get(f"{url}?{field.name}__regex=(")
                assert (response.status_code, response.get("Location")) == (302, f"{url}?e=1"), (url, field.name)
                tried += 1
    assert tried > 40


def test_the_lookups_the_filters_offer_still_filter(root_client):
    runs, tickets = reverse("admin:agentrun_run_changelist"), reverse("admin:tickets_ticket_changelist")
    for url in (
        f"{runs}?status__exact=completed",
        f"{runs}?purpose=evaluation",
        f"{runs}?q=T-1001",
        f"{runs}?status__in=completed,failed&created_at__gte=2020-01-01&created_at__lt=2100-01-01",
        f"{tickets}?latest_run=never",
        f"{tickets}?pending=yes&o=1",
        f"{tickets}?account__id__exact=1",
        f"{tickets}?account__isnull=False&p=1",
        f"{reverse('admin:auth_user_changelist')}?is_staff__exact=1&groups__id__exact=1",
        f"{reverse('admin:agentrun_approval_changelist')}?state__exact=pending",
    ):
        assert root_client.get(url).status_code == 200, url


@pytest.mark.parametrize("ref", ["T-1001", 'T-<b>&"7"'])
def test_a_rows_checkbox_is_the_one_django_renders(ref):
    ticket_admin = admin.site._registry[Ticket]
    ticket = Ticket(pk=41, ref=ref)
    assert ticket_admin.action_checkbox(ticket) == admin.ModelAdmin.action_checkbox(ticket_admin, ticket)
