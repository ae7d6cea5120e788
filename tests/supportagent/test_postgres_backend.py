"""supportagent.postgres: BEGIN travels with the first statement and held writes with COMMIT,
and a transaction means exactly what it means with Django's own backend.

Checked from a second connection: what it can see, and which rows it can lock.
"""
from __future__ import annotations

import psycopg
import pytest
import django.db as django_db
from django.db import IntegrityError, ProgrammingError, connection, connections, transaction

from supportagent.rows import column, execute_later, table, writes_together
from tickets.models import Account

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the backend is PostgreSQL's"),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def other():
    """A second session on the test database, outside Django."""
    s = connection.settings_dict
    conn = psycopg.connect(dbname=s["NAME"], host=s["HOST"] or None, port=s["PORT"] or None,
                           user=s["USER"] or None, password=s["PASSWORD"] or None, autocommit=True)
    yield conn
    conn.close()


def _visible(other, code: str) -> bool:
    return other.execute(f"SELECT 1 FROM {table(Account)} WHERE code = %s", [code]).fetchone() is not None


def _lockable(other, pk: int) -> bool:
    """Whether the second session can lock the row right now (it does not wait)."""
    try:
        with other.transaction():
            other.execute(f"SELECT 1 FROM {table(Account)} WHERE id = %s FOR UPDATE NOWAIT", [pk])
        return True
    except psycopg.errors.LockNotAvailable:
        return False


def _account(code: str) -> Account:
    return Account.objects.create(code=code, name=code, workspace="w")


def _rename_later(account: Account, name: str) -> None:
    execute_later(f"UPDATE {table(Account)} SET {column(Account, 'name')} = %s WHERE id = %s", [name, account.pk])


def test_the_backend_is_in_use():
    assert type(connections["default"]).__module__ == "supportagent.postgres.base"


def test_a_lock_taken_by_the_first_statement_is_held_until_commit(other):
    account = _account("lock")
    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)  # the statement BEGIN travels with
        assert not _lockable(other, account.pk)
    assert _lockable(other, account.pk)


def test_writes_are_seen_by_others_only_after_commit(other):
    with transaction.atomic():
        _account("later")
        assert not _visible(other, "later")
    assert _visible(other, "later")


def test_a_statement_outside_a_transaction_commits_at_once(other):
    _account("now")
    assert _visible(other, "now")


def test_held_writes_go_with_commit(other):
    account = _account("held")
    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)
        with writes_together():
            _rename_later(account, "renamed")
        assert other.execute(f"SELECT name FROM {table(Account)} WHERE id = %s", [account.pk]).fetchone()[0] == "held"
    assert other.execute(f"SELECT name FROM {table(Account)} WHERE id = %s", [account.pk]).fetchone()[0] == "renamed"


def test_held_writes_go_before_the_next_statement():
    account = _account("before")
    with transaction.atomic():
        with writes_together():
            _rename_later(account, "first")
        assert Account.objects.get(pk=account.pk).name == "first"  # the read sees the held write


def test_a_rollback_drops_held_writes_and_earlier_statements(other):
    account = _account("drop")
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            _account("drop-2")
            with writes_together():
                _rename_later(account, "never")
            raise RuntimeError("the step failed")
    assert not _visible(other, "drop-2")
    assert Account.objects.get(pk=account.pk).name == "drop"


def test_a_failing_held_write_fails_the_commit_and_undoes_the_transaction(other):
    _account("taken")
    account = _account("mine")
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            _account("with-it")
            with writes_together():
                execute_later(f"UPDATE {table(Account)} SET code = %s WHERE id = %s", ["taken", account.pk])
    assert not _visible(other, "with-it")
    assert Account.objects.get(pk=account.pk).code == "mine"  # and the connection still works
    assert not connection.in_atomic_block


