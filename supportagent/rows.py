"""Row reads and writes for the hot path of a run, as statements built once.

The ORM compiles every query it runs: about 0.4 ms of CPU per statement on
these machines, several times what PostgreSQL needs to execute it. A run's
steps issue the same few statements over and over (lock the run, insert a
reservation, update a result), so these helpers build each statement once per
process from the models' metadata and run it through the connection's cursor.
Values go through the fields' own conversions (`pre_save`,
`get_db_prep_save`, the backend's and the field's `from_db` converters), so
SQLite and PostgreSQL receive and return exactly what the ORM would; on
PostgreSQL a conversion that would hand back a plain value unchanged (an int
for an integer column, a str for a text column, an aware datetime) is skipped.

Only plain column access: no signals, no related-object caches beyond what a
caller sets, no inheritance. Anything else goes through the ORM.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from django.db import connections, models, router
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=models.Model)


def _conn(model: type[models.Model], write: bool):
    alias = router.db_for_write(model) if write else router.db_for_read(model)
    return connections[alias]


def _qn(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@lru_cache(maxsize=None)
def _fields(model: type[models.Model], names: tuple[str, ...] | None) -> tuple[models.Field, ...]:
    if names is None:
        return tuple(model._meta.concrete_fields)
    return tuple(model._meta.get_field(name) for name in names)


def _convert(connection, fields: Sequence[models.Field], row: Sequence[Any]) -> list[Any]:
    """The row's values as the ORM would return them: the backend's and the field's converters applied."""
    cache = connection.__dict__.setdefault("_rows_converters", {})
    key = tuple(map(id, fields))  # fields live as long as their models; hashing the fields themselves is slow
    plan = cache.get(key)
    if plan is None:
        cols = [f.get_col(f.model._meta.db_table) for f in fields]
        plan = cache[key] = [
            (col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)) for col in cols
        ]
    values = list(row)
    for i, (col, convs) in enumerate(plan):
        for conv in convs:
            values[i] = conv(values[i], col, connection)
    return values


@lru_cache(maxsize=None)
def _plain_type(field: models.Field) -> type | None:
    """The exact Python type whose values the field hands PostgreSQL unchanged, if any."""
    target = field.target_field if field.is_relation else field
    if isinstance(target, models.BooleanField):
        return bool
    if isinstance(target, (models.IntegerField, models.AutoField)):
        return int
    if isinstance(target, (models.CharField, models.TextField)):
        return str
    if isinstance(target, models.DateTimeField):
        return datetime
    return None


@lru_cache(maxsize=None)
def _write_plan(model: type[models.Model], names: tuple[str, ...] | None,
                add: bool) -> tuple[tuple[models.Field, str, bool, type | None], ...]:
    """Per field: the field, its attribute, whether `pre_save` only reads the attribute, its plain type."""
    plan = []
    for f in _fields(model, names):
        reads = type(f).pre_save is models.Field.pre_save or (
            isinstance(f, models.DateField) and not f.auto_now and not (add and f.auto_now_add)
        )
        plan.append((f, f.attname, reads, _plain_type(f)))
    return tuple(plan)


def _db_values(connection, names: tuple[str, ...] | None, obj: models.Model, add: bool) -> list[Any]:
    """`f.get_db_prep_save(f.pre_save(obj, add))` for each named field (all when None), as the ORM saves them.

    On PostgreSQL the conversion is skipped where it returns the value
    unchanged: None, and a value of exactly the field's plain type (an aware
    datetime for a datetime field).
    """
    postgres = connection.vendor == "postgresql"
    values = []
    for f, attname, reads, plain in _write_plan(type(obj), names, add):
        value = getattr(obj, attname) if reads else f.pre_save(obj, add)
        if postgres and (value is None or (type(value) is plain and (plain is not datetime or value.tzinfo))):
            values.append(value)
        else:
            values.append(f.get_db_prep_save(value, connection))
    return values


def row_get(model: type[M], pk: Any, *, lock: bool = False) -> M | None:
    """The row with primary key `pk` as an instance, or None; `lock` takes its row lock (needs a transaction)."""
    return row_find(model, lock=lock, pk=pk)


