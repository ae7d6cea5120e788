import os

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from engine.roles import DEMO_USERS, ROLES, demo_users_setup, roles_setup


class Command(BaseCommand):
    help = (
        "Create the groups 'Support staff', 'Supervisors', 'Knowledge editors' and 'Integrations' with their "
        "permissions (idempotent)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--demo-users",
            action="store_true",
            help="also create users staff and supervisor (password: DEMO_PASSWORD or a random one)",
        )

    def handle(self, *args, demo_users: bool, **options):
        roles_setup()
        self.stdout.write("Groups: " + ", ".join(f"{name} ({len(perms)} permissions)" for name, perms in ROLES.items()))
        if demo_users:
            given = os.environ.get("DEMO_PASSWORD", "").strip()
            try:
                password, users = demo_users_setup(password=given or None)
            except ValidationError as exc:
                raise CommandError("DEMO_PASSWORD is too weak: " + " ".join(exc.messages)) from None
            self.stdout.write("Demo logins (password " + ("from DEMO_PASSWORD" if given else f"{password}") + "):")
            for username, role in DEMO_USERS.items():
                self.stdout.write(f"  {username} / {password}  ({role})")
