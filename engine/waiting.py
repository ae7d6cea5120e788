"""Waiting for slow I/O at most so long.

The operation runs in a daemon thread (reused once idle); the loop waits for
it at most `timeout` seconds and moves on. A result that arrives later goes nowhere: it
can never authorize another action.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections


@dataclass(frozen=True)
class Finished:
    value: Any


@dataclass(frozen=True)
class Raised:
    error: BaseException


@dataclass(frozen=True)
class TimedOut:
    pass


Result = Finished | Raised | TimedOut


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Result:
    box: list[Result] = []
    done = threading.Event()
    runner = _runner()
    with _idle_lock:
        _busy.add(runner)
    # The operation runs in the caller's context (its log lines name the caller's run).
    runner.jobs.put((contextvars.copy_context().run, fn, box, done))
    if done.wait(max(timeout, 0.0)):
        return box[0]
    return TimedOut()


class _Runner(threading.Thread):
    """A daemon thread that runs operations one at a time, and offers itself again when idle.

    Starting a thread and its database connection state for every operation
    costs more than most operations; an idle runner is reused instead. A runner
    still busy with an operation the loop gave up on is simply not offered
    until that operation returns, so a stuck call never holds up the next.
    """

    def __init__(self) -> None:
        super().__init__(name="agentrun-operation", daemon=True)
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            in_context, fn, box, done = self.jobs.get()
            try:
                box.append(Finished(in_context(fn)))
            except BaseException as exc:  # handed to the loop, which records it
                box.append(Raised(exc))
            finally:
                connections.close_all()  # this thread's own connections go back (to the pool, if any)
                done.set()
            with _idle_lock:
                _busy.discard(self)
                _settled.notify_all()
                if len(_idle) >= MAX_IDLE_RUNNERS:
                    return
                _idle.append(self)


MAX_IDLE_RUNNERS = 64
_idle: list[_Runner] = []
_busy: set[_Runner] = set()
_idle_lock = threading.Lock()
_settled = threading.Condition(_idle_lock)


def operations_settle(timeout: float) -> bool:
    """Wait until no operation is running, including those the loop stopped waiting for. False on timeout."""
    with _settled:
        return _settled.wait_for(lambda: not _busy, timeout)


def _runner() -> _Runner:
    with _idle_lock:
        if _idle:
            return _idle.pop()
    runner = _Runner()
    runner.start()
    return runner
