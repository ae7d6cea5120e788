"""The packet keeps its decision's reason, its first review's time and the change to a kept reply beside its
review state (staff.reviews writes them with each review from now on); packets already reviewed get them from
their reviews here."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from rapidfuzz.distance import Levenshtein

BATCH = 2000


def _from_reviews(apps, schema_editor):
    ReviewPacket = apps.get_model("agentrun", "ReviewPacket")
    PacketReview = apps.get_model("agentrun", "PacketReview")
    by_people = PacketReview.objects.filter(packet=OuterRef("pk"), reviewer__isnull=False)
    deciding = by_people.order_by("-created_at", "-id")
    ReviewPacket.objects.filter(review_state__in=["accepted", "rejected"]).update(
        first_reviewed_at=Subquery(by_people.order_by("created_at", "id").values("created_at")[:1])
    )
    ReviewPacket.objects.filter(review_state="rejected").update(review_reason=Subquery(deciding.values("reason")[:1]))
    accepted = (
        ReviewPacket.objects.filter(review_state="accepted")
        .exclude(reply="")
        .annotate(kept=Subquery(deciding.values("reply")[:1]))
        .values_list("pk", "reply", "kept")
    )
    changed = []
    for pk, suggested, kept in accepted.iterator(chunk_size=BATCH):
        if kept:
            changed.append(
                ReviewPacket(pk=pk, reply_change=Levenshtein.normalized_distance(suggested.strip(), kept.strip()))
            )
        if len(changed) == BATCH:
            ReviewPacket.objects.bulk_update(changed, ["reply_change"])
            changed = []
    ReviewPacket.objects.bulk_update(changed, ["reply_change"])


class Migration(migrations.Migration):
    dependencies = [("agentrun", "0021_staff_list_indexes")]

    operations = [
        migrations.AddField(
            model_name="reviewpacket",
            name="review_reason",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The reason the deciding rejection gave; empty otherwise.",
                max_length=24,
            ),
        ),
        migrations.AddField(
            model_name="reviewpacket",
            name="first_reviewed_at",
            field=models.DateTimeField(blank=True, help_text="When a person first reviewed it.", null=True),
        ),
        migrations.AddField(
            model_name="reviewpacket",
            name="reply_change",
            field=models.FloatField(
                blank=True,
                help_text="Accepted with its suggested reply kept: how far the kept reply is from the suggestion "
                "(edit distance over the longer length); empty otherwise.",
                null=True,
            ),
        ),
        migrations.RunPython(_from_reviews, migrations.RunPython.noop),
    ]
