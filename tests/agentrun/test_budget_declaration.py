"""Budget is the one declaration of a budget's fields: the schema, the defaults model and its form follow it."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
from django.db import models
from pydantic import ValidationError

from engine.budgets import Budget, BudgetSchema, budget_limits, budget_schema, limit
from engine.models import BudgetDefaults, override_field
from staff.admin.preferences import BudgetDefaultsForm
from staff.api import RunOut

LIMITS = [f.name for f in fields(Budget) if f.name not in ("input_per_mtok_usd", "output_per_mtok_usd")]


@dataclass(frozen=True)
class WiderBudget(Budget):
    max_pages: int = limit(3, "Pages a run may read.", ge=1, le=50)
    max_minutes: float = limit(2.5, "Minutes a run may take.", gt=0, le=60)


def test_the_schema_has_budget_s_fields_defaults_and_help():
    assert list(BudgetSchema.model_fields) == [f.name for f in fields(Budget)]
    assert BudgetSchema().model_dump() == Budget().as_dict()
    assert BudgetSchema.model_fields["max_total_tokens"].description == "Tokens a run may use in all."


def test_the_api_describes_a_run_s_budget_with_that_schema():
    assert RunOut.model_fields["budget"].annotation is BudgetSchema


def test_the_defaults_model_and_its_form_have_one_field_per_limit():
    assert list(BudgetDefaults.FIELDS) == LIMITS == list(budget_limits())
    assert {f.name for f in BudgetDefaults._meta.get_fields()} >= set(LIMITS)
    form = BudgetDefaultsForm()
    assert list(form.fields) == LIMITS
    assert form.fields["max_read_retries"].help_text == "Retries of a lookup after a transient failure."


def test_the_defaults_model_keeps_each_limit_in_a_column_of_its_kind():
    kinds = {name: type(BudgetDefaults._meta.get_field(name)) for name in LIMITS}
    assert kinds["deadline_seconds"] is models.FloatField
    assert kinds["max_model_requests"] is models.PositiveIntegerField
    assert kinds["max_cost_micros"] is models.PositiveBigIntegerField
    assert all(BudgetDefaults._meta.get_field(name).null for name in LIMITS)


def test_a_limit_added_to_budget_is_in_the_schema_with_its_bounds():
    schema = budget_schema(WiderBudget)
    assert list(schema.model_fields)[-2:] == ["max_pages", "max_minutes"]
    assert schema().max_pages == 3
    assert schema(max_pages=50, max_minutes=60.0).max_pages == 50
    for bad in ({"max_pages": 0}, {"max_pages": 51}, {"max_minutes": 0.0}, {"max_pages": "3"}):
        with pytest.raises(ValidationError):
            schema(**bad)


def test_a_limit_added_to_budget_is_a_limit_with_a_column_for_its_override():
    limits = budget_limits(WiderBudget)
    assert list(limits) == [*LIMITS, "max_pages", "max_minutes"]
    pages, minutes = override_field(*limits["max_pages"]), override_field(*limits["max_minutes"])
    assert (type(pages), pages.null, pages.blank) == (models.PositiveIntegerField, True, True)
    assert type(minutes) is models.FloatField
