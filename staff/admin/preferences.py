"""What people set: their API tokens, their time zone, and (supervisors) the budget of new runs."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from engine.budgets import Budget, BudgetError, budget_limits
from engine.checks import approval_time_check
from engine.config import budget_defaults
from engine.models import ApiToken, BudgetDefaults, StaffPreference, available_time_zones
from kit.adminkit import StaffSiteAdmin
from kit.timezones import COMMON_ZONES, zone_label, zones_offered
from staff.auth import token_create
from staff.middleware import SESSION_KEY as TIME_ZONE_SESSION_KEY
from staff.pages import staff_page

PERMISSION_BUDGET = "agentrun.change_budget_defaults"


@admin.register(ApiToken)
class ApiTokenAdmin(StaffSiteAdmin):
    """Each user manages their own tokens; the token text is shown once, at creation."""

    list_display = ("name", "prefix", "user", "source", "created_at", "last_used_at", "revoked_at")
    fields = ("name",)
    actions = ["revoke"]

    def get_queryset(self, request):
        tokens = super().get_queryset(request).select_related("user")
        return tokens if request.user.is_superuser else tokens.filter(user=request.user)

    def has_change_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        token, raw = token_create(user=request.user, name=obj.name)
        obj.pk, obj.user, obj.prefix, obj.digest, obj.created_at = (
            token.pk,
            token.user,
            token.prefix,
            token.digest,
            token.created_at,
        )
        messages.warning(request, f"Your new API token (copy it now, it is not shown again): {raw}")

    @admin.action(description="Revoke selected tokens", permissions=["delete"])
    def revoke(self, request, queryset):
        n = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        messages.success(request, f"{n} token(s) revoked.")


class BudgetDefaultsForm(forms.ModelForm):
    """One field per limit of Budget, described as Budget describes it, showing the value in force.

    A value left as configuration gives it (AGENT_BUDGET_DEFAULTS over CONFORMANCE §2), or emptied,
    is not stored as an override: it keeps following the configuration.
    """

    class Meta:
        model = BudgetDefaults
        fields = BudgetDefaults.FIELDS
        help_texts = {name: bound.help for name, (_, bound) in budget_limits().items()}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.update(
            {name: value for name, value in _budget_in_force(self.instance).items() if name in BudgetDefaults.FIELDS}
        )
        self.fields["deadline_seconds"].help_text += (
            " A run whose calls may need a supervisor's approval gets at least "
            f"{settings.AGENT_APPROVAL_DEADLINE_SECONDS:g} s (AGENT_APPROVAL_DEADLINE_SECONDS)."
        )

    def clean(self):
        cleaned = super().clean()
        edited = {name: cleaned.get(name) for name in BudgetDefaults.FIELDS if cleaned.get(name) is not None}
        try:
            Budget.from_mapping(budget_defaults(edited))
        except BudgetError as exc:
            raise forms.ValidationError(str(exc)) from None
        configured = _budget_configured()
        for name, value in edited.items():
            if value == configured.get(name):
                cleaned[name] = None  # as configured: no override
        return cleaned


def _budget_configured() -> dict:
    """The budget configuration gives new runs, before supervisors' overrides."""
    try:
        return Budget.from_mapping(settings.AGENT_BUDGET_DEFAULTS).as_dict()
    except BudgetError:
        return Budget().as_dict()


def _budget_in_force(row: BudgetDefaults) -> dict:
    """The budget new runs start with under `row`'s overrides (configuration's, should they not fit)."""
    try:
        return Budget.from_mapping(budget_defaults(row.overrides())).as_dict()
    except BudgetError:
        return _budget_configured()


