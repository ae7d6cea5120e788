"""The admin, split by model family; Django's autodiscovery imports this package.

`base` holds what the runs-side admins share; `runs` (runs and approvals), `packets` (the review
queue, reviews, evidence re-checks), `evaluations`, `preferences` (API tokens, time zones, budget
defaults) and `webhooks` register the engine's models, `tickets` the tickets side, `intake` the
intake problems list.
"""

from django.contrib import admin

from kit.adminkit import admin_site_harden
from staff.admin import (  # noqa: F401  (registering is what importing them does)
    evaluations,
    intake,
    packets,
    preferences,
    runs,
    tickets,
    webhooks,
)

admin.site.site_header = admin.site.site_title = "supportagent"
admin.site.index_title = "Work"

# The last app with admins: Django's own (users, groups) and django-axes' answer like ours.
admin_site_harden(admin.site)
