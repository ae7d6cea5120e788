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

    def handle(self, *args, code, name, workspace, **options):
        try:
            saved = account_save(data=account_input(code=code, name=name, workspace=workspace))
        except AccountRefused as exc:
            raise CommandError(f"account not saved: {exc}") from None
        done = "created" if saved.created else "updated"
        self.stdout.write(f"account {saved.account.code} {done}: {saved.account.name}")
