"""What every admin list in the project shares."""
from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters


class ListLookupsAdmin(admin.ModelAdmin):
    """A list page answers a lookup it cannot run as the admin answers any other wrong lookup (`?e=1`).

    The admin lets a query string filter a list by any of the model's own fields, and
    some values fail only once the query runs: a year outside 1-9999
    (`?created_at__year=0`) raises ValueError or OverflowError in Django's date bounds,
    and PostgreSQL refuses text with a NUL character. Either was a 500.
    """

    def get_changelist_instance(self, request):
        if any("\x00" in value for _, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("A NUL character in the query string.")
        try:
            return super().get_changelist_instance(request)
        except (ValueError, OverflowError) as exc:
            raise IncorrectLookupParameters(exc) from exc
