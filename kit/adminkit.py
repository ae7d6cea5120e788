"""What every admin in the project shares."""

from __future__ import annotations

import json
from functools import cached_property

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.core.exceptions import PermissionDenied
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import QuerySet
from django.template.response import SimpleTemplateResponse
from django.utils.html import format_html
from django.utils.text import smart_split, unescape_string_literal
from django.utils.translation import gettext


class OfferedLookupsChangeList(ChangeList):
    """A list filtered only by what its page offers: its filters' own parameters, its date
    hierarchy, and the lookups its admin names in `linked_lookups` (links from other pages).

    Any other field lookup in the query string (`?subject__regex=(`, `?status__regex=*`) is
    refused before a query runs: a regular expression the database cannot compile is a 500,
    and one that backtracks (`^(a+)+$`) burns the CPU of an SQLite process.
    """

    model_admin: StaffSiteAdmin  # the only admin whose get_changelist returns this list

    def get_filters(self, request):
        filter_specs, has_filters, remaining, may_have_duplicates, has_active = super().get_filters(request)
        unoffered = set(remaining) - set(self.model_admin.linked_lookups) - self._date_hierarchy_bounds()
        if unoffered:
            raise IncorrectLookupParameters(f"Filtering by {', '.join(sorted(unoffered))} is not offered.")
        return filter_specs, has_filters, remaining, may_have_duplicates, has_active

    def get_results(self, request):
        """The page's rows, read with only the columns the admin's `list_columns` names (every column when none)."""
        super().get_results(request)
        if self.model_admin.list_columns:
            self.result_list = self.result_list.only(*self.model_admin.list_columns)

    @property
    def next_page_url(self) -> str:
        """The next page's link when the count is an estimate and this page is full (more rows may follow)."""
        full = len(self.result_list) == self.list_per_page
        if not (getattr(self.paginator, "estimated", False) and full and self.multi_page):
            return ""
        return self.get_query_string({PAGE_VAR: self.page_num + 1})

    def _date_hierarchy_bounds(self) -> set[str]:
        """The bounds Django turns the date hierarchy's year, month and day into (never taken as written)."""
        field = self.date_hierarchy
        if not field or f"{field}__year" not in self.filter_params:
            return set()
        bounds = {f"{field}__gte", f"{field}__lt"}
        return set() if bounds & set(self.filter_params) else bounds


# Up to this many rows a list counts them; beyond, it takes PostgreSQL's estimate (LargeListPaginator).
EXACT_COUNT_UP_TO = 10_000


class LargeListPaginator(Paginator):
    """A paginator whose count stays cheap however many rows a list holds.

    Django's admin counts a list with `COUNT(*)` on every load, which reads every row the filters leave:
    at 100,000 runs the run list's count alone took 230 ms of its 1.4 s (bench/pages_bench.py). Here the
    count reads at most EXACT_COUNT_UP_TO + 1 rows (`SELECT COUNT(*) FROM (... LIMIT n)`); a list longer
    than that is counted by the planner's estimate on PostgreSQL (`EXPLAIN`, from the table's statistics:
    pg_class.reltuples and the columns' histograms), shown as "about" (`estimated`). Since an estimate may
    fall short, every page past it may still be asked for and a full page always links to the next one
    (templates/admin/pagination.html): staff reach every row. Elsewhere (SQLite) the count is exact.
    """

    estimated = False

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if not isinstance(rows, QuerySet):  # a list: its length
            return len(rows)
        counted = rows.order_by().values("pk")[: EXACT_COUNT_UP_TO + 1].count()  # no column the rows show
        if counted <= EXACT_COUNT_UP_TO:
            return counted
        connection = connections[rows.db]
        if connection.vendor != "postgresql":
            return rows.count()
        self.estimated = True
        plan = json.loads(rows.order_by().values("pk").explain(format="json"))
        return max(int(plan[0]["Plan"]["Plan Rows"]), counted)

    def validate_number(self, number) -> int:
        """Any page from 1 on when the count is an estimate (the rows may go on past it)."""
        if not self.estimated:
            return super().validate_number(number)
        try:
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if number < 1:
            raise EmptyPage("That page number is less than 1")
        return number

    def page(self, number) -> Page:
        if not self.estimated:
            return super().page(number)
        bottom = (self.validate_number(number) - 1) * self.per_page
        return Page(self.object_list[bottom : bottom + self.per_page], number, self)


class StaffSiteAdmin(admin.ModelAdmin):
    """Django's ModelAdmin, with two of its answers made safe.

    A list accepts only the lookups its page offers (OfferedLookupsChangeList) and
    answers any other, or one it cannot run, as the admin answers a wrong lookup
    (`?e=1`). Some offered values fail only once the query runs: a year outside
    1-9999 raises ValueError or OverflowError in Django's date bounds, and
    PostgreSQL refuses text with a NUL character.

    An object's history checks permission before it looks the object up, so that
    a user who may not see the model gets the same 403 whether the object exists
    or not (Django looks first, and says "doesn't exist" for a missing one).
    """

    # Lookups other pages link to that no filter of the list offers (e.g. `status__in`).
    linked_lookups: tuple[str, ...] = ()
    # The fields a list page reads of each row and of the rows it selects with it (QuerySet.only); empty: all of
    # them. A row's JSON and long text columns that no column shows are then neither sent nor decoded (a run's
    # or a packet's took most of the time a page spent reading its 50 rows). A field named nowhere here is read
    # again row by row if a column shows it: the lists' tests count their statements.
    list_columns: tuple[str, ...] = ()
    paginator = LargeListPaginator

    def get_changelist(self, request, **kwargs):
        return OfferedLookupsChangeList

    def action_checkbox(self, obj):
        """Django's checkbox of a row, written as its template writes it: the widget's template rendered for each of
        a page's rows took a sixth of the ticket list's time (bench/pages_bench.py)."""
        label = format_html(gettext("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )

    def lookup_allowed(self, lookup, value, request=None):
        """A lookup the admin names in `linked_lookups` is offered, even across a relation no filter names."""
        return lookup in self.linked_lookups or super().lookup_allowed(lookup, value, request)

    def get_changelist_instance(self, request):
        if any("\x00" in value for _, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("A NUL character in the query string.")
        try:
            return super().get_changelist_instance(request)
        except (ValueError, OverflowError, DisallowedModelAdminLookup) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def history_view(self, request, object_id, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return super().history_view(request, object_id, extra_context)


def search_terms(text: str) -> list[str]:
    """What an admin list's search looks for, as Django's own search splits it: each word, a quoted phrase as one.
    Every term must be found (in one field or another) for a row to be listed."""
    return [
        unescape_string_literal(bit) if bit[:1] in ("'", '"') and bit[0] == bit[-1] else bit
        for bit in smart_split(text)
    ]


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


# A failed login shows how many tries are left from this many failures on.
TRIES_LEFT_SHOWN_AFTER = 3


def admin_login(request):
    """The admin's login page; after the third failed try in a row it also says how many are left
    before django-axes refuses logins as that user from this address (docs/staff/hardening.md)."""
    response = admin.site.login(request)
    if request.method != "POST" or not isinstance(response, SimpleTemplateResponse) or response.context_data is None:
        return response  # logged in (a redirect), or a page without a template context to add to
    username = request.POST.get("username", "")
    failures = AxesProxyHandler.get_failures(request, {"username": username})
    left = settings.AXES_FAILURE_LIMIT - failures
    if failures >= TRIES_LEFT_SHOWN_AFTER and left > 0:
        response.context_data.update(tries_left=left, tries_username=username, cooloff=settings.AXES_COOLOFF_TIME)
    return response
