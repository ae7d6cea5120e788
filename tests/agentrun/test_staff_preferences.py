"""Times on staff pages: one format, labelled with its zone, in each viewer's own time zone."""

from __future__ import annotations

import re
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


# --- UTC times inside text (summaries, open questions, evidence) are shown in the viewer's zone too ---------


def _local(text: str, zone: str) -> str:
    with timezone.override(zone):
        return Template("{% load staff_format %}{{ text|local_times }}").render(Context({"text": text}))


@pytest.mark.parametrize(
    "stored,zone,shown",
    [
        ("2026-09-14T10:02:00Z", "Europe/Berlin", "2026-09-14 12:02:00 CEST"),
        ("2026-09-14T10:02:00Z", "America/New_York", "2026-09-14 06:02:00 EDT"),
        ("2026-09-14 10:02:00+00:00", "Asia/Kolkata", "2026-09-14 15:32:00 IST"),
        ("2026-09-14T12:02+02:00", "UTC", "2026-09-14 10:02:00 UTC"),
        ("2026-01-14T10:02:00.250Z", "Europe/Berlin", "2026-01-14 11:02:00 CET"),
        ("2026-09-14T23:30:00Z", "Asia/Tokyo", "2026-09-15 08:30:00 JST"),
    ],
)
def test_a_stored_iso_time_in_text_is_shown_in_the_viewers_zone_with_its_label(stored, zone, shown):
    html = _local(f"J-42 failed at {stored} [E1].", zone)
    assert html.startswith("J-42 failed at <time datetime=") and html.endswith("</time> [E1].")
    assert f">{shown}</time>" in html and f'title="stored as {stored}"' in html


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-14T10:02:00",  # no offset: not a moment, left as written
        "2026-13-45T10:02:00Z",  # not a date
        "J-2026-09-14T10:02:00Z7",  # inside a word
        "on 2026-09-14, at 10:02",
    ],
)
def test_text_that_is_not_a_moment_is_left_as_written(text):
    assert _local(text, "Europe/Berlin") == text


def test_the_text_around_a_time_is_still_escaped():
    html = _local("<script>x</script> at 2026-09-14T10:02:00Z & more", "UTC")
    assert html.startswith("&lt;script&gt;x&lt;/script&gt; at <time ") and html.endswith("</time> &amp; more")


def test_a_packet_shows_every_time_in_the_readers_zone_and_keeps_what_it_stored(supervisor_user, ticket_t1001):
    """The rules' packet for T-1001 says J-42 failed at 2026-09-14T10:02:00Z, in its summary, an open question
    and the job's evidence; a reader in Berlin reads 12:02 CEST in each, and the stored text is unchanged."""
    from io import StringIO

    from django.core.management import call_command

    from engine.models import ReviewPacket

    call_command("investigate", "T-1001", stdout=StringIO())
    packet = ReviewPacket.objects.get()
    stored = (packet.summary, list(packet.open_questions))
    assert "2026-09-14T10:02:00Z" in packet.summary and any("2026-09-14T10:02:00Z" in q for q in packet.open_questions)
    StaffPreference.objects.create(user=supervisor_user, time_zone="Europe/Berlin")
    page = client_for(supervisor_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk]))
    html = page.content.decode()
    words = re.sub(r"<[^>]+>", "", html)  # what a reader reads, without the tags' attributes
    assert "2026-09-14T10:02:00Z" not in words and "10:02:00 UTC" not in words
    for part, end in (
        ('id="summary"', "</p>"),
        ('id="open-questions"', "</ul>"),
        ('id="evidence-E1"', 'id="evidence-E2"'),
    ):
        section = html[html.index(part) :]
        assert ">2026-09-14 12:02:00 CEST</time>" in section[: section.index(end)], part
    again = ReviewPacket.objects.get(pk=packet.pk)  # the page changed nothing stored
    assert (again.summary, list(again.open_questions)) == stored


# --- the zone picker ---------------------------------------------------------------------------------------