@admin.register(BudgetDefaults)
class BudgetDefaultsAdmin(StaffSiteAdmin):
    """Supervisors edit the budget of new runs; a run keeps the budget it started with."""

    form = BudgetDefaultsForm
    readonly_fields = ["updated_by", "updated_at"]

    def has_module_permission(self, request):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_change_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION_BUDGET)

    def has_add_permission(self, request):
        return False  # the one row is made by changelist_view

    def has_delete_permission(self, request, obj=None):
        return False

    @staff_page(requires=PERMISSION_BUDGET)  # before the one row is made
    def changelist_view(self, request, extra_context=None):
        row, _ = BudgetDefaults.objects.get_or_create(pk=1)
        return HttpResponseRedirect(reverse("admin:agentrun_budgetdefaults_change", args=[row.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET":  # agentrun.W001 where the deadline is set
            for warning in approval_time_check():
                messages.warning(request, f"{warning.msg} {warning.hint}")
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        obj.pk, obj.updated_by = 1, request.user.get_username()
        super().save_model(request, obj, form, change)


class ZoneSelect(forms.Select):
    """The zone list with a search box above it: typing "new york", "kolkata" or "+05:30" keeps the zones that
    match (a small script; without it the list still works as a plain one)."""

    def render(self, name, value, attrs=None, renderer=None):
        listing = super().render(name, value, {**(attrs or {}), "size": 12, "class": "sa-zones"}, renderer)
        return format_html(
            '<div class="sa-zone-picker"><input type="search" id="zone-search" autocomplete="off" '
            'placeholder="Search: a city, a country\'s zone, UTC+05:30" aria-label="Search the time zones" '
            'aria-controls="id_{}"><br>{}<p class="sa-note" id="zone-count" aria-live="polite"></p></div>{}',
            name,
            listing,
            ZONE_SEARCH_SCRIPT,
        )


# Hides the options (and groups) that do not match every word typed; Enter picks the first one left.
ZONE_SEARCH_SCRIPT = mark_safe("""<style>
  .sa-zone-picker #zone-search { width:24em; max-width:100%; box-sizing:border-box; margin-bottom:4px }
  .sa-zone-picker select.sa-zones { height:auto; width:24em; max-width:100%; box-sizing:border-box }
</style>
<script>
(function () {
  var search = document.getElementById("zone-search"), list = document.querySelector("select.sa-zones");
  var count = document.getElementById("zone-count");
  if (!search || !list) { return; }
  function words(text) { return text.toLowerCase().replace(/[_/()]/g, " ").split(/\\s+/).filter(Boolean); }
  function filter() {
    var wanted = words(search.value), shown = 0, first = null;
    Array.prototype.forEach.call(list.querySelectorAll("optgroup"), function (group) {
      var any = false;
      Array.prototype.forEach.call(group.children, function (option) {
        var text = (option.value + " " + option.textContent).toLowerCase().replace(/[_/()]/g, " ");
        var hit = wanted.every(function (w) { return text.indexOf(w) !== -1; });
        option.hidden = !hit;
        if (hit) { any = true; shown += 1; first = first || option; }
      });
      group.hidden = !any;
    });
    count.textContent = search.value ? shown + " zone" + (shown === 1 ? "" : "s") + " match" + (shown === 1 ? "es" : "") : "";
    return first;
  }
  search.addEventListener("input", filter);
  search.addEventListener("keydown", function (event) {
    if (event.key !== "Enter") { return; }
    event.preventDefault();  // Enter picks a zone; Save saves
    var first = filter();
    if (first) { list.value = first.value; list.focus(); }
  });
})();
</script>""")


class StaffPreferenceForm(forms.ModelForm):
    """The zone picker: the common zones first, then every zone for a place (kit.timezones), each with its
    offset now; the zone a person already has stays offered even when it is not one of those."""

    time_zone = forms.ChoiceField(widget=ZoneSelect, label="Time zone")

    class Meta:
        model = StaffPreference
        fields = ["time_zone"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = zone_choices(current=self.instance.time_zone if self.instance.pk else "")


def zone_choices(*, current: str = "") -> list:
    now = timezone.now()
    offered = zones_offered()
    kept = [current] if current and current not in offered and current in available_time_zones() else []
    return [
        ("Common zones", [(z, zone_label(z, now=now)) for z in (*kept, *COMMON_ZONES)]),
        ("Every zone", [(z, zone_label(z, now=now)) for z in offered]),
    ]


@admin.register(StaffPreference)
class StaffPreferenceAdmin(StaffSiteAdmin):
    """Each person edits their own preferences; the list opens their own row."""

    form = StaffPreferenceForm

    def get_queryset(self, request):
        return super().get_queryset(request).filter(user=request.user)

    def has_add_permission(self, request):
        return False  # the one row of each user is made by changelist_view

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if request.GET:  # a filtered list: the list itself answers (and refuses lookups it cannot run)
            return super().changelist_view(request, extra_context)
        row, _ = StaffPreference.objects.get_or_create(user=request.user)
        return HttpResponseRedirect(reverse("admin:agentrun_staffpreference_change", args=[row.pk]))

    def save_model(self, request, obj, form, change):
        obj.user = request.user
        super().save_model(request, obj, form, change)
        request.session[TIME_ZONE_SESSION_KEY] = obj.time_zone

    def response_change(self, request, obj):
        messages.success(request, f"Times are now shown in {obj.time_zone}.")
        return HttpResponseRedirect(reverse("admin:agentrun_staffpreference_change", args=[obj.pk]))
