"""Per-user API tokens. A token is shown once; only its SHA-256 digest is stored."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import User
from django.utils import timezone
from ninja.security import HttpBearer

from engine.models import ApiToken

TOKEN_PREFIX = "sat_"


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user: User, name: str, source: str = "") -> tuple[ApiToken, str]:
    """A new token for `user` (an integration's bound to the help desk `source`); returns the row and
    the token text (which is not stored)."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=raw[:12], digest=_digest(raw), source=source)
    return token, raw


def token_read(*, raw: str) -> ApiToken | None:
    """The token, with its active user, or None (unknown, revoked, or an inactive user); marks it used."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(digest=_digest(raw), revoked_at=None).first()
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


def token_user(*, raw: str) -> User | None:
    """The active user a token belongs to, or None (unknown, revoked, or an inactive user)."""
    token = token_read(raw=raw)
    return token.user if token is not None else None


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>` for scripts. The token stays on the request as `api_token`:
    an integration's says which help desk it sends tickets for (integrations.api reads it)."""

    def authenticate(self, request, token: str) -> User | None:
        found = token_read(raw=token.strip())
        if found is None:
            return None
        request.user, request.api_token = found.user, found
        return found.user
