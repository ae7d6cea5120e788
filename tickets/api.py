"""/api/ endpoints for the knowledge base. Each one goes through agentrun.staff."""
from __future__ import annotations

from ninja import Path, Router, Schema
from ninja import Status as Reply

from agentrun.api import ERRORS, ErrorOut
from agentrun.staff import do_document_publish

from .documents import CODE_MAX, CODE_PATTERN, Change, DocumentText

router = Router(tags=["documents"])


class PublishOut(Schema):
    code: str
    revision: str
    change: Change
    new_revision: bool


@router.put("/documents/{code}", response={frozenset({200, 201}): PublishOut, ERRORS: ErrorOut})
def put_document(request, payload: DocumentText, code: str = Path(..., pattern=CODE_PATTERN, max_length=CODE_MAX)):
    """Publish a revision of document `code` (201 when the document is new). The same text, title and
    visibility again make no revision (`new_revision` false)."""
    outcome = do_document_publish(user=request.auth, code=code, text=payload)
    out = {"code": outcome.code, "revision": outcome.revision, "change": outcome.change,
           "new_revision": outcome.new_revision}
    return Reply(201 if outcome.change is Change.ADDED else 200, out)
