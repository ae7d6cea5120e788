from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_delete, post_save


class TicketsConfig(AppConfig):
    name = "tickets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tickets.models import SearchSynonym
        from tickets.search import sqlite_functions_add, synonyms_forget

        connection_created.connect(sqlite_functions_add, dispatch_uid="tickets.sqlite_functions")
        post_save.connect(synonyms_forget, sender=SearchSynonym, dispatch_uid="tickets.synonyms_saved")
        post_delete.connect(synonyms_forget, sender=SearchSynonym, dispatch_uid="tickets.synonyms_deleted")
