"""Indexes for counting the review queue at a year of data (bench/pages_bench.py, 100,000 runs on PostgreSQL).

* A run by (purpose, id): the lists of what investigations produced (the review queue, approvals) join their
  runs by id for the purpose, which the count of a page's 10,001 packets read from the run table (80 ms for
  every state at 100,000 runs); merged with this index alone, 8 ms. Neither column changes after the insert,
  so a step's update of the run stays a HOT update.
* A packet by (review_state, run): the queue's count of one state takes its packets' runs from it, where it
  read every packet of the state from the table first (the rejected ones: 150 ms at 100,000 packets; 17 ms).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agentrun", "0023_packet_run_created"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="reviewpacket",
            index=models.Index(fields=["review_state", "run"], name="packet_state_run"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["purpose", "id"], name="run_by_purpose_id"),
        ),
    ]
