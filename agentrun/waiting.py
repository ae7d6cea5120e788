"""Waiting for slow I/O at most so long.

The operation runs in a daemon thread; the loop waits for it at most
`timeout` seconds and moves on. A result that arrives later goes nowhere: it
can never authorize another action.
"""
from __future__ import annotations

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

    def target() -> None:
        try:
            box.append(Finished(fn()))
        except BaseException as exc:  # handed to the loop, which records it
            box.append(Raised(exc))
        finally:
            connections.close_all()  # this thread's own connections
            done.set()

    threading.Thread(target=target, name="agentrun-operation", daemon=True).start()
    if done.wait(max(timeout, 0.0)):
        return box[0]
    return TimedOut()
