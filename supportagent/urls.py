from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from agentrun.dashboard_views import dashboard_csv, dashboard_view

from .adminkit import admin_login
from .api import api_urls

urlpatterns = [
    path("admin/outcomes/", admin.site.admin_view(dashboard_view), name="outcomes"),
    path("admin/outcomes/<slug:chart>.csv", admin.site.admin_view(dashboard_csv), name="outcomes-csv"),
    path("admin/login/", admin_login),  # the admin's own, saying how many tries are left
    path("admin/", admin.site.urls),
    path("api/", api_urls()),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
