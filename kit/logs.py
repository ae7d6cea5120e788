"""Log lines that say which run they belong to, and JSON lines when AGENT_LOG_FORMAT=json.

The loop sets the run's context (run id, ticket, step, worker) in a contextvar
when it takes a run up (`run_logging`, `log_step`); RunContextFilter puts it on
every record logged in that context (operation threads get a copy), and
JsonFormatter writes a record as one JSON object, so that one run's lines can
be found across machines. Messages are the app's own sentences: prompts, tool
results and secrets are never put in them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime


@dataclass(frozen=True)
class RunContext:
    run_id: int
    worker: str
    ticket: str = ""
    step: str = ""


RUN_CONTEXT: ContextVar[RunContext | None] = ContextVar("run_context", default=None)
FIELDS = ("run_id", "ticket", "step", "worker")


@contextmanager
def run_logging(run_id: int, worker: str) -> Iterator[None]:
    """Lines logged within the block (and by the operations it starts) name this run and worker."""
    token = RUN_CONTEXT.set(RunContext(run_id, worker))
    try:
        yield
    finally:
        RUN_CONTEXT.reset(token)


def log_step(step: str, *, ticket: str | None = None) -> None:
    """From here on the run's lines name `step` (and `ticket`, once known)."""
    current = RUN_CONTEXT.get()
    if current is not None:
        RUN_CONTEXT.set(replace(current, step=step, ticket=current.ticket if ticket is None else ticket))


class RunContextFilter(logging.Filter):
    """Adds run_id, ticket, step and worker to a record logged while a run is driven."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = RUN_CONTEXT.get()
        if context is not None:
            record.run_id, record.ticket, record.step, record.worker = (
                context.run_id,
                context.ticket,
                context.step,
                context.worker,
            )
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the run's fields when set, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line |= {name: getattr(record, name) for name in FIELDS if getattr(record, name, None) not in (None, "")}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)
