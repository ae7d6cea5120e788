from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"

    def ready(self) -> None:
        from engine.signals import approval_asked, packet_written
        from integrations.webhooks import TRANSPORTS, Target, on_approval_asked, on_packet_written
        from integrations.zendesknotes import ZENDESK_NOTE
        from integrations.zendesknotes import on_packet_written as note_on_packet_written

        packet_written.connect(on_packet_written, dispatch_uid="integrations.packet_event")
        packet_written.connect(note_on_packet_written, dispatch_uid="integrations.zendesk_note")
        approval_asked.connect(on_approval_asked, dispatch_uid="integrations.approval_event")
        TRANSPORTS[Target.ZENDESK_NOTE] = ZENDESK_NOTE  # the outbox sends notes too (zendesknotes imports webhooks)