def row_find(model: type[M], *, lock: bool = False, **where: Any) -> M | None:
    """The first row whose columns equal `where` (field names; `pk` for the key) as an instance, or None."""
    connection = _conn(model, write=lock)
    if lock and not connection.in_atomic_block:
        raise TransactionManagementError("row_find(lock=True) needs a transaction to hold the lock")
    fields = _fields(model, None)
    keys = tuple(model._meta.pk.name if name == "pk" else name for name in where)
    params = [f.get_db_prep_value(value, connection) for f, value in zip(_fields(model, keys), where.values())]
    sql = _select_sql(model, keys, lock and connection.features.has_select_for_update)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return model.from_db(connection.alias, [f.attname for f in fields], _convert(connection, fields, row))


@lru_cache(maxsize=None)
def _select_sql(model: type[models.Model], keys: tuple[str, ...], lock: bool) -> str:
    sql = f"SELECT {columns(model)} FROM {_qn(model._meta.db_table)} WHERE {_conditions(model, keys)} LIMIT 1"
    return sql + (" FOR UPDATE" if lock else "")


def _conditions(model: type[models.Model], keys: tuple[str, ...]) -> str:
    return " AND ".join(f"{_qn(f.column)} = %s" for f in _fields(model, keys))


def row_insert(obj: models.Model) -> None:
    """INSERT the instance as a new row and set its primary key."""
    model = type(obj)
    connection = _conn(model, write=True)
    returning = connection.features.can_return_columns_from_insert
    sql, values = _insert_statement(connection, obj, returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    if getattr(obj, model._meta.pk.attname) is None:
        setattr(obj, model._meta.pk.attname, pk)
    obj._state.adding, obj._state.db = False, connection.alias


def _insert_statement(connection, obj: models.Model, returning: bool):
    model = type(obj)
    names = None if getattr(obj, model._meta.pk.attname) is not None else _without_key(model)
    return _insert_sql(model, names, returning), _db_values(connection, names, obj, True)


@lru_cache(maxsize=None)
def _without_key(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(f.name for f in _fields(model, None) if not f.primary_key)


@lru_cache(maxsize=None)
def _insert_sql(model: type[models.Model], names: tuple[str, ...] | None, returning: bool) -> str:
    meta = model._meta
    fields = _fields(model, names)
    columns = ", ".join(_qn(f.column) for f in fields)
    sql = f"INSERT INTO {_qn(meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    return sql + (f" RETURNING {_qn(meta.pk.column)}" if returning else "")


def row_update(obj: models.Model, fields: Sequence[str]) -> int:
    """UPDATE the named fields of the instance's row; the number of rows changed (0 or 1)."""
    connection = _conn(type(obj), write=True)
    sql, params = _update_statement(connection, obj, fields, ("pk",))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _update_statement(connection, obj: models.Model, fields: Sequence[str], by: Sequence[str]):
    model = type(obj)
    names, keys = tuple(fields), tuple(model._meta.pk.name if k == "pk" else k for k in by)
    values = _db_values(connection, names, obj, False)
    where = [f.get_db_prep_value(getattr(obj, f.attname), connection) for f in _fields(model, keys)]
    return _update_sql(model, names, keys), [*values, *where]


@lru_cache(maxsize=None)
def _update_sql(model: type[models.Model], names: tuple[str, ...], keys: tuple[str, ...]) -> str:
    sets = ", ".join(f"{_qn(f.column)} = %s" for f in _fields(model, names))
    return f"UPDATE {_qn(model._meta.db_table)} SET {sets} WHERE {_conditions(model, keys)}"


# --- writes sent together ------------------------------------------------------------


class _Batch:
    """Writes held back within `writes_together()`; any other statement on the connection sends them first."""

    def __init__(self, connection):
        self.connection = connection
        self.pending: list[tuple[str, list[Any]]] = []
        self.sending = False

    def before_statement(self, execute, sql, params, many, context):
        if self.pending and not self.sending:
            self.send()
        return execute(sql, params, many, context)

    def take(self) -> list[tuple[str, list[Any]]]:
        """The held writes as statements to send: one on PostgreSQL (data-modifying WITH clauses), one each elsewhere."""
        pending, self.pending = self.pending, []
        if self.connection.vendor == "postgresql" and len(pending) > 1:
            *first, (last_sql, last_params) = pending
            clauses = ", ".join(f"w{i} AS ({sql})" for i, (sql, _) in enumerate(first))
            pending = [(f"WITH {clauses} {last_sql}", [p for _, params in first for p in params] + last_params)]
        return pending

    def send(self) -> None:
        pending = self.take()
        if not pending:
            return
        self.sending = True
        try:
            with self.connection.cursor() as cursor:
                for sql, params in pending:
                    cursor.execute(sql, params)
        finally:
            self.sending = False


@contextmanager
def writes_together(using: str = "default") -> Iterator[None]:
    """Within the block, `row_update_later` and `row_insert_later` hold their writes until the
    block ends or another statement runs on the connection, then send them together. On
    `supportagent.postgres` the block's end hands them to the connection, which sends them in one
    round trip with the transaction's next statement or its COMMIT.

    Must be inside a transaction; the writes' order among themselves is not
    guaranteed, so they must touch different rows.
    """
    connection = connections[using]
    if not connection.in_atomic_block:
        raise TransactionManagementError("writes_together() needs a transaction")
    batch = _Batch(connection)
    previous = connection.__dict__.get("_rows_batch")
    connection._rows_batch = batch
    try:
        with connection.execute_wrapper(batch.before_statement):
            yield
            hold = getattr(connection, "hold_writes", None)
            if hold is None:
                batch.send()
        if hold is not None:
            hold(batch.take())
    finally:
        connection._rows_batch = previous


def _hold(connection, sql: str, params: list[Any]) -> None:
    batch = connection.__dict__.get("_rows_batch")
    if batch is None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    else:
        batch.pending.append((sql, params))


def execute_later(sql: str, params: Sequence[Any], *, using: str = "default") -> None:
    """A hand-written write (no result read), held like the others within `writes_together()`."""
    _hold(connections[using], sql, list(params))


def row_update_later(obj: models.Model, fields: Sequence[str], *, by: Sequence[str] = ("pk",)) -> None:
    """UPDATE the named fields of the row whose `by` fields equal the instance's, within `writes_together()`
    when the block's writes are sent (at once, outside one)."""
    connection = _conn(type(obj), write=True)
    _hold(connection, *_update_statement(connection, obj, fields, by))


def row_insert_later(obj: models.Model) -> None:
    """INSERT the instance as a new row, within `writes_together()` when the block's writes are sent
    (at once, outside one). Its primary key is not read back."""
    connection = _conn(type(obj), write=True)
    _hold(connection, *_insert_statement(connection, obj, False))
    obj._state.adding, obj._state.db = False, connection.alias


def rows_select(fields: Sequence[models.Field], sql: str, params: Sequence[Any]) -> list[list[Any]]:
    """Rows of a hand-written SELECT whose columns are `fields` (of any models), converted as the ORM would."""
    with _conn(fields[0].model, write=False).cursor() as cursor:
        cursor.execute(sql, params)
        return rows_convert(fields, cursor.fetchall())


@lru_cache(maxsize=None)
def field(model: type[models.Model], name: str) -> models.Field:
    return model._meta.get_field(name)


def rows_convert(fields: Sequence[models.Field], rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows read by hand-written SQL whose columns hold values of `fields`, converted as the ORM would."""
    connection = _conn(fields[0].model, write=False)
    return [_convert(connection, fields, row) for row in rows]


def row_from(model: type[M], values: Sequence[Any], *, alias: str = "default") -> M:
    """An instance of `model` from the values of all its concrete columns in order, as read by the cursor."""
    fields = _fields(model, None)
    return model.from_db(alias, [f.attname for f in fields], _convert(connections[alias], fields, values))


@lru_cache(maxsize=None)
def columns(model: type[models.Model], prefix: str = "") -> str:
    """All concrete columns of `model`, in order, for a SELECT list (qualified with `prefix`)."""
    return ", ".join(f"{prefix}{_qn(f.column)}" for f in _fields(model, None))


@lru_cache(maxsize=None)
def width(model: type[models.Model]) -> int:
    return len(_fields(model, None))


@lru_cache(maxsize=None)
def table(model: type[models.Model]) -> str:
    return _qn(model._meta.db_table)


@lru_cache(maxsize=None)
def column(model: type[models.Model], name: str) -> str:
    return _qn(model._meta.get_field(name).column)
