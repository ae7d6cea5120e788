"""The packet keeps its run's start and purpose (engine.packets writes them from now on); packets already
written get them from their runs here."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def _from_runs(apps, schema_editor):
    ReviewPacket = apps.get_model("agentrun", "ReviewPacket")
    Run = apps.get_model("agentrun", "Run")
    run = Run.objects.filter(pk=OuterRef("run_id"))
    ReviewPacket.objects.update(
        run_created_at=Subquery(run.values("created_at")[:1]), run_purpose=Subquery(run.values("purpose")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [("agentrun", "0022_packet_decision_figures")]

    operations = [
        migrations.AddField(
            model_name="reviewpacket",
            name="run_created_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="reviewpacket",
            name="run_purpose",
            field=models.CharField(
                choices=[("investigation", "Investigation"), ("evaluation", "evaluation of a candidate model")],
                default="investigation",
                max_length=16,
            ),
        ),
        migrations.RunPython(_from_runs, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="reviewpacket",
            index=models.Index(fields=["run_purpose", "run_created_at"], name="packet_by_run_created"),
        ),
    ]
