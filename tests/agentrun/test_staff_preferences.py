"""Times on staff pages: one format, labelled with its zone, in each viewer's own time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from engine.models import StaffPreference, default_time_zone, validate_time_zone
from engine.selectors import staff_time_zone
from supportagent.settings import env_time_zone
from tests.support.staff import client_for, make_runs

FAILED_AT = datetime(2026, 9, 14, 10, 2, tzinfo=UTC)


def _render(value) -> str:
    return Template("{% load staff_format %}{{ value|when }}").render(Context({"value": value}))


@pytest.mark.parametrize(
    "zone,shown",
    [
        ("UTC", "2026-09-14 10:02:00 UTC"),
        ("Europe/Berlin", "2026-09-14 12:02:00 CEST"),
        ("America/New_York", "2026-09-14 06:02:00 EDT"),
        ("Asia/Kolkata", "2026-09-14 15:32:00 IST"),
    ],
)
def test_a_time_is_shown_in_the_active_zone_and_labelled_with_it(zone, shown):
    with timezone.override(zone):
        assert _render(FAILED_AT) == shown


def test_no_time_is_a_dash():
    assert _render(None) == "—"


@pytest.mark.parametrize("zone", ["Mars/Olympus", "berlin", "", "UTC+2"])
def test_only_real_zone_names_are_accepted(zone):
    with pytest.raises(ValidationError):
        validate_time_zone(zone)


def test_without_a_preference_times_are_in_the_time_zone_setting(staff_user, settings):
    settings.TIME_ZONE = "Europe/Paris"
    assert staff_time_zone(user_id=staff_user.pk) == "Europe/Paris"


@pytest.mark.parametrize(
    "raw,zone", [("", "UTC"), ("Europe/Berlin", "Europe/Berlin"), (" Asia/Kolkata ", "Asia/Kolkata")]
)
def test_the_time_zone_setting_is_read_from_the_environment(monkeypatch, raw, zone):
    monkeypatch.setenv("DJANGO_TIME_ZONE", raw)
    assert env_time_zone("DJANGO_TIME_ZONE") == zone


@pytest.mark.parametrize("raw", ["Mars/Olympus", "utc", "Europe", "../etc/passwd", "zone.tab"])
def test_a_time_zone_zoneinfo_does_not_know_stops_the_process_with_its_name(monkeypatch, raw):
    monkeypatch.setenv("DJANGO_TIME_ZONE", raw)
    with pytest.raises(ImproperlyConfigured, match="DJANGO_TIME_ZONE"):
        env_time_zone("DJANGO_TIME_ZONE")


def test_a_new_preference_starts_at_the_time_zone_setting(staff_user, settings):
    settings.TIME_ZONE = "America/New_York"
    assert default_time_zone() == "America/New_York"
    assert StaffPreference.objects.create(user=staff_user).time_zone == "America/New_York"


def test_each_viewer_sees_the_packet_in_their_own_zone(staff_user, supervisor_user, demo):
    StaffPreference.objects.create(user=supervisor_user, time_zone="Asia/Tokyo")
    packet = make_runs(1)[0].packet
    url = reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])
    written = packet.created_at
    staff_page = client_for(staff_user).get(url).content.decode()
    tokyo_page = client_for(supervisor_user).get(url).content.decode()
    assert timezone.localtime(written, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") in staff_page
    with timezone.override("Asia/Tokyo"):
        assert timezone.localtime(written).strftime("%Y-%m-%d %H:%M:%S JST") in tokyo_page
    assert " UTC" not in tokyo_page.split('id="packet"')[1].split("The customer wrote")[0]


def test_a_user_sets_their_zone_in_the_admin_and_pages_follow(staff_user, demo):
    client = client_for(staff_user)
    change = client.get(reverse("admin:agentrun_staffpreference_changelist"), follow=True)
    assert change.status_code == 200 and 'name="time_zone"' in change.content.decode()
    row = StaffPreference.objects.get(user=staff_user)
    url = reverse("admin:agentrun_staffpreference_change", args=[row.pk])
    refused = client.post(url, {"time_zone": "Mars/Olympus"})
    assert refused.status_code == 200 and StaffPreference.objects.get(pk=row.pk).time_zone == "UTC"
    client.post(url, {"time_zone": "America/New_York"})
    assert StaffPreference.objects.get(pk=row.pk).time_zone == "America/New_York"
    packet = make_runs(1)[0].packet
    page = client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert " EDT" in page or " EST" in page


def test_nobody_sees_or_edits_anothers_preferences(staff_user, supervisor_user, demo):
    theirs = StaffPreference.objects.create(user=supervisor_user, time_zone="Asia/Tokyo")
    client = client_for(staff_user)
    url = reverse("admin:agentrun_staffpreference_change", args=[theirs.pk])
    client.post(url, {"time_zone": "UTC"})
    assert StaffPreference.objects.get(pk=theirs.pk).time_zone == "Asia/Tokyo"
    assert client.get(url).status_code in (302, 404)
