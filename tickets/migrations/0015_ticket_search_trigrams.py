"""Trigram indexes for the ticket list's search (and the review queue's, which is the same), PostgreSQL only.

The search looks for each term anywhere in a ticket's reference, subject and description (`icontains`, which
PostgreSQL writes `UPPER(column::text) LIKE UPPER('%term%')`), and in the source of the evidence a packet
cites. Without an index that is a scan of every ticket: at 100,000 runs (72,780 tickets) a search of the
ticket list took 1.9 s (bench/pages_bench.py). A GIN index of the trigrams of the same UPPER(...) expression
answers the LIKE from the index (pg_trgm, migration 0014). SQLite keeps its scan: the indexes are not made
there, and the models do not name them (a model's index is made on every database).
"""

from django.db import migrations

INDEXES = [  # (table, column, index name)
    ("tickets_ticket", "ref", "ticket_ref_trgm"),
    ("tickets_ticket", "subject", "ticket_subject_trgm"),
    ("tickets_ticket", "body", "ticket_body_trgm"),
    ("tickets_evidence", "source_ref", "evidence_source_ref_trgm"),
]


def add_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        q = schema_editor.quote_name
        for table, column, name in INDEXES:
            # UPPER(column::text): the expression Django's icontains compares, so that the planner uses the index
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {q(name)} ON {q(table)} USING gin ((UPPER({q(column)}::text)) gin_trgm_ops)"
            )


def remove_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for _, _, name in INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0014_search_quality"),
    ]

    operations = [migrations.RunPython(add_indexes, remove_indexes)]
