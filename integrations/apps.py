from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"

    def ready(self) -> None:
        from engine.signals import approval_asked, packet_written
        from integrations.webhooks import on_approval_asked, on_packet_written

        packet_written.connect(on_packet_written, dispatch_uid="integrations.packet_event")
        approval_asked.connect(on_approval_asked, dispatch_uid="integrations.approval_event")
