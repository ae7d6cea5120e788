"""Rows sent to PostgreSQL with COPY, in the columns the models declare.

A row is a dict by column attribute name (`ticket_id`, not `ticket`); a column it leaves out takes its
field's default, so a field added to a model with a default needs no change here. JSON columns are
sent as their JSON text. Measured on the 2-core test machine (100,000 runs, every table): COPY writes
the seed's rows about 14 times as fast as `bulk_create` in batches of 5,000 (see `seed_scale`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection, models
from psycopg import sql

Row = dict[str, Any]


class JsonText(str):
    """A JSON column's value already written as JSON (a value many rows share, written once)."""


class TableCopy:
    """The rows of one model held until `flush`, which sends them with one COPY."""

    def __init__(self, model: type[models.Model]):
        fields = [f for f in model._meta.concrete_fields]
        self.model = model
        self.names = [f.attname for f in fields]
        self.defaults = [_default(f) for f in fields]
        self.json = [isinstance(f, models.JSONField) for f in fields]
        self.statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(model._meta.db_table), sql.SQL(", ").join(sql.Identifier(f.column) for f in fields)
        )
        self.rows: list[Row] = []
        self.written = 0

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def extend(self, rows: Iterable[Row]) -> None:
        self.rows.extend(rows)

    def flush(self) -> int:
        """Send the rows held (inside the caller's transaction); returns how many."""
        if not self.rows:
            return 0
        columns = list(zip(self.names, self.defaults, self.json, strict=True))
        with connection.cursor() as cursor, cursor.cursor.copy(self.statement) as copy:
            for row in self.rows:
                values = [row.get(name, default) for name, default, _ in columns]
                if any(value is _MISSING for value in values):
                    missing = [name for name, value in zip(self.names, values, strict=True) if value is _MISSING]
                    raise ValueError(f"a {self.model.__name__} row has no {', '.join(missing)}, which have no default")
                copy.write_row([_value(v, is_json) for v, (_, _, is_json) in zip(values, columns, strict=True)])
        sent, self.rows = len(self.rows), []
        self.written += sent
        return sent


_MISSING = object()


def _default(field: models.Field) -> Any:
    """The value a row that leaves `field` out takes, as the ORM's insert would give it ("" for text); an id,
    and a column that may not be null and has no default, must be given."""
    value = None if field.primary_key else field.get_default()
    return _MISSING if value is None and not field.null else value


def _value(value: Any, is_json: bool) -> Any:
    if is_json and value is not None and not isinstance(value, JsonText):
        return json.dumps(value, ensure_ascii=False)
    return value
