"""The models learn the search vector column, so that the ORM searches with it.

On PostgreSQL the column exists since 0002, kept current by its triggers: only
the models' state changes. Elsewhere the column is added, and stays empty
(other databases search without it).
"""
from django.contrib.postgres.search import SearchVectorField
from django.db import migrations


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.add_field(apps.get_model("tickets", "DocumentRevision"), _field())


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.remove_field(apps.get_model("tickets", "DocumentRevision"), _field())


def _field() -> SearchVectorField:
    field = SearchVectorField(null=True, editable=False)
    field.set_attributes_from_name("search_vector")
    return field


class Migration(migrations.Migration):

    dependencies = [
        ("tickets", "0005_ticket_evaluation_copy"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="documentrevision",
                    name="search_vector",
                    field=SearchVectorField(editable=False, null=True),
                ),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
