"""On PostgreSQL, each document revision keeps its search vector, kept up to date by triggers.

`search_docs` used to build the vector of every current revision for every
search: its cost grew with the documents, and the query was planned afresh
each time. The vector (the document's title weighing A, the revision's body B,
English configuration) is now a column of the revision with a GIN index over
the current revisions; triggers compute it whenever a revision is written and
whenever its document's title changes, whatever writes them (the admin, the
ORM, plain SQL). The column is PostgreSQL's alone: the models do not know it,
and other databases search without it (see tickets.selectors.documents_search).
"""
from django.db import migrations

FORWARD = """
ALTER TABLE tickets_documentrevision ADD COLUMN search_vector tsvector;

CREATE FUNCTION tickets_revision_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector :=
        setweight(to_tsvector('english'::regconfig,
                              COALESCE((SELECT title FROM tickets_document WHERE id = NEW.document_id), '')), 'A')
        || setweight(to_tsvector('english'::regconfig, COALESCE(NEW.body, '')), 'B');
    RETURN NEW;
END
$$;
CREATE TRIGGER tickets_revision_search_vector
    BEFORE INSERT OR UPDATE OF body, document_id ON tickets_documentrevision
    FOR EACH ROW EXECUTE FUNCTION tickets_revision_search_vector();

CREATE FUNCTION tickets_document_title_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tickets_documentrevision SET body = body WHERE document_id = NEW.id;  -- the trigger above recomputes
    RETURN NULL;
END
$$;
CREATE TRIGGER tickets_document_title_search_vector
    AFTER UPDATE OF title ON tickets_document
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title)
    EXECUTE FUNCTION tickets_document_title_search_vector();

UPDATE tickets_documentrevision SET body = body;
CREATE INDEX tickets_revision_search ON tickets_documentrevision USING gin (search_vector) WHERE is_current;
"""

BACKWARD = """
DROP TRIGGER tickets_document_title_search_vector ON tickets_document;
DROP FUNCTION tickets_document_title_search_vector();
DROP TRIGGER tickets_revision_search_vector ON tickets_documentrevision;
DROP FUNCTION tickets_revision_search_vector();
ALTER TABLE tickets_documentrevision DROP COLUMN search_vector;
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):

    dependencies = [
        ("tickets", "0001_initial"),
    ]

    operations = [migrations.RunPython(forward, backward)]
