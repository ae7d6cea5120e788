"""The intake problems list: requests a help desk sent that intake refused, kept for staff to bring in."""

from __future__ import annotations

import pydantic
from django.contrib import admin, messages

from kit.adminkit import StaffSiteAdmin
from tickets.intake import BodyRefused
from tickets.models import IntakeProblem
from tickets.services import IntakeError, intake_problem_bring_in


class ResolvedFilter(admin.SimpleListFilter):
    title, parameter_name = "brought in", "resolved"

    def lookups(self, request, model_admin):
        return [("no", "Not yet"), ("yes", "Brought in")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(resolved_at__isnull=self.value() == "no")
        return queryset


@admin.register(IntakeProblem)
class IntakeProblemAdmin(StaffSiteAdmin):
    """Only the account is staff's to set; the rest is what came and what intake made of it."""

    list_display = ("received_at", "source", "code", "reason", "account", "ticket", "resolved_at")
    list_select_related = ("account", "ticket")
    list_filter = ("source", "code", ResolvedFilter)
    fields = ("received_at", "source", "code", "reason", "body", "account", "ticket", "resolved_at")
    readonly_fields = ("received_at", "source", "code", "reason", "body", "ticket", "resolved_at")
    actions = ["bring_in_selected"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Bring in with the account set", permissions=["bring_in"])
    def bring_in_selected(self, request, queryset):
        for problem in queryset.select_related("account").filter(resolved_at__isnull=True):
            self._bring_in(request, problem)

    def has_bring_in_permission(self, request) -> bool:
        return request.user.has_perms(["tickets.change_intakeproblem", "tickets.add_ticket"])

    def _bring_in(self, request, problem: IntakeProblem) -> None:
        """One problem through the intake again; why it still does not fit is said, never raised."""
        try:
            result = intake_problem_bring_in(problem=problem, requested_by=request.user)
        except IntakeError as exc:
            self.message_user(request, f"Problem {problem.pk}: {exc.message}", messages.ERROR)
        except (BodyRefused, pydantic.ValidationError) as exc:
            self.message_user(request, f"Problem {problem.pk}: the body does not fit: {exc}", messages.ERROR)
        else:
            verb = "created" if result.created else "updated"
            self.message_user(request, f"Problem {problem.pk}: ticket {result.ticket.ref} {verb}.", messages.SUCCESS)
