"""Which workers consumed from the run queue lately: the worker side of `manage.py worker_health`.

A worker records, when it takes a task from the queue (a run, or one of the
watchdog passes beat sends every AGENT_WATCHDOG_INTERVAL seconds), its name and
the time in a Redis sorted set on the broker, one per queue, at most once every
RECORD_EVERY seconds a process: a pipelined ZADD, no database statement. Names
not seen for FORGET_AFTER seconds are dropped by the same pipeline.
"""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

log = logging.getLogger("agentrun")
RECORD_EVERY = 1.0
FORGET_AFTER = 24 * 3600
_last_recorded = 0.0
_client: redis.Redis | None = None


def heartbeat_key() -> str:
    return f"supportagent:consumed:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1)
    return _client


def worker_consumed(worker: str) -> None:
    """`worker` took a task from the queue now. Cheap: most calls return at the first line's test."""
    global _last_recorded
    now = time.time()
    if now - _last_recorded < RECORD_EVERY:
        return
    _last_recorded = now
    key = heartbeat_key()
    try:
        pipe = _redis().pipeline(transaction=False)
        pipe.zadd(key, {worker: now})
        pipe.zremrangebyscore(key, "-inf", now - FORGET_AFTER)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("the worker's heartbeat could not be recorded (%s)", type(exc).__name__)


def workers_consumed_within(seconds: float) -> dict[str, float]:
    """Each worker that consumed from the queue in the last `seconds`, with how long ago."""
    now = time.time()
    seen = _redis().zrangebyscore(heartbeat_key(), now - seconds, "+inf", withscores=True)
    # redis-py types the reply the same with scores or without (members, or pairs, as bytes or text);
    # with withscores=True and no decode_responses it is (bytes, float) pairs.
    return {name.decode(): round(now - at, 1) for name, at in seen}  # type: ignore[misc, union-attr]
