"""The knowledge base's search, alike on both databases (tickets.search).

* Search synonyms: the operator's groups of words that mean the same.
* PostgreSQL: pg_trgm, so a title close to the query despite a typo is found (its word similarity).
* SQLite: an FTS5 table of the current revisions (title and body, Porter-stemmed), rowid the revision's id,
  kept current by triggers whatever writes the revisions or a document's title, in place of a scan of
  every revision in Python. A revision enters when it is current and leaves when it is not (its body never
  changes: migration 0007).
"""

import kit.lines
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE tickets_revision_fts USING fts5(title, body, tokenize = 'porter unicode61')",
    """CREATE TRIGGER tickets_revision_fts_insert AFTER INSERT ON tickets_documentrevision WHEN NEW.is_current
    BEGIN
        INSERT INTO tickets_revision_fts (rowid, title, body)
            SELECT NEW.id, title, NEW.body FROM tickets_document WHERE id = NEW.document_id;
    END""",
    """CREATE TRIGGER tickets_revision_fts_current AFTER UPDATE OF is_current ON tickets_documentrevision
    WHEN NEW.is_current IS NOT OLD.is_current
    BEGIN
        DELETE FROM tickets_revision_fts WHERE rowid = OLD.id;
        INSERT INTO tickets_revision_fts (rowid, title, body)
            SELECT NEW.id, title, NEW.body FROM tickets_document WHERE id = NEW.document_id AND NEW.is_current;
    END""",
    """CREATE TRIGGER tickets_revision_fts_delete AFTER DELETE ON tickets_documentrevision
    BEGIN
        DELETE FROM tickets_revision_fts WHERE rowid = OLD.id;
    END""",
    """CREATE TRIGGER tickets_document_fts_title AFTER UPDATE OF title ON tickets_document
    WHEN NEW.title IS NOT OLD.title
    BEGIN
        UPDATE tickets_revision_fts SET title = NEW.title
            WHERE rowid IN (SELECT id FROM tickets_documentrevision WHERE document_id = NEW.id AND is_current);
    END""",
    """INSERT INTO tickets_revision_fts (rowid, title, body)
        SELECT r.id, d.title, r.body FROM tickets_documentrevision r JOIN tickets_document d ON d.id = r.document_id
        WHERE r.is_current""",
]

SQLITE_BACKWARD = [
    "DROP TRIGGER tickets_document_fts_title",
    "DROP TRIGGER tickets_revision_fts_delete",
    "DROP TRIGGER tickets_revision_fts_current",
    "DROP TRIGGER tickets_revision_fts_insert",
    "DROP TABLE tickets_revision_fts",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0013_session_source_and_automatic_caps"),
    ]

    operations = [
        migrations.CreateModel(
            name="SearchSynonym",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "words",
                    models.CharField(
                        help_text="Two or more words or phrases that mean the same, comma-separated: 2FA, two-step login.",
                        max_length=500,
                        unique=True,
                        validators=[kit.lines.validate_single_line],
                    ),
                ),
            ],
            options={
                "verbose_name": "search synonym",
                "ordering": ["words"],
            },
        ),
        TrigramExtension(),  # PostgreSQL only (nothing elsewhere)
        migrations.RunPython(forward, backward),
    ]
