"""Evaluations of candidate models against reviewed packets: the list, the comparison, the CSV, the start form."""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from engine.models import Evaluation, EvaluationCase
from evaluation.services import evaluation_figures, result_of
from kit.csvexport import csv_response
from staff.access import Refused, can, do_evaluation_start, evaluation_models, require
from staff.admin.base import ReadOnlyAdmin, object_pk, run_url
from staff.pages import staff_page

CASE_COLUMNS = (
    "original run",
    "candidate run",
    "ticket",
    "original review",
    "original reason",
    "status",
    "detail",
    "drafted",
    "overlap",
    "model requests",
    "tokens",
    "cost micros",
    "original cost micros",
    "wall seconds",
    "agreed",
    "regression",
    "result",
)


def case_row(case: EvaluationCase) -> list[object]:
    return [
        case.original_run_id,
        case.candidate_run_id,
        case.original_run.ticket.ref,
        case.original_review,
        case.original_reason,
        case.status,
        case.detail,
        case.drafted,
        case.overlap,
        case.model_requests,
        case.tokens,
        case.cost_micros,
        case.original_cost_micros,
        case.wall_seconds,
        case.agreed,
        case.regression,
        result_of(case).value,
    ]


class EvaluationStartForm(forms.Form):
    """Which packets, how many, which model: the `evaluate` command's choices a supervisor makes in the admin."""

    candidate_model = forms.ChoiceField(label="Candidate model")
    reviewed = forms.ChoiceField(
        label="Packets reviewed as", choices=Evaluation.Reviewed.choices, initial=Evaluation.Reviewed.ACCEPTED
    )
    limit = forms.IntegerField(
        label="At most this many packets (oldest first)", min_value=1, max_value=10_000, required=False, initial=20
    )
    since = forms.DateField(label="Only packets written since (YYYY-MM-DD, your time zone)", required=False)
    live_tools = forms.BooleanField(
        label="Read the live backends, not the results the original runs recorded", required=False
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["candidate_model"].choices = evaluation_models()

    def since_moment(self):
        day = self.cleaned_data.get("since")
        return timezone.make_aware(datetime.combine(day, time.min)) if day else None


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    """Candidate models tested against reviewed packets (manage.py evaluate, or *Start an evaluation*),
    for supervisors."""

    list_display = (
        "id",
        "candidate_model",
        "reviewed",
        "live_tools",
        "cases",
        "agreement",
        "regressions",
        "started_at",
        "finished_at",
    )
    list_filter = ("candidate_model", "live_tools")
    change_list_template = "admin/agentrun/evaluation/change_list.html"

    @admin.display(description="cases")
    def cases(self, evaluation):
        return evaluation.figures.get("cases", 0)

    @admin.display(description="agreement")
    def agreement(self, evaluation):
        share = evaluation.figures.get("agreement")
        return "—" if share is None else f"{share:.0%}"

    @admin.display(description="regressions")
    def regressions(self, evaluation):
        return len(evaluation.figures.get("regressions", []))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:evaluation_id>/csv/", view(self.csv_view), name="agentrun_evaluation_csv"),
            path("start/", view(self.start_view), name="agentrun_evaluation_start"),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        can_start = can(request.user, "agentrun.add_evaluation")
        return super().changelist_view(request, {**(extra_context or {}), "can_start": can_start})

    @staff_page(requires="agentrun.add_evaluation")
    def start_view(self, request):
        """The start form; a start refused (no broker, a model that cannot be evaluated) shows the form again,
        with the supervisor's choices and the reason."""
        form = EvaluationStartForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                evaluation = do_evaluation_start(
                    user=request.user,
                    candidate_model=data["candidate_model"],
                    reviewed=data["reviewed"],
                    limit=data["limit"],
                    since=form.since_moment(),
                    live_tools=data["live_tools"],
                )
            except Refused as exc:
                messages.error(request, exc.message)
            else:
                done = "finished" if evaluation.finished_at else "started on the workers"
                messages.success(request, f"Evaluation {evaluation.pk} of {evaluation.candidate_model} {done}.")
                return HttpResponseRedirect(reverse("admin:agentrun_evaluation_change", args=[evaluation.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "title": "Start an evaluation of a candidate model",
        }
        return TemplateResponse(request, "admin/agentrun/evaluation/start.html", context)

    def _cases(self, request, evaluation_id: int):
        require(request.user, "agentrun.view_evaluation")
        evaluation = Evaluation.objects.filter(pk=evaluation_id).first()
        if evaluation is None:
            raise Refused("not_found", f"There is no evaluation {evaluation_id}.", 404)
        return evaluation, list(evaluation.cases.select_related("original_run__ticket"))

    @staff_page
    def change_view(self, request, object_id, form_url="", extra_context=None):
        evaluation, cases = self._cases(request, object_pk(object_id))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Evaluation {evaluation.pk}: {evaluation.candidate_model} against reviewed packets",
            "evaluation": evaluation,
            "figures": evaluation_figures(cases),  # from the rows below, as they are now
            "rows": [
                (
                    case,
                    result_of(case),
                    run_url(case.original_run_id),
                    run_url(case.candidate_run_id) if case.candidate_run_id else None,
                )
                for case in cases
            ],
            "csv_url": reverse("admin:agentrun_evaluation_csv", args=[evaluation.pk]),
        }
        return TemplateResponse(request, "admin/agentrun/evaluation/compare.html", context)

    @staff_page
    def csv_view(self, request, evaluation_id):
        evaluation, cases = self._cases(request, evaluation_id)
        return csv_response([CASE_COLUMNS, *(case_row(c) for c in cases)], filename=f"evaluation-{evaluation.pk}.csv")
