import re

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from engine.roles import integration_user_setup
from staff.auth import token_create
from tickets.intake import SOURCE


class Command(BaseCommand):
    help = "Create an API token for USER and print it (only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="a label to recognise the token by")
        parser.add_argument(
            "--integration",
            action="store_true",
            help="USER is a help desk integration: made when missing, in the Integrations group "
            "(may create and update tickets and documents, nothing else)",
        )
        parser.add_argument(
            "--source",
            default="",
            help="the help desk the token sends tickets for, as tickets name it (e.g. zendesk); required with "
            "--integration: POST /api/tickets refuses a ticket of any other source",
        )

    def handle(self, *args, username: str, name: str, integration: bool, source: str, **options):
        if integration and not source:
            raise CommandError("--integration needs --source: the help desk this token sends tickets for, e.g. zendesk")
        if source and not re.fullmatch(SOURCE, source):
            raise CommandError(f"--source {source!r} is not a source: lower-case letters, digits and '-', up to 32")
        if integration:
            try:
                integration_user_setup(username=username)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is not active")
        _, raw = token_create(user=user, name=name, source=source)
        self.stdout.write(raw)
