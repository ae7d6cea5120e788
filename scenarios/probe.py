"""Counting, outside the database, how often a scenario's model and tools were really called.

Scenario runs may name a `probe` key prefix: every model request and every
dispatch then increments a Redis counter, so tests of duplicate deliveries
and racing workers can count operations at the backend itself.
"""

from __future__ import annotations

from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def probe_count(prefix: str | None, what: str) -> None:
    if prefix:
        _client(settings.AGENT_PROBE_REDIS_URL).incr(f"{prefix}:{what}")


def probe_read(prefix: str, what: str) -> int:
    value = _client(settings.AGENT_PROBE_REDIS_URL).get(f"{prefix}:{what}")
    return int(value or 0)
