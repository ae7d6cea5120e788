"""The statements a run's steps send as written here; every other read and write is the ORM's.

Five, each for a reason the ORM cannot meet in one statement or for a cost the
benchmark (bench/loop_bench.py, a J-42 run: 3 model requests, 2 dispatches)
measured on the hot path; each docstring gives its reason and its gain.
Tables and columns are named from the models' `_meta`, and values come back
through the fields' own converters and `Model.from_db`, as the ORM reads them.
A step's writes (section 4) are the same statements on PostgreSQL and SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.db import connections, models, transaction
from django.db.transaction import TransactionManagementError

from engine.budgets import Tally
from engine.models import ModelRequest, Observation, PacketReview, ReviewPacket, Run, ToolAttempt, column_field
from tickets.models import CustomerSession, Evidence, Ticket
from tools.registry import TOOLS

M = TypeVar("M", bound=models.Model)


# --- 1. the run, locked, with what a step reads about it ------------------------------


def run_locked(*, run_id: int, ticket: bool = False) -> Run:
    """The run, row-locked until the transaction ends (needs one), with its customer session (a
    session can be verified or revoked while a run goes on), with `ticket` its ticket, and its
    tally (how many request and attempt rows it has, per tool too), so that a step numbers what
    it reserves without reading again; a run with no attempt yet gets an empty `attempts_listed`,
    which the steps driving it keep for its packet (engine.steps).

    One statement. The ORM can say it only with a grouped, coalesced Subquery
    per count, compiled anew every time; this statement is built once per
    process. Measured (J-42 runs, 100 each, alternating, on the loaded 2-core
    test machine): 3.9 ms a run faster than
    `select_for_update(of=("self",)).select_related(...).annotate(<5 Subquery counts>)`.
    """
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise TransactionManagementError("run_locked() needs a transaction to hold the lock")
    with connection.cursor() as cursor:
        cursor.execute(_locked_sql(connection.features.has_select_for_update, ticket), [*TOOLS, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    run, rest = _instance(Run, row, connection)
    run.session, rest = _instance(CustomerSession, rest, connection)
    if ticket:
        run.ticket, rest = _instance(Ticket, rest, connection)
    requests, attempts, *per_tool = rest
    run.tally = Tally(requests, attempts, tuple(zip(TOOLS, per_tool, strict=True)))
    if attempts == 0:  # the steps that drive it on list each attempt they add (engine.steps)
        run.attempts_listed = []
    return run


@cache
def _locked_sql(lock: bool, ticket: bool) -> str:
    run_fk, tool = _col(ToolAttempt, "run"), _col(ToolAttempt, "tool")
    attempts = f"SELECT COUNT(*) FROM {_table(ToolAttempt)} t WHERE t.{run_fk} = r.id"
    counts = (
        f"(SELECT COUNT(*) FROM {_table(ModelRequest)} q WHERE q.{_col(ModelRequest, 'run')} = r.id), ({attempts})"
        + "".join(f", ({attempts} AND t.{tool} = %s)" for _ in TOOLS)
    )
    return (
        f"SELECT {_columns(Run, 'r')}, {_columns(CustomerSession, 's')}"
        + (f", {_columns(Ticket, 't')}" if ticket else "")
        + f", {counts} FROM {_table(Run)} r JOIN {_table(CustomerSession)} s ON s.id = r.{_col(Run, 'session')}"
        + (f" JOIN {_table(Ticket)} t ON t.id = r.{_col(Run, 'ticket')}" if ticket else "")
        + " WHERE r.id = %s"
        + (" FOR UPDATE OF r" if lock else "")
    )


# --- 2. the run locked again by the step after -----------------------------------------


_RELOCKED = ("version", "lease_owner", "status", "cancel_requested")


def run_relocked(*, run: Run) -> Run:
    """`run` as the previous step left it, row-locked again (needs a transaction) and brought up to date.

    Only the columns others may change while a worker holds the run are read: its
    version, lease and status (which every other writer changes together with the
    version), the cancellation flag, and its customer session. When the version,
    lease or status differ, the run is read whole (`run_locked`). The run's tally
    stays as the previous step left it: only the holder adds request and attempt rows.

    One statement, a fifth of the columns `run_locked` reads and no counts; the
    ticket read by the first step stays with the run. Measured (as for
    `run_locked`; 5 of a J-42 run's 6 steps take the run up this way): 3.8 ms a
    run faster, and 2 statements fewer, than reading the run whole at each step.
    """
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(_relocked_sql(connection.features.has_select_for_update), [run.pk])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run.pk}")
    version, lease_owner, status, cancel_requested = _converted(Run, _RELOCKED, row[:4], connection)
    if (version, lease_owner, status) != (run.version, run.lease_owner, run.status):
        return run_locked(run_id=run.pk)
    run.fields_read(cancel_requested=cancel_requested)  # changed by another, not by the step
    session = tuple(row[4:])
    if run.__dict__.get("_session_row") != session:  # changed (or not seen): a new instance
        run.session, _ = _instance(CustomerSession, session, connection)
        run._session_row = session
    return run


@cache
def _relocked_sql(lock: bool) -> str:
    return (
        f"SELECT {', '.join('r.' + _col(Run, name) for name in _RELOCKED)}, {_columns(CustomerSession, 's')}"
        f" FROM {_table(Run)} r JOIN {_table(CustomerSession)} s ON s.id = r.{_col(Run, 'session')}"
        " WHERE r.id = %s" + (" FOR UPDATE OF r" if lock else "")
    )


# --- 3. what a model request is shown ---------------------------------------------------


def context_rows(*, ticket_id: int, run_id: int, last_notes: int = 5):
    """The ticket's evidence by number, the run's attempts by sequence (each with the number of the
    evidence it produced) and the run's last few notes to the model, oldest first, each part as
    plain tuples: `(number, tool, args, content, source_ref, truncated)`, `(tool, args, outcome,
    evidence number or None)`, `text`.

    One statement in three parts (UNION ALL): the ORM would send three (it
    unions a sliced queryset on some databases only). Read before each model
    request. Measured (as for `run_locked`): a J-42 run sends 6 statements
    fewer (22, not 28) and takes 5.3 ms less than with three ORM reads.
    """
    connection = connections["default"]
    with connection.cursor() as cursor:
        cursor.execute(_context_sql(last_notes), [ticket_id, run_id, run_id, Observation.Kind.DISCARDED])
        rows = cursor.fetchall()
    evidence, attempts, notes = [], [], []
    for part, _, number, tool, args, text, source_ref, truncated in rows:
        if part == 0:
            evidence.append(
                tuple(
                    _converted(
                        Evidence,
                        ("number", "tool", "args", "content", "source_ref", "truncated"),
                        (number, tool, args, text, source_ref, truncated),
                        connection,
                    )
                )
            )
        elif part == 1:
            (args,) = _converted(ToolAttempt, ("args",), (args,), connection)
            attempts.append((tool, args, text, number))
        else:
            notes.append(text)
    return tuple(evidence), tuple(attempts), tuple(notes)


@cache
def _context_sql(last_notes: int) -> str:
    e, a, n = (
        (lambda name: _col(Evidence, name)),
        (lambda name: _col(ToolAttempt, name)),
        (lambda name: _col(Observation, name)),
    )
    return (
        f"SELECT 0, e.{e('number')}, e.{e('number')}, e.{e('tool')}, e.{e('args')}, e.{e('content')},"
        f" e.{e('source_ref')}, e.{e('truncated')} FROM {_table(Evidence)} e WHERE e.{e('ticket')} = %s"
        f" UNION ALL SELECT 1, a.{a('seq')}, x.{e('number')}, a.{a('tool')}, a.{a('args')}, a.{a('outcome')},"
        f" NULL, NULL FROM {_table(ToolAttempt)} a LEFT JOIN {_table(Evidence)} x ON x.{e('id')} = a.{a('evidence')}"
        f" WHERE a.{a('run')} = %s"
        f" UNION ALL SELECT 2, n.{n('id')}, NULL, NULL, NULL, n.{n('text')}, NULL, NULL FROM"
        f" (SELECT {n('id')}, {n('text')} FROM {_table(Observation)} WHERE {n('run')} = %s AND {n('kind')} <> %s"
        f" ORDER BY {n('id')} DESC LIMIT {int(last_notes)}) n"
        " ORDER BY 1, 2"
    )


# --- 4. a step's writes, sent together -------------------------------------------------------


class StepWrites:
    """The writes of one step, held as the step makes them and sent together as it ends.

    Made where a step's transaction starts (`with transaction.atomic(), StepWrites() as writes:`),
    handed to the functions that write, and sent when the block ends without an error (or
    earlier by `send`, for a read that must see them). Reads never see a held write: a function
    that reads what this step wrote calls `send` first (engine.packets does, when it reads the attempts).

    Every write is a plain INSERT or UPDATE, named from the models' documented `_meta` API
    (`db_table`, `get_field`, each field's `column`) and given values as the ORM's `save`
    sends them (`pre_save`, then `get_db_prep_save`); the text is built once per shape.
    The same statements go to PostgreSQL and SQLite, in the order they were held. PostgreSQL
    gets them as one: data-modifying WITH clauses, run on one snapshot, so the writes of one
    send must touch different rows. SQLite, which allows only SELECTs in WITH, gets them one
    by one, and runs the step as PostgreSQL does.

    A step writes its run, the row of the operation it settles and the row of the one it
    reserves: one round trip instead of three; each write sent on its own would make a J-42
    run (3 model requests, 2 dispatches) send 36 statements, not 22. Measured (bench/loop_bench.py,
    2 runs each, alternated with the connection-held writes this replaced, on the shared 2-core
    machine under load from other sessions; medians): 22 statements and 2.0 commits a cycle
    both; 63.7 ms a run against 96.5 ms (the spread, 29 to 102 ms, is the machine's, not the
    change's); client CPU 21.0 ms a run against 27.3 ms.
    """

    def __init__(self) -> None:
        if not transaction.get_connection().in_atomic_block:
            raise TransactionManagementError("a step's writes need the step's transaction")
        self.statements: list[tuple[str, list[Any]]] = []

    def __enter__(self) -> StepWrites:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is None:  # a failed step's writes roll back with it: nothing to send
            self.send()

    def insert(self, obj: models.Model) -> None:
        """`obj.save(force_insert=True)`, held (its primary key, when the database numbers it, is not read back)."""
        model = type(obj)
        fields = [f for f in model._meta.concrete_fields if not (f.primary_key and getattr(obj, f.attname) is None)]
        connection = transaction.get_connection()
        params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
        self.add_statement(_insert_sql(model, tuple(f.name for f in fields)), params)

    def save(self, obj: models.Model, fields: Sequence[str]) -> None:
        """`obj.save(update_fields=fields)`, held; nothing when `fields` is empty."""
        if fields:
            model = type(obj)
            self.update(
                model, {"pk": obj.pk}, **{name: column_field(model, name).pre_save(obj, False) for name in fields}
            )

    def update(self, model: type[models.Model], where: dict[str, Any], **values: Any) -> None:
        """`model.objects.filter(**where).update(**values)`, held: `where` compares plain columns,
        each with one value or, given a list, with any of its values (`__in`)."""
        shape = tuple((name, len(value) if isinstance(value, list) else None) for name, value in where.items())
        keys = [
            (name, item) for name, value in where.items() for item in (value if isinstance(value, list) else [value])
        ]
        connection = transaction.get_connection()
        params = [
            column_field(model, name).get_db_prep_save(value, connection) for name, value in [*values.items(), *keys]
        ]
        self.add_statement(_update_sql(model, tuple(values), shape), params)

    def add_statement(self, sql: str, params: Sequence[Any]) -> None:
        """Hold a statement of this module (section 5): an INSERT or UPDATE, with its parameters."""
        self.statements.append((sql, list(params)))

    def send(self) -> None:
        """Send what is held, in order: one statement on PostgreSQL, one each elsewhere."""
        statements, self.statements = self.statements, []
        if not statements:
            return
        connection = transaction.get_connection()
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(*_joined(statements))
                return
            for sql, params in statements:
                cursor.execute(sql, params)


def _joined(statements: list[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    """The statements as one: all but the last as data-modifying WITH clauses of the last."""
    *first, (sql, params) = statements
    if not first:
        return sql, params
    clauses = ", ".join(f"w{i} AS ({s})" for i, (s, _) in enumerate(first))
    return f"WITH {clauses} {sql}", [p for _, ps in first for p in ps] + params


@cache
def _insert_sql(model: type[models.Model], names: tuple[str, ...]) -> str:
    columns = ", ".join(_quote(column_field(model, name).column) for name in names)
    return f"INSERT INTO {_table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(names))})"


@cache
def _update_sql(model: type[models.Model], names: tuple[str, ...], where: tuple[tuple[str, int | None], ...]) -> str:
    """`where`: (name, None) compares with one value; (name, n) with any of n values."""
    sets = ", ".join(f"{_quote(column_field(model, name).column)} = %s" for name in names)
    tests = " AND ".join(
        f"{_quote(column_field(model, name).column)} " + ("= %s" if n is None else f"IN ({', '.join(['%s'] * n)})")
        for name, n in where
    )
    return f"UPDATE {_table(model)} SET {sets} WHERE {tests}"


# --- 5. superseded packets ------------------------------------------------------------------


def packets_supersede(*, run: Run, note: str, now, writes: StepWrites) -> None:
    """The ticket's other pending packets leave the queue: each gets a system entry ("superseded",
    no reviewer) in its review history and the review state superseded.

    Two writes, held with the step's. The history entries are an INSERT ...
    SELECT, which the ORM cannot say: it would read the pending packets first,
    one statement more in every run's last step. Both read the pending packets
    as they were before the step (one snapshot on PostgreSQL; on SQLite the
    entries are written first) and touch only pending packets: running them
    again changes nothing.
    """
    pending = [ReviewPacket.ReviewState.PENDING, run.ticket_id, run.pk]
    writes.add_statement(_supersede_history_sql(), [PacketReview.Decision.SUPERSEDED, note, now, *pending])
    writes.add_statement(_supersede_sql(), [ReviewPacket.ReviewState.SUPERSEDED, *pending])


@cache
def _supersede_history_sql() -> str:
    p, r, v = (
        (lambda name: _col(ReviewPacket, name)),
        (lambda name: _col(Run, name)),
        (lambda name: _col(PacketReview, name)),
    )
    columns = ", ".join(
        v(name)
        for name in (
            "packet",
            "reviewer",
            "decision",
            "note",
            "created_at",
            "acknowledged_changed_evidence",
            "changed_evidence",
            "reason",
            "reply",
        )
    )
    return (
        f"INSERT INTO {_table(PacketReview)} ({columns}) SELECT p.{p('id')}, NULL, %s, %s, %s, FALSE, '[]', '', ''"
        f" FROM {_table(ReviewPacket)} p, {_table(Run)} r WHERE p.{p('review_state')} = %s"
        f" AND r.{r('id')} = p.{p('run')} AND r.{r('ticket')} = %s AND p.{p('run')} <> %s"
    )


@cache
def _supersede_sql() -> str:
    # Filtered on the packet's own columns, as the history entries are: after waiting for another
    # step's lock, PostgreSQL checks a packet is still pending (a join would be read once, up front,
    # and lock the packets in another order than a concurrent step).
    p, r = (lambda name: _col(ReviewPacket, name)), (lambda name: _col(Run, name))
    return (
        f"UPDATE {_table(ReviewPacket)} SET {p('review_state')} = %s WHERE {p('review_state')} = %s"
        f" AND {p('run')} IN (SELECT {r('id')} FROM {_table(Run)} WHERE {r('ticket')} = %s) AND {p('run')} <> %s"
    )


# --- names and values as the ORM has them ----------------------------------------------------


def _table(model: type[models.Model]) -> str:
    return _quote(model._meta.db_table)


def _col(model: type[models.Model], name: str) -> str:
    return _quote(column_field(model, name).column)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@cache
def _columns(model: type[models.Model], alias: str) -> str:
    return ", ".join(f"{alias}.{_quote(f.column)}" for f in model._meta.concrete_fields)


def _instance(model: type[M], row: Sequence[Any], connection) -> tuple[M, Sequence[Any]]:
    """An instance of `model` from the first of `row`'s values (all its columns, in order), and the rest."""
    fields = model._meta.concrete_fields
    values = _converted(model, tuple(f.name for f in fields), row[: len(fields)], connection)
    return model.from_db(connection.alias, [f.attname for f in fields], values), row[len(fields) :]


def _converted(model: type[models.Model], names: tuple[str, ...], values: Sequence[Any], connection) -> list[Any]:
    """The values as the ORM would return them: the backend's and the fields' converters applied."""
    converted = list(values)
    for i, (col, converters) in enumerate(_converters(model, names, connection.alias)):
        for convert in converters:
            converted[i] = convert(converted[i], col, connection)
    return converted


@cache
def _converters(model: type[models.Model], names: tuple[str, ...], alias: str):
    connection = connections[alias]
    cols = [column_field(model, name).get_col(model._meta.db_table) for name in names]
    return tuple((col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)) for col in cols)
