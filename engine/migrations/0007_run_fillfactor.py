"""Leave room on each page of the run table, so that a step's update stays on its page.

Every step rewrites its run's row. PostgreSQL can then keep the new version on
the same page and skip the table's indexes (a heap-only update) when the page
has room and no indexed column changed; only the two steps that change the
status (start and stop) must touch the indexes. With pages packed full, most
steps found no room and wrote a new entry in each of the run's indexes.
Other databases have no such setting; nothing changes there.
"""
from django.db import migrations

FILLFACTOR = 50  # percent of each page that inserts fill; updates use the rest


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'ALTER TABLE "agentrun_run" SET (fillfactor = {FILLFACTOR})')


def pack_full(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute('ALTER TABLE "agentrun_run" RESET (fillfactor)')


class Migration(migrations.Migration):

    dependencies = [
        ('agentrun', '0006_fewer_hot_path_indexes'),
    ]

    operations = [migrations.RunPython(leave_room, pack_full)]
