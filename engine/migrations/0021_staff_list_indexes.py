"""Indexes for the staff lists at a year of data (bench/pages_bench.py, 100,000 runs on PostgreSQL).

* A run by (purpose, created_at, id): the run list and `GET /api/runs` newest first, and the dashboard's
  periods. Without it the run list's first page sorted every run (730 ms at 100,000).
* A run by model_name: the run list's filter by model lists the names in one probe each
  (engine.selectors.run_model_names) where `SELECT DISTINCT` read every run (200 ms at 100,000).
* A packet by (review_state, created_at, id), and by its place in the queue of every state (pending first),
  created_at, id: the review queue's order, which sorted every packet (1.2 s for every state at 100,000);
  and by (created_at, id), the review history's order (its packets', then theirs), which sorted them too (400 ms).
* PostgreSQL only: the trigrams of a run's subject, for the review queue's search (staff.queue), which also
  looks in the subject as the run was shown it. A run's subject never changes after its insert, so a step's
  update of the run stays a HOT update; the insert adds one GIN entry (to its pending list).
"""

from django.db import migrations, models

RUN_SUBJECT_TRIGRAMS = "run_subject_trgm"


def add_subject_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        q = schema_editor.quote_name
        # UPPER(subject::text): the expression Django's icontains compares, so that the planner uses the index
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {q(RUN_SUBJECT_TRIGRAMS)} ON {q('agentrun_run')} "
            f"USING gin ((UPPER({q('subject')}::text)) gin_trgm_ops)"
        )


def remove_subject_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(RUN_SUBJECT_TRIGRAMS)}")


class Migration(migrations.Migration):

    dependencies = [
        ('agentrun', '0020_packetreview_in_order'),
        ('tickets', '0015_ticket_search_trigrams'),  # pg_trgm (tickets 0014) and the tickets' own trigrams
    ]

    operations = [
        migrations.AddIndex(
            model_name='reviewpacket',
            index=models.Index(fields=['review_state', 'created_at', 'id'], name='packet_queue'),
        ),
        migrations.AddIndex(
            model_name='reviewpacket',
            index=models.Index(fields=['created_at', 'id'], name='packet_created'),
        ),
        migrations.AddIndex(
            model_name='reviewpacket',
            index=models.Index(models.Case(models.When(review_state='pending', then=models.Value(0)), default=models.Value(1), output_field=models.IntegerField()), models.F('created_at'), models.F('id'), name='packet_pending_first'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['purpose', 'created_at', 'id'], name='run_by_purpose_created'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['model_name'], name='run_model_name'),
        ),
        migrations.RunPython(add_subject_index, remove_subject_index),
    ]
