import json

from django.core.management.base import BaseCommand

from integrations.webhooks import webhook_deliver, webhooks_due


class Command(BaseCommand):
    help = (
        "One attempt at every packet event that is due and that no sender holds: what a process that exited"
        " or a broker that was down left pending. Safe to run from cron."
    )

    def handle(self, *args, **options):
        tried = webhooks_due()
        for event_id in tried:
            webhook_deliver(event_id=event_id)
        self.stdout.write(json.dumps({"tried": tried}))
