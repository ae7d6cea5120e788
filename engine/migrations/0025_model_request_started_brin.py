"""A BRIN index of when model requests started, PostgreSQL only, for the dashboard's per-tool rates.

The rates count the tools each run of a period proposed, from its model requests; with no index by time that
read every model request there is (1.2 s of the 30-day dashboard's 2.3 s at 1,000,000 runs, 2.7 million model
requests; bench/pages_bench.py). A run's model requests start after it was created, so those of a period's
runs started after the period began: staff.dashboard reads only those. The requests are written in the order
they start, so a BRIN index (a few pages, next to nothing to keep up as rows are added) finds them. SQLite
keeps its scan: the index is not made there, and the model does not name it.
"""

from django.db import migrations

NAME = "model_request_started_brin"


def add_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        q = schema_editor.quote_name
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {q(NAME)} ON {q('agentrun_modelrequest')} USING brin (started_at)"
        )


def remove_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(NAME)}")


class Migration(migrations.Migration):
    dependencies = [("agentrun", "0024_list_count_indexes")]

    operations = [migrations.RunPython(add_index, remove_index)]
