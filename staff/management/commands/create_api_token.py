from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from engine.roles import integration_user_setup
from staff.auth import token_create


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

    def handle(self, *args, username: str, name: str, integration: bool, **options):
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
        _, raw = token_create(user=user, name=name)
        self.stdout.write(raw)
