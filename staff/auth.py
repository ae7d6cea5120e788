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


def token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the token text (which is not stored)."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=raw[:12], digest=_digest(raw))
    return token, raw


def token_user(*, raw: str) -> User | None:
    """The active user a token belongs to, or None (unknown, revoked, or an inactive user)."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(digest=_digest(raw), revoked_at=None).first()
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>` for scripts."""

    def authenticate(self, request, token: str) -> User | None:
        user = token_user(raw=token.strip())
        if user is not None:
            request.user = user
        return user
