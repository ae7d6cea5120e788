"""What the admins share: read-only admins and inlines, POST-only buttons, object ids, the links between pages."""

from __future__ import annotations

from django.http import HttpResponseRedirect
from django.urls import reverse

from engine.models import ReviewPacket, Run
from engine.timeline import stop_explanation
from kit.adminkit import StaffSiteAdmin


class ReadOnly:
    """Nothing added, changed or deleted: for model admins and inlines that only show."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnly, StaffSiteAdmin):
    pass


def post_only(view, page):
    """`view` answers POST only; anything else (a link followed, a page reloaded, a bookmark) is sent to the page
    of the object the action is for, `page(**kwargs)`, where the action's button is."""

    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return HttpResponseRedirect(page(**kwargs))
        return view(request, *args, **kwargs)

    return wrapped


def object_pk(object_id: str) -> int:
    """The admin URL's object id as a primary key; one that is not a number names no object (0).

    The access_* check then refuses a user without permission before it looks anything up.
    """
    return int(object_id) if str(object_id).isdigit() else 0


def run_url(run_id: int) -> str:
    return reverse("admin:agentrun_run_change", args=[run_id])


def packet_url(packet_id: int) -> str:
    return reverse("admin:agentrun_reviewpacket_change", args=[packet_id])


def run_explanation(run: Run, packet: ReviewPacket | None) -> str:
    """The stop reason in words; a refused proposal's own reason (shown beside it) replaces the run's note."""
    note = "" if packet is not None and packet.refused else run.stop_note
    return stop_explanation(run.status, run.detail, note, model_name=run.model_name)
