"""The roles, what each may do, and the commands that set them up."""

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.management import call_command
from django.core.management.base import CommandError

from engine.models import ApiToken, PacketReview, Run
from engine.roles import (
    INTEGRATIONS,
    KNOWLEDGE_EDITORS,
    ROLES,
    SUPERVISORS,
    SUPPORT_STAFF,
    demo_users_setup,
    roles_setup,
)
from staff.access import Refused, do_answer_approval, do_cancel, do_investigate, do_review
from staff.auth import token_user
from tests.support.staff import make_runs


def test_setup_roles_creates_exactly_the_four_groups_and_is_idempotent(db):
    call_command("setup_roles")
    call_command("setup_roles")
    assert set(Group.objects.values_list("name", flat=True)) == {
        SUPPORT_STAFF,
        SUPERVISORS,
        KNOWLEDGE_EDITORS,
        INTEGRATIONS,
    }
    for name, perms in ROLES.items():
        group = Group.objects.get(name=name)
        assert group.permissions.count() == len(set(perms))


def test_supervisors_can_do_everything_staff_can_and_more(staff_user, supervisor_user):
    staff_only = {"agentrun.start_investigation", "agentrun.review_packet", "tickets.view_ticket", "agentrun.view_run"}
    supervisor_extra = {
        "agentrun.view_dashboard",
        "agentrun.answer_approval",
        "agentrun.cancel_run",
        "agentrun.change_budget_defaults",
    }
    assert all(staff_user.has_perm(p) for p in staff_only)
    assert not any(staff_user.has_perm(p) for p in supervisor_extra)
    assert all(supervisor_user.has_perm(p) for p in staff_only | supervisor_extra)


def test_knowledge_editors_may_read_add_and_publish_documents_keep_synonyms_and_nothing_else(db):
    group = roles_setup()[KNOWLEDGE_EDITORS]
    perms = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}
    assert perms == {
        "tickets.view_document",
        "tickets.add_document",
        "tickets.change_document",
        "tickets.view_documentrevision",
        "tickets.view_searchsynonym",
        "tickets.add_searchsynonym",
        "tickets.change_searchsynonym",
        "tickets.delete_searchsynonym",
    }


def test_only_knowledge_editors_among_staff_roles_may_publish_documents(staff_user, supervisor_user):
    for user in (staff_user, supervisor_user):
        assert not user.has_perm("tickets.change_document") and not user.has_perm("tickets.add_document")
        assert not user.has_perm("tickets.change_documentrevision")
    staff_user.groups.add(Group.objects.get(name=KNOWLEDGE_EDITORS))
    staff_user = User.objects.get(pk=staff_user.pk)  # a fresh permission cache
    assert staff_user.has_perm("tickets.change_document") and staff_user.has_perm("agentrun.review_packet")


def test_a_user_without_a_role_is_refused_by_every_service(outsider, demo):
    run = make_runs(1)[0]
    ticket = run.ticket
    calls = [
        lambda: do_investigate(user=outsider, ticket=ticket, via="test"),
        lambda: do_review(user=outsider, packet_id=run.packet.pk, decision="accepted"),
        lambda: do_cancel(user=outsider, run_id=run.pk),
        lambda: do_answer_approval(user=outsider, run_id=run.pk, grant=True),
    ]
    for call in calls:
        with pytest.raises(Refused) as refused:
            call()
        assert refused.value.status == 403 and refused.value.code == "forbidden"
    assert Run.objects.count() == 1 and PacketReview.objects.count() == 0


def test_support_staff_may_not_cancel_or_answer_approvals(staff_user, demo):
    run = make_runs(1)[0]
    for call in (
        lambda: do_cancel(user=staff_user, run_id=run.pk),
        lambda: do_answer_approval(user=staff_user, run_id=run.pk, grant=False),
    ):
        with pytest.raises(Refused) as refused:
            call()
        assert refused.value.status == 403
        assert "Supervisors" in refused.value.message


def test_demo_users_get_one_role_each_and_the_given_password(db, monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-123")
    call_command("setup_roles", "--demo-users")
    staff, supervisor = User.objects.get(username="staff"), User.objects.get(username="supervisor")
    assert staff.check_password("demo-password-123") and supervisor.check_password("demo-password-123")
    assert staff.is_staff and supervisor.is_staff
    assert list(staff.groups.values_list("name", flat=True)) == [SUPPORT_STAFF]
    assert list(supervisor.groups.values_list("name", flat=True)) == [SUPERVISORS]
    assert "supervisor / demo-password-123" in capsys.readouterr().out


def test_demo_users_without_demo_password_get_a_printed_random_one(db, monkeypatch, capsys):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    call_command("setup_roles", "--demo-users")
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("staff /"))
    password = line.split("/")[1].split()[0]
    assert len(password) >= 12
    assert User.objects.get(username="staff").check_password(password)


def test_generated_demo_passwords_pass_the_password_validators(db):
    for _ in range(20):
        password, users = demo_users_setup()
        for user in users:
            validate_password(password, user)  # raises ValidationError when one fails


def test_a_weak_demo_password_is_refused_and_no_user_is_kept(db, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "staffstaff")
    with pytest.raises(CommandError, match="DEMO_PASSWORD is too weak"):
        call_command("setup_roles", "--demo-users")
    assert not User.objects.filter(username__in=["staff", "supervisor"]).exists()


def test_create_api_token_prints_a_token_that_is_stored_only_hashed(staff_user, capsys):
    call_command("create_api_token", "staff")
    raw = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user=staff_user)
    assert raw not in (token.digest, token.prefix) and len(token.digest) == 64
    assert raw.startswith(token.prefix)
    assert token_user(raw=raw) == staff_user
    assert token_user(raw=raw + "x") is None


def test_revoked_tokens_and_inactive_users_do_not_authenticate(staff_user, capsys):
    call_command("create_api_token", "staff")
    raw = capsys.readouterr().out.strip()
    staff_user.is_active = False
    staff_user.save()
    assert token_user(raw=raw) is None
    staff_user.is_active = True
    staff_user.save()
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    assert token_user(raw=raw) is None


def test_roles_setup_resets_permissions_that_drifted(db):
    groups = roles_setup()
    groups[SUPPORT_STAFF].permissions.clear()
    roles_setup()
    assert groups[SUPPORT_STAFF].permissions.count() == len(ROLES[SUPPORT_STAFF])


def test_create_api_token_refuses_an_unknown_user(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_api_token", "nobody")
    assert ApiToken.objects.count() == 0
