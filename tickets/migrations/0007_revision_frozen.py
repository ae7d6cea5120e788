"""A published revision's document, number and body never change: the database refuses an UPDATE of them.

Evidence cites a revision ("DOC-RENAME-2 r1") and a reviewer opens it; were its
text edited in place, the packet and the revision would disagree and the
re-check would see nothing. New text is a new revision
(tickets.services.document_publish); only `is_current` moves. The model's
`save()` refuses first with a clear message; this trigger refuses every other
writer too (a queryset's `update()`, plain SQL). An UPDATE that writes the same
values passes: PostgreSQL's search-vector trigger of a document's title (0002)
sets `body = body`.

On PostgreSQL the error is a restrict_violation (SQLSTATE 23001), on SQLite a
constraint error: both reach Django as IntegrityError. SQLite drops a table's
triggers when a later migration rebuilds the table; tests/tickets/test_models.py
checks the trigger is there.
"""
from django.db import migrations

MESSAGE = "a published revision never changes: publish a new revision instead"

POSTGRESQL_FORWARD = f"""
CREATE FUNCTION tickets_revision_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER tickets_revision_frozen
    BEFORE UPDATE OF body, number, document_id ON tickets_documentrevision
    FOR EACH ROW WHEN (OLD.body IS DISTINCT FROM NEW.body OR OLD.number IS DISTINCT FROM NEW.number
                       OR OLD.document_id IS DISTINCT FROM NEW.document_id)
    EXECUTE FUNCTION tickets_revision_frozen();
"""

POSTGRESQL_BACKWARD = """
DROP TRIGGER tickets_revision_frozen ON tickets_documentrevision;
DROP FUNCTION tickets_revision_frozen();
"""

SQLITE_FORWARD = f"""
CREATE TRIGGER tickets_revision_frozen
    BEFORE UPDATE OF body, number, document_id ON tickets_documentrevision
    FOR EACH ROW WHEN OLD.body IS NOT NEW.body OR OLD.number IS NOT NEW.number
                      OR OLD.document_id IS NOT NEW.document_id
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;
"""

SQLITE_BACKWARD = "DROP TRIGGER tickets_revision_frozen;"

STATEMENTS = {
    "postgresql": (POSTGRESQL_FORWARD, POSTGRESQL_BACKWARD),
    "sqlite": (SQLITE_FORWARD, SQLITE_BACKWARD),
}


def forward(apps, schema_editor):
    if schema_editor.connection.vendor in STATEMENTS:
        schema_editor.execute(STATEMENTS[schema_editor.connection.vendor][0])


def backward(apps, schema_editor):
    if schema_editor.connection.vendor in STATEMENTS:
        schema_editor.execute(STATEMENTS[schema_editor.connection.vendor][1])


class Migration(migrations.Migration):

    dependencies = [
        ("tickets", "0006_revision_search_vector_field"),
    ]

    operations = [migrations.RunPython(forward, backward)]
