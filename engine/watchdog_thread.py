"""The watchdog as a thread of the process: in every worker, and in the web process of the embedded default.

A daemon thread runs the watchdog's pass (engine.tasks.watchdog) every
AGENT_WATCHDOG_INTERVAL seconds, so that runs end on time and orphaned runs are
requeued with nothing but the database: no Celery beat, and no queue a backlog
could hold a pass up in (beat's passes went through the runs' queue and expired
behind a backlog, while a dead worker's runs outlived their deadlines).

* Each worker starts one when it is ready (supportagent.celery). The workers share
  one pass per interval through the broker (`BrokerWatch.elected`); a worker that
  cannot reach the broker makes its own passes, since the database is what a pass needs.
  When the broker comes back, or restarted meanwhile (`BrokerWatch.came_back`), a
  pass at once requeues the queued runs whose message may be lost, without waiting for
  AGENT_QUEUED_GRACE_SECONDS.
* Without CELERY_BROKER_URL runs are driven inline and there are no workers, so the
  WSGI entry point (supportagent/wsgi.py, which `runserver` loads too) starts one in the
  web process; never management commands or tests.

Several processes may each run one: a pass locks each run it ends and skips a run another holds.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from django.conf import settings
from django.db import connections

from engine.tasks import watchdog

log = logging.getLogger("agentrun")


class BrokerWatch(Protocol):
    """What a worker's watchdog asks of the broker (supportagent.broker.RedisWatch)."""

    def elected(self, seconds: float) -> bool:
        """Whether this process makes the fleet's pass for the next `seconds` (True when the broker cannot tell)."""
        ...

    def came_back(self) -> bool:
        """Whether the broker answers again after it did not, or restarted, since last asked."""
        ...


class WatchdogThread(threading.Thread):
    """Runs a watchdog pass every `interval` seconds until stopped; with a `broker`, only the passes it elects
    this process for, and one at once when it came back."""

    def __init__(self, interval: float, broker: BrokerWatch | None = None) -> None:
        super().__init__(name="agentrun-watchdog", daemon=True)
        self.interval = interval
        self.broker = broker
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.tick()
            except Exception:  # the next pass tries again; a stopped timer would let runs outlive their deadline
                log.exception("the in-process watchdog pass failed; trying again in %s s", self.interval)
            finally:
                connections.close_all()  # this thread's connections go back between passes

    def tick(self) -> None:
        if self.broker is None:
            watchdog()
            return
        if self.broker.came_back():
            log.warning("the broker is back (or restarted): runs whose message may be lost are queued again now")
            watchdog(messages_lost=True)
        elif self.broker.elected(self.interval):
            watchdog()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped.set()
        self.join(timeout)


_running: WatchdogThread | None = None
_lock = threading.Lock()


def embedded_watchdog_start() -> WatchdogThread | None:
    """Start this process's watchdog thread when no broker is configured (else beat runs the passes).

    Idempotent: a second call returns the thread already running.
    """
    global _running
    if settings.CELERY_BROKER_URL:
        return None
    with _lock:
        if _running is None or not _running.is_alive():
            _running = WatchdogThread(settings.AGENT_WATCHDOG_INTERVAL)
            _running.start()
        return _running


def worker_watchdog_start(broker: BrokerWatch) -> WatchdogThread:
    """Start this worker process's watchdog thread (idempotent, as embedded_watchdog_start)."""
    global _running
    with _lock:
        if _running is None or not _running.is_alive():
            _running = WatchdogThread(settings.AGENT_WATCHDOG_INTERVAL, broker)
            _running.start()
        return _running


def embedded_watchdog_stop() -> None:
    """Stop this process's watchdog thread, if one runs."""
    global _running
    with _lock:
        running, _running = _running, None
    if running is not None:
        running.stop()
