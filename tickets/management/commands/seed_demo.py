from django.core.management.base import BaseCommand

from tickets.demo import seed_demo


class Command(BaseCommand):
    help = (
        "Load the demo data set (accounts, sessions, jobs, documents, services, tickets T-1001 to T-1007). Idempotent."
    )

    def handle(self, *args, **options):
        seed_demo()
        self.stdout.write("demo data loaded: accounts ACME and GLOBEX, tickets T-1001 to T-1007")
