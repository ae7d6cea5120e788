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
