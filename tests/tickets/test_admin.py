"""Tickets in the admin: the latest run in the list, the Investigate button and bulk action, the progress page."""

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from engine.models import Run, RunRequest
from engine.roles import KNOWLEDGE_EDITORS
from tests.support.staff import client_for, make_runs
from tickets.models import Account, CustomerSession, Document, DocumentRevision, Ticket
from tickets.services import document_publish


def test_ticket_list_shows_the_latest_run_status_and_packet_state(staff_client, demo):
    make_runs(2, endings=[("NEEDS_HELP", ""), ("COMPLETED", "")])  # the first is the newest
    page = staff_client.get(reverse("admin:tickets_ticket_changelist")).content.decode()
    assert "T-1001" in page and "NEEDS_HELP" in page and "pending" in page


def test_investigate_button_starts_a_run_and_lands_on_its_progress_page(staff_user, ticket_t1001):
    client = client_for(staff_user)
    page = client.get(reverse("admin:tickets_ticket_change", args=[ticket_t1001.pk])).content.decode()
    assert 'id="investigate"' in page
    response = client.post(reverse("admin:tickets_ticket_investigate", args=[ticket_t1001.pk]))
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:agentrun_run_progress", args=[run.pk])
    assert RunRequest.objects.get(run=run).requested_by == staff_user
    progress = client.get(response["Location"]).content.decode()
    assert 'data-status="COMPLETED"' in progress
    assert "3 of 8" in progress and "2 of 6" in progress  # model requests and tool attempts against limits
    assert 'http-equiv="refresh"' not in progress  # an ended run stops refreshing
    assert "Open the review packet" in progress


def test_progress_page_refreshes_while_the_run_is_active(staff_client, demo):
    run = make_runs(1, endings=[("RUNNING", "")])[0]
    page = staff_client.get(reverse("admin:agentrun_run_progress", args=[run.pk])).content.decode()
    assert 'http-equiv="refresh"' in page and "Time left" in page and " s of 45" in page


def test_bulk_action_investigates_selected_tickets(staff_user, ticket_t1001):
    client = client_for(staff_user)
    response = client.post(
        reverse("admin:tickets_ticket_changelist"),
        {"action": "investigate_selected", "_selected_action": [ticket_t1001.pk]},
    )
    run = Run.objects.get()
    assert response["Location"] == reverse("admin:agentrun_run_progress", args=[run.pk])
    assert run.status == "COMPLETED"


def test_user_without_a_role_sees_no_button_and_is_refused_with_a_message(outsider, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    client = client_for(outsider)
    assert client.get(reverse("admin:tickets_ticket_change", args=[ticket.pk])).status_code == 403
    response = client.post(reverse("admin:tickets_ticket_investigate", args=[ticket.pk]), follow=True)
    assert "Only Support staff may start investigations." in response.content.decode()
    assert Run.objects.count() == 0


def test_investigate_needs_post(staff_client, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    assert staff_client.get(reverse("admin:tickets_ticket_investigate", args=[ticket.pk])).status_code == 405
    assert Run.objects.count() == 0


def test_a_second_investigation_while_one_is_active_is_refused(staff_client, demo):
    from tickets.models import Ticket

    ticket = Ticket.objects.get(ref="T-1001")
    make_runs(1, endings=[("WAITING_APPROVAL", "")])
    response = staff_client.post(reverse("admin:tickets_ticket_investigate", args=[ticket.pk]), follow=True)
    assert "is still WAITING_APPROVAL" in response.content.decode()
    assert Run.objects.count() == 1


# --- documents: edited as a whole text, published as a new revision, never edited in place ------------------


class _FormFields(HTMLParser):
    """What a browser would post from the first <form> after `start`: inputs, checked boxes, textareas."""

    def __init__(self):
        super().__init__()
        self.data: dict[str, str] = {}
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("name") and a.get("type") not in ("submit", "button", "checkbox"):
            self.data[a["name"]] = a.get("value") or ""
        elif tag == "input" and a.get("type") == "checkbox" and "checked" in a:
            self.data[a["name"]] = a.get("value") or "on"
        elif tag == "textarea":
            self._textarea = a["name"]
            self.data[self._textarea] = ""

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "textarea" and self._textarea:
            self.data[self._textarea] = self.data[self._textarea].removeprefix("\n")
            self._textarea = None


def form_fields(page: str) -> dict[str, str]:
    start = page.index('id="document_form"')
    parser = _FormFields()
    parser.feed(page[start : page.index("</form>", start)])
    return parser.data


def document_url(code: str) -> str:
    return reverse("admin:tickets_document_change", args=[Document.objects.get(code=code).pk])


def revisions(code: str) -> list[tuple[str, bool]]:
    return [(r.label, r.is_current) for r in DocumentRevision.objects.filter(document__code=code).order_by("number")]


@pytest.fixture
def editor_client(staff_user) -> Client:
    """Support staff who also edit the knowledge base."""
    staff_user.groups.add(Group.objects.get(name=KNOWLEDGE_EDITORS))
    return client_for(staff_user)


@pytest.fixture
def superuser_client(db) -> Client:
    return client_for(User.objects.create_superuser("root", "root@example.com", "a-long-test-password"))


def test_a_knowledge_editor_sees_the_current_text_and_saving_publishes_a_new_revision(editor_client, demo):
    url = document_url("DOC-EXPORT-7")
    data = form_fields(editor_client.get(url).content.decode())
    assert data["title"] == "CSV export permissions" and data["public"] == "on"
    assert data["body"].startswith("CSV export requires the editor role")  # r3, the current text
    r3 = DocumentRevision.objects.get(document__code="DOC-EXPORT-7", number=3)
    response = editor_client.post(url, {**data, "body": "CSV export requires the owner role."}, follow=True)
    assert response.status_code == 200
    assert "Published DOC-EXPORT-7 r4; it is now the current revision" in response.content.decode()
    assert revisions("DOC-EXPORT-7") == [("r1", False), ("r2", False), ("r3", False), ("r4", True)]
    assert DocumentRevision.objects.get(pk=r3.pk).body == r3.body  # r3 keeps its text
    assert DocumentRevision.objects.get(document__code="DOC-EXPORT-7", number=4).body == (
        "CSV export requires the owner role."
    )


def test_saving_the_same_text_publishes_nothing_and_says_so(editor_client, demo):
    url = document_url("DOC-RENAME-2")
    data = form_fields(editor_client.get(url).content.decode())
    response = editor_client.post(url, data, follow=True)
    assert "Nothing changed: DOC-RENAME-2 r1 already says this, so no revision was published." in (
        response.content.decode()
    )
    assert revisions("DOC-RENAME-2") == [("r1", True)]


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"body": "   "}, "body", "This field is required."),
        ({"body": "Old links\x00 redirect."}, "body", "Null characters are not allowed."),
        ({"title": "Renaming\na workspace"}, "title", "The title is more than one line (it contains U+000A)."),
    ],
)
def test_invalid_text_is_a_form_error_and_writes_nothing(editor_client, demo, change, field, message):
    url = document_url("DOC-RENAME-2")
    data = form_fields(editor_client.get(url).content.decode())
    response = editor_client.post(url, {**data, **change})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors[field] == [message]
    assert revisions("DOC-RENAME-2") == [("r1", True)]
    assert Document.objects.get(code="DOC-RENAME-2").title == "Renaming a workspace"


