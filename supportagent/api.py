"""The JSON API: one NinjaAPI, one router per app, every error a JSON body with a code and a message."""

from __future__ import annotations

import functools
import json
import logging

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from django.urls import re_path, reverse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import SessionAuth

from integrations.api import BODY_SCHEMAS
from integrations.api import router as tickets_router
from kit.limits import body_size_check
from staff.access import Refused
from staff.api import router as agentrun_router
from staff.auth import BearerToken

log = logging.getLogger("agentrun")


class Bearer(BearerToken):
    def __call__(self, request):
        body_size_check(request)
        return super().__call__(request)


class Session(SessionAuth):
    """The admin's own session cookie, with Django's CSRF check on writes.

    Only a request that is logged in, and carries no token, is judged by its session: anyone
    else is unauthenticated (401), not refused a CSRF check they could never pass (403).
    """

    def __call__(self, request):
        body_size_check(request)
        if "authorization" in request.headers or not request.user.is_authenticated:
            return None
        try:
            return super().__call__(request)
        except HttpError as exc:
            if exc.status_code == 403:
                raise Refused(
                    "forbidden",
                    "The CSRF check failed: send the X-CSRFToken header with the "
                    "csrftoken cookie's value, or use an API token.",
                    403,
                ) from exc
            raise


class Api(NinjaAPI):
    def get_openapi_schema(self, **kwargs):
        """Ninja's schema, with the bodies the intake views read themselves (integrations.api.BODY_SCHEMAS)."""
        schema = super().get_openapi_schema(**kwargs)
        schema.setdefault("components", {}).setdefault("schemas", {}).update(BODY_SCHEMAS)
        return schema


api = Api(
    title="supportagent",
    description="Investigations, runs, review packets and approvals for staff scripts; tickets from help desks; "
    "documents from a knowledge base. "
    "Send `Authorization: Bearer <token>` (create one with `manage.py create_api_token USER`).",
    urls_namespace="api",
    auth=[Bearer(), Session()],
)
api.add_router("/", agentrun_router)
api.add_router("/", tickets_router)


def error(request, status: int, code: str, message: str, **extra):
    return api.create_response(request, {"code": code, "message": message, **extra}, status=status)


@api.exception_handler(Refused)
def _refused(request, exc: Refused):
    return error(request, exc.status, exc.code, exc.message)


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    errors = [{"loc": list(e.get("loc", [])), "msg": str(e.get("msg", ""))} for e in exc.errors]
    where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
    return error(request, 422, "invalid_input", f"The request is not valid: {where}", errors=errors)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return error(request, 401, "unauthenticated", "Send a valid API token (Authorization: Bearer …) or log in.")


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, (json.JSONDecodeError, UnicodeDecodeError)):
        return error(request, 400, "malformed_json", "The request body is not valid JSON.")
    codes = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 429: "throttled"}
    return error(request, exc.status_code, codes.get(exc.status_code, "error"), str(exc))


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error(request, 404, "not_found", "Not found.")


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return error(request, 413, "body_too_large", "The request body is too large.")


@api.exception_handler(Exception)
def _unexpected(request, exc: Exception):
    log.exception("API error on %s %s", request.method, request.path)
    return error(request, 500, "internal_error", "Something went wrong on our side.")


def _json_not_allowed(view):
    """Ninja answers a wrong method with a plain-text 405; ours is JSON like every other error."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if response.status_code == 405 and "json" not in response.get("Content-Type", ""):
            response = method_not_allowed(request, response.get("Allow", ""))
        return response

    return wrapped


def method_not_allowed(request, allowed: str) -> JsonResponse:
    response = JsonResponse(
        {"code": "method_not_allowed", "message": f"{request.method} is not allowed here; use {allowed}."}, status=405
    )
    response["Allow"] = allowed
    return response


def api_urls():
    """`api.urls`, with JSON 405s, and a JSON 404 for any other path under the API."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        # Ninja's root is a placeholder answering Django's HTML 404; ours says where things are.
        pattern.callback = api_index if pattern.name == "api-root" else _json_not_allowed(pattern.callback)
    return [*patterns, re_path(r"^", api_not_found)], app_name, namespace


@csrf_exempt  # it answers every method; a write is refused as 405, never with Django's HTML CSRF page
def api_index(request, *args, **kwargs):
    """What `/api/` answers: where the documentation is, and the operations (no token needed to read it)."""
    if request.method not in ("GET", "HEAD"):
        return method_not_allowed(request, "GET")
    schema = api.get_openapi_schema()
    operations = sorted(
        f"{method.upper()} {path}"
        for path, methods in schema["paths"].items()
        for method in methods
        if method in {"get", "post", "put", "patch", "delete"}
    )
    return JsonResponse(
        {
            "name": api.title,
            "docs": reverse("api:openapi-view"),
            "openapi": reverse("api:openapi-json"),
            "auth": "Authorization: Bearer <token> (manage.py create_api_token USER), or the admin's session",
            "operations": operations,
        }
    )


@csrf_exempt  # no route, nothing to protect: a JSON 404 for every method, not Django's HTML CSRF page
def api_not_found(request, *args, **kwargs):
    return JsonResponse({"code": "not_found", "message": f"There is no {request.path} in the API."}, status=404)
