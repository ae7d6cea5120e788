from django.apps import AppConfig


class StaffConfig(AppConfig):
    name = "staff"

    def ready(self) -> None:
        from staff.access import on_ticket_arrived
        from tickets.signals import ticket_arrived

        ticket_arrived.connect(on_ticket_arrived, dispatch_uid="staff.investigate_new_ticket")