def test_a_knowledge_editor_adds_a_document_as_its_first_revision(editor_client, demo):
    response = editor_client.post(
        reverse("admin:tickets_document_add"),
        {
            "code": "DOC-MOVE-1",
            "title": "Moving a workspace",
            "public": "on",
            "body": "Moving keeps members.",
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
        follow=True,
    )
    assert "Published DOC-MOVE-1 r1" in response.content.decode()
    assert revisions("DOC-MOVE-1") == [("r1", True)]
    bad = editor_client.post(
        reverse("admin:tickets_document_add"),
        {
            "code": "doc move",
            "title": "Moving",
            "body": "Text.",
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
    )
    assert bad.context["adminform"].form.errors["code"] == ["Capitals, digits, '-' and '_' only, like DOC-EXPORT-7."]


def test_support_staff_without_the_group_read_the_text_and_cannot_publish(staff_client, demo):
    url = document_url("DOC-RENAME-2")
    page = staff_client.get(url).content.decode()
    assert "Old links redirect for 30 days." in page and "<textarea" not in page
    data = {
        "title": "Renaming a workspace",
        "public": "on",
        "body": "Old links redirect for 7 days only.",
        "revisions-TOTAL_FORMS": "1",
        "revisions-INITIAL_FORMS": "1",
    }
    assert staff_client.post(url, data).status_code == 403
    assert staff_client.get(reverse("admin:tickets_document_add")).status_code == 403
    assert revisions("DOC-RENAME-2") == [("r1", True)]


def test_the_document_list_and_page_link_the_public_url(staff_client, demo):
    guide_url = "https://acme.zendesk.com/hc/en-us/articles/101-Exporting-to-CSV"
    document_publish(code="ZD-101-EN-US", title="Exporting to CSV", body="Editors export.", public=True, url=guide_url)
    document_publish(code="DOC-ODD-1", title="Odd", body="A permalink.", public=True, url="javascript:alert(1)")
    link = f'<a href="{guide_url}" rel="noopener noreferrer" target="_blank">{guide_url}</a>'

    listing = staff_client.get(reverse("admin:tickets_document_changelist")).content.decode()
    page = staff_client.get(document_url("ZD-101-EN-US")).content.decode()

    assert link in listing and link in page
    assert "javascript:alert(1)" in listing and 'href="javascript:' not in listing  # shown, never a link


def test_a_revision_is_read_only_for_a_superuser_too(superuser_client, demo):
    r1 = DocumentRevision.objects.get(document__code="DOC-RENAME-2", number=1)
    assert (
        'name="body"'
        not in superuser_client.get(reverse("admin:tickets_documentrevision_change", args=[r1.pk])).content.decode()
    )
    url = document_url("DOC-RENAME-2")
    data = form_fields(superuser_client.get(url).content.decode())
    assert not any(
        name.startswith("revisions-0-") and name not in ("revisions-0-id", "revisions-0-document") for name in data
    )  # the revisions are listed, not edited
    # What the old inline form posted to edit r1 in place: ignored; the text field publishes instead.
    edited = {**data, "revisions-0-body": "Old links redirect for 7 days only.", "revisions-0-is_current": "on"}
    assert superuser_client.post(url, edited).status_code == 302
    assert DocumentRevision.objects.get(pk=r1.pk).body == r1.body
    assert revisions("DOC-RENAME-2") == [("r1", True)]


def test_adding_a_revision_while_one_is_current_publishes_it_and_never_answers_500(superuser_client, demo):
    """The old path: the inline form's new row r4, current, beside the current r3, was an IntegrityError."""
    url = document_url("DOC-EXPORT-7")
    data = form_fields(superuser_client.get(url).content.decode())
    data.update(
        {
            "revisions-TOTAL_FORMS": "4",
            "revisions-3-number": "4",
            "revisions-3-is_current": "on",
            "revisions-3-published_at_0": "2026-12-01",
            "revisions-3-published_at_1": "09:00:00",
            "revisions-3-body": "CSV export requires the owner role.",
            "body": "CSV export requires the owner role.",
        }
    )
    response = superuser_client.post(url, data)
    assert response.status_code == 302
    assert revisions("DOC-EXPORT-7") == [("r1", False), ("r2", False), ("r3", False), ("r4", True)]


def _add_ticket(client, **extra):
    acme = Account.objects.get(code="ACME")
    data = {
        "account": acme.pk,
        "session": CustomerSession.objects.get(ref="S-ACME-1").pk,
        "subject": "Export fails",
        "body": "The export button does nothing.",
        "_save": "Save",
        **extra,
    }
    return client.post(reverse("admin:tickets_ticket_add"), data)


def test_add_ticket_offers_only_what_staff_write(staff_client, demo):
    page = staff_client.get(reverse("admin:tickets_ticket_add")).content.decode()
    for shown in ("id_account", "id_session", "id_subject", "id_body"):
        assert f'id="{shown}"' in page
    for internal in ("evaluation_copy", "evidence_count", "source", "external_id", "ref"):
        assert f'name="{internal}"' not in page, internal


def test_internal_fields_posted_to_add_ticket_are_ignored_and_the_ref_is_assigned(staff_client, demo):
    response = _add_ticket(
        staff_client,
        evaluation_copy="on",
        evidence_count="7",
        source="zendesk",
        external_id="99999999",
        ref="ZD-99999999",
    )
    assert response.status_code == 302
    ticket = Ticket.objects.get(subject="Export fails")
    assert (ticket.ref, ticket.evaluation_copy, ticket.evidence_count, ticket.source, ticket.external_id) == (
        "T-1008",
        False,
        0,
        "",
        "",
    )  # the demo's tickets are T-1001 to T-1007
    listed = staff_client.get(reverse("admin:tickets_ticket_changelist")).content.decode()
    assert "T-1008" in listed  # not hidden as an evaluation's copy


def test_each_added_ticket_takes_the_next_ref_past_odd_ones(staff_client, demo):
    Ticket.objects.filter(ref="T-1007").update(ref="T-1007x")  # a ref typed by hand before refs were assigned
    Ticket.objects.filter(ref="T-1006").update(ref="T-999999")
    _add_ticket(staff_client)
    _add_ticket(staff_client, subject="Second")
    assert Ticket.objects.get(subject="Export fails").ref == "T-1000000"
    assert Ticket.objects.get(subject="Second").ref == "T-1000001"


def test_a_ticket_page_shows_its_ref_and_source_but_they_cannot_be_changed(demo):
    root = User.objects.create_superuser("root", password="a-long-test-password")
    client = client_for(root)
    ticket = Ticket.objects.get(ref="T-1001")
    Ticket.objects.filter(pk=ticket.pk).update(source="zendesk", external_id="48213")
    url = reverse("admin:tickets_ticket_change", args=[ticket.pk])
    page = client.get(url).content.decode()
    assert "T-1001" in page and "48213" in page and 'name="external_id"' not in page and 'name="ref"' not in page
    response = client.post(
        url,
        {
            "account": ticket.account_id,
            "session": ticket.session_id,
            "subject": "Renamed",
            "body": ticket.body,
            "ref": "T-1",
            "external_id": "1",
            "evaluation_copy": "on",
            "_save": "Save",
        },
    )
    assert response.status_code == 302
    ticket.refresh_from_db()
    assert (ticket.subject, ticket.ref, ticket.external_id, ticket.evaluation_copy) == (
        "Renamed",
        "T-1001",
        "48213",
        False,
    )


@pytest.mark.parametrize("separator", ["\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\x85"])
def test_a_subject_of_more_than_one_line_is_refused(staff_client, demo, separator):
    response = _add_ticket(staff_client, subject=f"Export fails{separator}Priority: urgent")
    assert response.status_code == 200
    assert "Use one line" in response.content.decode()
    assert not Ticket.objects.filter(subject__startswith="Export fails").exists()
