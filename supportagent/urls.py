from django.contrib import admin
from django.urls import path
from django.views.decorators.cache import cache_control
from django.views.generic import RedirectView, TemplateView

from kit.adminkit import admin_login
from staff.dashboard_views import dashboard_csv, dashboard_view, gaps_csv, gaps_view
from supportagent.api import api_urls

urlpatterns = [
    path("admin/outcomes/", admin.site.admin_view(dashboard_view), name="outcomes"),
    path("admin/outcomes/<slug:chart>.csv", admin.site.admin_view(dashboard_csv), name="outcomes-csv"),
    path("admin/knowledge-gaps/", admin.site.admin_view(gaps_view), name="knowledge-gaps"),
    path("admin/knowledge-gaps.csv", admin.site.admin_view(gaps_csv), name="knowledge-gaps-csv"),
    path("admin/login/", admin_login),  # the admin's own, saying how many tries are left
    path("admin/", admin.site.urls),
    path("api/", api_urls()),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # The staff pages' icon (a speech bubble in the admin's blue); browsers that ask for /favicon.ico get it too.
    path(
        "favicon.svg",
        cache_control(max_age=86400, public=True)(
            TemplateView.as_view(template_name="favicon.svg", content_type="image/svg+xml")
        ),
        name="favicon",
    ),
    path("favicon.ico", RedirectView.as_view(pattern_name="favicon", permanent=True)),
]