def test_a_failing_first_statement_raises_its_own_error_and_rolls_back(other):
    with pytest.raises(ProgrammingError):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT no_such_column FROM tickets_account")
    _account("after-error")
    assert _visible(other, "after-error")


def test_a_failing_first_statement_sent_with_begin_raises_its_own_error_and_rolls_back(other):
    with pytest.raises(ProgrammingError):
        with transaction.atomic():
            with connection.cursor() as cursor:  # with parameters: in one pipeline with BEGIN
                cursor.execute("SELECT no_such_column FROM tickets_account WHERE id = %s", [1])
    _account("after-pipelined-error")
    assert _visible(other, "after-pipelined-error")
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_failed_savepoint_keeps_the_outer_transaction(other):
    with transaction.atomic():
        _account("outer")
        with pytest.raises(IntegrityError):
            with transaction.atomic():
                _account("outer")  # duplicate code
        _account("outer-2")
    assert _visible(other, "outer") and _visible(other, "outer-2")


def test_an_empty_transaction_sends_nothing():
    statements = []
    with connection.execute_wrapper(lambda execute, sql, *args: statements.append(sql) or execute(sql, *args)):
        with transaction.atomic():
            pass
    assert statements == []
    assert connection.connection is None or connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_transactions_follow_each_other_on_one_connection(other):
    for code in ("one", "two", "three"):
        with transaction.atomic():
            _account(code)
        assert _visible(other, code)
        assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_transaction_after_the_connection_went_back_to_the_pool(other):
    with transaction.atomic():
        _account("before-pool")
    connection.close()  # back to the pool; the next transaction may get another connection
    with transaction.atomic():
        Account.objects.select_for_update().get(code="before-pool")
        with writes_together():
            _rename_later(Account.objects.get(code="before-pool"), "after-pool")
    assert other.execute(f"SELECT name FROM {table(Account)} WHERE code = %s", ["before-pool"]).fetchone()[0] == "after-pool"


# --- a lost connection: agentrun.loop.on_fresh_connection -----------------------------


def _try_counting(body):
    """on_fresh_connection over `body(retry)` in a transaction; the tries it made (and its error, if any)."""
    from agentrun.loop import on_fresh_connection

    tries = []

    def call(retry):
        tries.append(retry)
        with transaction.atomic():
            body(retry)

    try:
        on_fresh_connection(call)
    except Exception as error:  # the test reads which error ended the tries
        return tries, error
    return tries, None


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_transaction_whose_session_is_terminated_is_tried_again_on_a_new_connection(other):
    pids = []

    def body(retry):
        pids.append(_backend_pid())
        if not retry:  # what a restart or a failover does
            other.execute("SELECT pg_terminate_backend(%s)", [pids[-1]])
        Account.objects.create(code=f"LOST{len(pids)}", name="x")

    tries, error = _try_counting(body)

    assert (tries, error) == ([False, True], None)
    assert pids[0] != pids[1]
    assert not _visible(other, "LOST1") and _visible(other, "LOST2")


def test_a_failing_statement_or_a_statement_timeout_is_not_tried_again(other):
    def duplicate(retry):
        Account.objects.create(code="TWICE", name="x")
        Account.objects.create(code="TWICE", name="x")

    def too_slow(retry):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 50")
            cursor.execute("SELECT pg_sleep(1)")

    tries, error = _try_counting(duplicate)
    assert tries == [False] and isinstance(error, IntegrityError)
    tries, error = _try_counting(too_slow)
    assert tries == [False] and isinstance(error.__cause__, psycopg.errors.QueryCanceled)


def test_a_connection_that_stays_lost_stops_after_three_tries(other):
    def body(retry):
        other.execute("SELECT pg_terminate_backend(%s)", [_backend_pid()])
        Account.objects.create(code="NEVER", name="x")

    tries, error = _try_counting(body)

    assert tries == [False, True, True]
    assert isinstance(error, django_db.OperationalError)
    assert not _visible(other, "NEVER")
