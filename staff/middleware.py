"""Staff pages show times in the viewer's own time zone (their StaffPreference, else TIME_ZONE)."""

from __future__ import annotations

from django.utils import timezone

from engine.selectors import staff_time_zone

SESSION_KEY = "staff_time_zone"


class StaffTimeZoneMiddleware:
    """Activates the signed-in user's time zone for the request.

    The zone is kept in the session after the first read, so a page costs no query for
    it; saving one's preference in the admin updates the session (staff.admin.preferences).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        zone = time_zone_of(request)
        if zone:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def time_zone_of(request) -> str | None:
    session, user = getattr(request, "session", None), getattr(request, "user", None)
    if session is None or user is None or not user.is_authenticated:
        return None
    zone = session.get(SESSION_KEY)
    if zone is None:
        zone = session[SESSION_KEY] = staff_time_zone(user_id=user.pk)
    return zone
