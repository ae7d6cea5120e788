"""PostgreSQL with transactions that cost no round trip of their own.

Stock Django starts a transaction by turning psycopg's autocommit off. psycopg
then sends BEGIN before the first statement and waits for its answer, and at
the end sends COMMIT on its own and waits again. A step of a run is a short
transaction of two or three statements, so those two waits are a third of its
round trips to the server.

Here psycopg stays in autocommit and the wrapper opens the transaction itself:

* BEGIN goes out in one pipeline with the transaction's first statement;
* writes handed over with `hold_writes()` (see `supportagent.rows.writes_together`)
  go out in one pipeline with COMMIT, or with the next statement if one comes first.

The server runs the same `BEGIN ... COMMIT` block, statement for statement, in
the same order. An error in any part of a pipeline is raised as the error of
the statement (or the commit) it was sent with, and Django rolls back as usual.
Every statement still goes through Django's cursor and its execute wrappers;
only BEGIN and COMMIT are sent directly, as psycopg sends them for stock Django.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db.backends.postgresql import base
from django.db.backends.utils import CursorWrapper as _CursorWrapper
from django.db.backends.utils import debug_transaction
from django.db.transaction import TransactionManagementError
from psycopg import IsolationLevel


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._begin_pending = False  # a transaction Django has opened that has not reached the server yet
        self._held: list[tuple[str, Sequence[Any]]] = []
        self._tx_cursor = None  # sends BEGIN and COMMIT; made once per psycopg connection

    # --- Django's transaction hooks ----------------------------------------------

    def _set_autocommit(self, autocommit: bool) -> None:
        with self.wrap_database_errors:
            if not self.connection.autocommit:
                self.connection.autocommit = True  # psycopg never opens transactions here
        self._begin_pending = not autocommit

    def _commit(self) -> None:
        held, self._held = self._held, []
        begin, self._begin_pending = self._begin_pending, False
        try:
            if not held:
                # psycopg sends COMMIT, or nothing when the transaction never reached the server.
                return super()._commit()
            if self.connection is not None:
                with debug_transaction(self, "COMMIT"), self.wrap_database_errors:
                    with self.connection.pipeline():
                        self._send_prelude(begin, held)
                        self._command("COMMIT")
        finally:
            self._begin_pending = not self.autocommit  # still inside Django's non-autocommit mode: a new one

    def _rollback(self) -> None:
        self._held, self._begin_pending = [], False
        try:
            super()._rollback()  # psycopg sends ROLLBACK unless the server is idle
        finally:
            self._begin_pending = not self.autocommit

    def _close(self) -> None:
        self._held, self._begin_pending, self._tx_cursor = [], False, None
        super()._close()

    # --- held writes -----------------------------------------------------------------

    def hold_writes(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Send `statements` with the transaction's next statement, or with its COMMIT.

        Needs a transaction: a rollback drops them, as it would have undone them.
        """
        if self.get_autocommit():
            raise TransactionManagementError("hold_writes() needs a transaction")
        self._held.extend(statements)

    def run_with_prelude(self, execute: Callable[[], Any], *, pipelined: bool = True) -> Any:
        """Run `execute` (one statement) after what must precede it: BEGIN, when the
        transaction has not reached the server, and the held writes; all in one pipeline
        unless `pipelined` is false (a pipeline takes one command per statement, and SQL
        without parameters may hold several, as Django's flush and migrations do)."""
        held, self._held = self._held, []
        begin, self._begin_pending = self._begin_pending, False
        with self.wrap_database_errors:
            with self.connection.pipeline():
                self._send_prelude(begin, held)
                if pipelined:
                    return execute()
        return execute()

    def _send_prelude(self, begin: bool, held: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """BEGIN (when the transaction has not reached the server), then the held writes, into the open pipeline."""
        if begin:
            self._command(self._begin_sql())
        if held:
            with self.cursor() as cursor:  # through Django's cursor: execute wrappers see them
                for sql, params in held:
                    cursor.execute(sql, params)

    def _command(self, sql: str) -> None:
        cursor = self._tx_cursor
        if cursor is None or cursor.connection is not self.connection:  # a connection from the pool
            cursor = self._tx_cursor = self.connection.cursor()
        cursor.execute(sql)

    def _begin_sql(self) -> str:
        level = self.settings_dict["OPTIONS"].get("isolation_level")
        if level is None:
            return "BEGIN"
        return f"BEGIN ISOLATION LEVEL {IsolationLevel(level).name.replace('_', ' ')}"

    # --- cursors ---------------------------------------------------------------------

    def make_cursor(self, cursor):
        return CursorWrapper(cursor, self)

    def make_debug_cursor(self, cursor):
        return CursorDebugWrapper(cursor, self)


class _Prelude:
    """A statement takes BEGIN and the held writes with it, when there are any."""

    db: DatabaseWrapper

    def _execute(self, sql, params, *ignored_wrapper_args):
        if self.db._begin_pending or self.db._held:
            return self.db.run_with_prelude(
                lambda: super(_Prelude, self)._execute(sql, params, *ignored_wrapper_args), pipelined=params is not None
            )
        return super()._execute(sql, params, *ignored_wrapper_args)

    def _executemany(self, sql, param_list, *ignored_wrapper_args):
        if self.db._begin_pending or self.db._held:
            return self.db.run_with_prelude(
                lambda: super(_Prelude, self)._executemany(sql, param_list, *ignored_wrapper_args)
            )
        return super()._executemany(sql, param_list, *ignored_wrapper_args)


class CursorWrapper(_Prelude, _CursorWrapper):
    pass


class CursorDebugWrapper(_Prelude, base.CursorDebugWrapper):
    pass