def test_the_zone_picker_offers_places_with_the_common_ones_first(staff_user, demo):
    from staff.admin.preferences import zone_choices

    (common_label, common), (every_label, every) = zone_choices()
    assert (common_label, every_label) == ("Common zones", "Every zone")
    assert [z for z, _ in common][:5] == [
        "UTC",
        "America/Los_Angeles",
        "America/Denver",
        "America/Chicago",
        "America/New_York",
    ]
    names = {z for z, _ in every}
    assert {"Europe/Berlin", "America/Argentina/Buenos_Aires", "Asia/Kathmandu", "UTC"} <= names
    for not_a_place in ("Factory", "localtime", "posixrules", "Etc/GMT+5", "US/Eastern", "EST5EDT", "Japan", "GMT0"):
        assert not_a_place not in names and not_a_place not in {z for z, _ in common}
    assert 350 < len(names) < 500  # not the ~600 names zoneinfo knows
    labels = dict(every)
    assert labels["Asia/Kathmandu"] == "Asia/Kathmandu (UTC+05:45)"
    assert re.fullmatch(r"America/New York \(UTC-0[45]:00, E[DS]T\)", labels["America/New_York"])


def test_the_zone_picker_refuses_a_non_zone_and_keeps_a_zone_already_chosen(staff_user, demo):
    row = StaffPreference.objects.create(user=staff_user, time_zone="US/Eastern")  # an alias, chosen before
    client = client_for(staff_user)
    url = reverse("admin:agentrun_staffpreference_change", args=[row.pk])
    page = client.get(url).content.decode()
    assert 'id="zone-search"' in page and '<option value="US/Eastern" selected>' in page
    assert '<option value="Factory"' not in page and '<option value="localtime"' not in page
    for refused in ("Factory", "localtime", "Mars/Olympus"):
        response = client.post(url, {"time_zone": refused})
        assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert StaffPreference.objects.get(pk=row.pk).time_zone == "US/Eastern"
    client.post(url, {"time_zone": "Asia/Kathmandu"})
    assert StaffPreference.objects.get(pk=row.pk).time_zone == "Asia/Kathmandu"


# --- calls and codes break at sensible places ----------------------------------------------------------------


def test_calls_and_codes_may_break_only_after_separators():
    from staff.templatetags.staff_format import breakable_html, call_html

    assert breakable_html("read_job_status") == "read_<wbr>job_<wbr>status"
    assert (
        breakable_html("EXPORT_ROLE_REQUIRED, J-42")
        == 'EXPORT_<wbr>ROLE_<wbr>REQUIRED, <span class="sa-nobr">J-42</span>'
    )
    assert (
        breakable_html("help.example.com/a?b=1&c=<x>")
        == "help.<wbr>example.<wbr>com/<wbr>a?<wbr>b=<wbr>1&amp;<wbr>c=<wbr>&lt;x&gt;"
    )
    assert breakable_html("3.5 _") == "3.5 _"  # a number's dot, and a separator with nothing after it
    assert call_html("read_job_status", {"job_id": "J-42"}) == (
        '<code class="sa-call">read_<wbr>job_<wbr>status {&quot;job_<wbr>id&quot;: '
        '<span class="sa-nobr">&quot;J-42&quot;}</span></code>'
    )


def test_the_queue_shows_a_summarys_time_in_the_readers_zone(supervisor_user, demo):
    from engine.models import ReviewPacket

    packet = make_runs(1)[0].packet
    ReviewPacket.objects.filter(pk=packet.pk).update(summary="Job J-42 failed at 2026-09-14T10:02:00Z [E1].")
    StaffPreference.objects.create(user=supervisor_user, time_zone="Europe/Berlin")
    page = client_for(supervisor_user).get(reverse("admin:agentrun_reviewpacket_changelist")).content.decode()
    cell = page[page.index('class="field-summary_line"') :]
    assert cell[: cell.index("</td>")].endswith(">Job J-42 failed at 2026-09-14 12:02:00 CEST [E1].")
    assert "10:02:00Z" not in page
