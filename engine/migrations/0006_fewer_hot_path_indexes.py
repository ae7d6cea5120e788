"""Drop the indexes that duplicate others on the tables every step writes.

`run.status` is served by the (status, deadline_at) index; the run of a model
request or a tool attempt by its unique (run, seq) constraint. Only the indexes
go: the foreign keys stay as they are (no table is checked again).
"""
import django.db.models.deletion
from django.db import migrations, models

INDEXES = [  # (name, table, column)
    ("agentrun_run_status_b1c15718", "agentrun_run", "status"),
    ("agentrun_modelrequest_run_id_29eda589", "agentrun_modelrequest", "run_id"),
    ("agentrun_toolattempt_run_id_629e786e", "agentrun_toolattempt", "run_id"),
]
LIKE_INDEX = "agentrun_run_status_b1c15718_like"  # PostgreSQL's second index on a varchar column


def drop_indexes(apps, schema_editor):
    for name in [LIKE_INDEX, *(name for name, _, _ in INDEXES)]:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def restore_indexes(apps, schema_editor):
    for name, table, column in INDEXES:
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")')
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{LIKE_INDEX}" ON "agentrun_run" ("status" varchar_pattern_ops)'
        )


class Migration(migrations.Migration):

    dependencies = [
        ('agentrun', '0005_budget_defaults'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, restore_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name='modelrequest',
                    name='run',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='model_request_rows', to='agentrun.run'),
                ),
                migrations.AlterField(
                    model_name='run',
                    name='status',
                    field=models.CharField(choices=[('QUEUED', 'Queued'), ('RUNNING', 'Running'), ('WAITING_APPROVAL', 'Waiting Approval'), ('COMPLETED', 'Completed'), ('NEEDS_HELP', 'Needs Help'), ('DEADLINE', 'Deadline'), ('MODEL_LIMIT', 'Model Limit'), ('TOOL_LIMIT', 'Tool Limit'), ('TOKEN_LIMIT', 'Token Limit'), ('COST_LIMIT', 'Cost Limit'), ('NO_PROGRESS', 'No Progress'), ('INVALID_OR_FORBIDDEN', 'Invalid Or Forbidden'), ('MODEL_ERROR', 'Model Error'), ('CANCELLED', 'Cancelled')], default='QUEUED', max_length=24),
                ),
                migrations.AlterField(
                    model_name='toolattempt',
                    name='run',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='attempts', to='agentrun.run'),
                ),
            ],
        ),
    ]
