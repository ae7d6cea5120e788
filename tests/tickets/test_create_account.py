"""`manage.py create_account`: creates or updates an account by its code; refuses bad input, naming the field,
and writes nothing then."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tickets.models import Account

pytestmark = pytest.mark.django_db


def create_account(*args: str) -> str:
    out = StringIO()
    call_command("create_account", *args, stdout=out)
    return out.getvalue()


def test_creates_an_account_whose_workspace_is_its_name():
    assert (
        create_account("NORTHWIND", "--name", "Northwind Traders") == "account NORTHWIND created: Northwind Traders\n"
    )
    account = Account.objects.get(code="NORTHWIND")
    assert (account.name, account.workspace) == ("Northwind Traders", "Northwind Traders")


def test_a_second_run_updates_the_name_and_keeps_the_workspace():
    create_account("org_4412", "--name", "Initech", "--workspace", "initech-main")
    assert create_account("org_4412", "--name", "  Initech LLC ") == "account org_4412 updated: Initech LLC\n"
    account = Account.objects.get(code="org_4412")
    assert (account.name, account.workspace) == ("Initech LLC", "initech-main")
    assert Account.objects.count() == 1


def test_the_workspace_is_updated_when_given():
    create_account("ACME", "--name", "Acme")
    create_account("ACME", "--name", "Acme", "--workspace", "acme-eu")
    assert Account.objects.get(code="ACME").workspace == "acme-eu"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ACME CORP", "--name", "Acme"], "code: String should match pattern"),
        (["A" * 33, "--name", "Acme"], "code: String should match pattern"),
        ([".ACME", "--name", "Acme"], "code: String should match pattern"),
        (["ACME", "--name", "   "], "name: String should have at least 1 character"),
        (["ACME", "--name", "N" * 201], "name: String should have at most 200 characters"),
        (["ACME", "--name", "Acme\nInc"], "name: Value error, must be one line of text"),
        (["ACME", "--name", "Acme", "--workspace", ""], "workspace: String should have at least 1 character"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_written(args, message):
    with pytest.raises(CommandError, match="account not saved: ") as refused:
        create_account(*args)
    assert message in str(refused.value)
    assert not Account.objects.exists()


def test_the_name_is_required():
    with pytest.raises(CommandError, match="--name"):
        create_account("ACME")


def test_org_ids_and_email_domains_repeated_or_comma_separated_are_set_lower_case():
    out = create_account(
        "ACME",
        "--name",
        "Acme",
        "--org-id",
        "ORG_4412, northwind",
        "--org-id",
        "org_4412",
        "--email-domain",
        "@Acme.example",
        "--email-domain",
        "acme-eu.example,acme.example",
    )
    assert "organization ids: org_4412, northwind; e-mail domains: acme.example, acme-eu.example" in out
    account = Account.objects.get(code="ACME")
    assert (account.org_ids, account.email_domains) == (["org_4412", "northwind"], ["acme.example", "acme-eu.example"])


def test_a_second_run_replaces_only_the_lists_it_is_given():
    create_account("ACME", "--name", "Acme", "--org-id", "org_1", "--email-domain", "acme.example")
    create_account("ACME", "--name", "Acme", "--org-id", "org_2")
    account = Account.objects.get(code="ACME")
    assert (account.org_ids, account.email_domains) == (["org_2"], ["acme.example"])
    create_account("ACME", "--name", "Acme", "--email-domain", "")
    assert Account.objects.get(code="ACME").email_domains == []


def test_the_lists_find_the_account_at_intake():
    from tickets.intake import TicketIn
    from tickets.services import account_for_intake

    create_account("ACME", "--name", "Acme", "--org-id", "Org_4412", "--email-domain", "acme.example")
    ticket = {"source": "zendesk", "external_id": "1", "subject": "s", "body": "b"}
    by_org = TicketIn.model_validate({**ticket, "organization": "ORG_4412", "session": {"ref": "a", "verified": True}})
    by_domain = TicketIn.model_validate(
        {**ticket, "session": {"ref": "a", "verified": True, "email": "dana@ACME.example"}}
    )
    assert account_for_intake(by_org).code == account_for_intake(by_domain).code == "ACME"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--email-domain", "acme"], "email_domains: Value error, 'acme' is not an e-mail domain"),
        (["--email-domain", "acme.example,dana@acme.example"], "'dana@acme.example' is not an e-mail domain"),
        (["--email-domain", "acme..example"], "'acme..example' is not an e-mail domain"),
        (["--org-id", "org 4412"], "org_ids: Value error, 'org 4412' is not an organization id"),
        (["--org-id", "o" * 65], "is not an organization id"),
    ],
)
def test_a_bad_org_id_or_domain_is_refused_by_name_and_nothing_written(args, message):
    with pytest.raises(CommandError, match="account not saved: ") as refused:
        create_account("ACME", "--name", "Acme", *args)
    assert message in str(refused.value)
    assert not Account.objects.exists()
