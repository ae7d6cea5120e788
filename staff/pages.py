"""How a staff page answers a refusal: `@staff_page` around an admin view, `refusal` for the page it shows.

The access_* and do_* functions of staff.access raise Refused; a view lets it go, and the decorator turns
it into the answer the page gives: a refusal page titled for what happened, or (a button's view) the
refusal's message on the page the button is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse

from staff.access import Refused, require

# A refusal page's title by its status; any other status is a request refused as it stands.
REFUSAL_TITLES = {403: "Not allowed", 404: "Not found", 409: "Not possible now"}


def refusal(request, exc: Refused) -> TemplateResponse:
    """A clear refusal page inside the admin, titled for what happened (a missing packet is not "Not allowed")."""
    title = REFUSAL_TITLES.get(exc.status, "Request refused")
    context = {**admin.site.each_context(request), "title": title, "message": exc.message, "code": exc.code}
    return TemplateResponse(request, "admin/agentrun/refused.html", context, status=exc.status)


def staff_page(view=None, *, requires: str | Iterable[str] = (), back_to: Callable[..., str] | None = None):
    """Answer a `Refused` raised by `view` (a view function, or an admin's view method) as staff pages do.

    `requires`: permissions checked before the view runs (before it looks anything up, so that any id gets
    the same answer); a user without one gets the refusal page. A `Refused` from the view itself gets the
    refusal page too, unless `back_to` is given: a button's view then shows the refusal's message on the
    page `back_to(**url kwargs)`, where the button is.
    """
    permissions = (requires,) if isinstance(requires, str) else tuple(requires)

    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            request = next(a for a in args if isinstance(a, HttpRequest))
            try:
                for permission in permissions:
                    require(request.user, permission)
            except Refused as exc:
                return refusal(request, exc)
            try:
                return view(*args, **kwargs)
            except Refused as exc:
                if back_to is None:
                    return refusal(request, exc)
                messages.error(request, exc.message)
                return HttpResponseRedirect(back_to(**kwargs))

        return wrapped

    return decorate(view) if view is not None else decorate
