"""What every admin in the project shares."""
from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied


class StaffSiteAdmin(admin.ModelAdmin):
    """Django's ModelAdmin, with two of its answers made safe.

    A list answers a lookup it cannot run as the admin answers any other wrong
    lookup (`?e=1`). The admin lets a query string filter a list by any of the
    model's own fields, and some values fail only once the query runs: a year
    outside 1-9999 (`?created_at__year=0`) raises ValueError or OverflowError in
    Django's date bounds, and PostgreSQL refuses text with a NUL character.

    An object's history checks permission before it looks the object up, so that
    a user who may not see the model gets the same 403 whether the object exists
    or not (Django looks first, and says "doesn't exist" for a missing one).
    """

    def get_changelist_instance(self, request):
        if any("\x00" in value for _, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("A NUL character in the query string.")
        try:
            return super().get_changelist_instance(request)
        except (ValueError, OverflowError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def history_view(self, request, object_id, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return super().history_view(request, object_id, extra_context)


def admin_site_harden(site: admin.AdminSite) -> None:
    """Give every ModelAdmin registered on `site` so far StaffSiteAdmin's answers.

    For the admins that come with Django (users, groups) and django-axes (login
    attempts); call it after every app's admin module has registered its own.
    """
    for model, model_admin in list(site._registry.items()):
        if not isinstance(model_admin, StaffSiteAdmin):
            cls = type(model_admin)
            site.unregister(model)
            site.register(model, type(cls.__name__, (StaffSiteAdmin, cls), {"__module__": __name__}))
