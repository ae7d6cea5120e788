"""The watchdog inside the web process, for the embedded default.

Without CELERY_BROKER_URL runs are driven inline and no Celery beat sends
watchdog passes, so a run waiting for an approval would outlive its deadline.
Here a daemon thread runs the same pass (engine.tasks.watchdog) every
AGENT_WATCHDOG_INTERVAL seconds. It is started once per process by the WSGI
entry point (supportagent/wsgi.py, which `runserver` loads too), never by
management commands or tests. Several processes may each run one: a pass
locks each run it ends and skips a run another holds.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connections

from engine.tasks import watchdog

log = logging.getLogger("agentrun")


class WatchdogThread(threading.Thread):
    """Runs a watchdog pass every `interval` seconds until stopped."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="agentrun-watchdog", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                watchdog()
            except Exception:  # the next pass tries again; a stopped timer would let runs outlive their deadline
                log.exception("the in-process watchdog pass failed; trying again in %s s", self.interval)
            finally:
                connections.close_all()  # this thread's connections go back between passes

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


def embedded_watchdog_stop() -> None:
    """Stop this process's watchdog thread, if one runs."""
    global _running
    with _lock:
        running, _running = _running, None
    if running is not None:
        running.stop()
