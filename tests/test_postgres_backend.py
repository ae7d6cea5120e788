"""supportagent.postgres: BEGIN travels with the first statement and held writes with COMMIT,
and a transaction means exactly what it means with Django's own backend.

Checked from a second connection: what it can see, and which rows it can lock.
"""
from __future__ import annotations

import psycopg
import pytest
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
