from django.core.management.base import BaseCommand, CommandError

from tickets.accounts import ACCOUNT_CODE, AccountRefused, account_input, account_save


class Command(BaseCommand):
    help = (
        "Create a customer account, or update its name if the code exists. Tickets name their account by "
        f"this code (letters, digits, '.', '_' and '-', up to 32; pattern {ACCOUNT_CODE})."
    )

    def add_arguments(self, parser):
        parser.add_argument("code", help="the code tickets name, e.g. ACME")
        parser.add_argument("--name", required=True, help="the customer's name, e.g. 'Acme Corporation'")
        parser.add_argument("--workspace", help="the account's current workspace name (a new account: its name)")
        parser.add_argument(
            "--org-id",
            action="append",
            dest="org_ids",
            metavar="ID",
            help="the help desk's organization external id that is this account (repeat, or separate with commas); "
            "given, these replace the account's list",
        )
        parser.add_argument(
            "--email-domain",
            action="append",
            dest="email_domains",
            metavar="DOMAIN",
            help="a requester's e-mail domain that is this account, e.g. acme.example (repeat, or separate with "
            "commas); given, these replace the account's list",
        )

    def handle(self, *args, code, name, workspace, org_ids, email_domains, **options):
        given = {"org_ids": _items(org_ids), "email_domains": _items(email_domains)}
        try:
            saved = account_save(data=account_input(code=code, name=name, workspace=workspace, **given))
        except AccountRefused as exc:
            raise CommandError(f"account not saved: {exc}") from None
        done = "created" if saved.created else "updated"
        self.stdout.write(f"account {saved.account.code} {done}: {saved.account.name}")
        account = saved.account
        if org_ids is not None or email_domains is not None:
            self.stdout.write(
                f"  organization ids: {', '.join(account.org_ids) or 'none'}; "
                f"e-mail domains: {', '.join(account.email_domains) or 'none'}"
            )


def _items(values: list[str] | None) -> list[str] | None:
    """Repeated or comma-separated values, blanks dropped; None when the option was not given."""
    if values is None:
        return None
    return [item.strip() for value in values for item in value.split(",") if item.strip()]
