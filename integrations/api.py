"""/api/ endpoints that bring tickets in from a help desk (thin: checks, then tickets.services.ticket_intake)."""

from __future__ import annotations

from typing import Any

import pydantic
from django.conf import settings
from django.utils import timezone
from ninja import Field, Router, Schema
from ninja import Status as Reply
from ninja.errors import ValidationError
from ninja.openapi.schema import REF_TEMPLATE
from ninja.schema import NinjaGenerateJsonSchema

from engine.models import ApiToken
from engine.permissions import require
from integrations.zendesk import SIGNATURE_HEADER, TIMESTAMP_HEADER, zendesk_refusal
from kit.apierrors import ERRORS, ErrorOut
from kit.limits import body_size_check
from kit.refused import Refused
from tickets.intake import BodyRefused, HelpDesk, TicketIn, body_json
from tickets.services import Intake, IntakeError, intake_problem_record, ticket_intake

router = Router(tags=["intake"])


class TicketOut(Schema):
    ref: str
    source: str
    external_id: str
    account: str
    session: str
    subject: str
    created: bool
    updated: list[str]
    message: int | None = Field(description="The number of the message this request added (null: none added).")
    outdated: bool = Field(description="The request's updated_at is older than the ticket's: no field changed.")


def _reply(data: TicketIn, requested_by, *, source: str, body: bytes) -> Reply:
    try:
        result: Intake = ticket_intake(data=data, requested_by=requested_by)
    except IntakeError as exc:
        raise _kept(Refused(exc.code, exc.message, exc.status), source=source, body=body) from None
    ticket = result.ticket
    out: dict[str, Any] = {
        "ref": ticket.ref,
        "source": ticket.source,
        "external_id": ticket.external_id,
        "account": ticket.account.code,
        "session": data.session.ref,
        "subject": ticket.subject,
        "created": result.created,
        "updated": list(result.updated),
        "message": result.message.number if result.message else None,
        "outdated": result.outdated,
    }
    return Reply(201 if result.created else 200, out)


# The body is read in the view, after the token or the signature has proved the sender, so that a body
# intake refuses (a key twice, deep nesting, a shape that does not fit) is kept as an intake problem;
# the docs show its shape, TicketIn.
_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TicketIn"}}},
    }
}
API = "api"  # IntakeProblem.source of a request to POST /api/tickets


def _components(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """`model`'s schema and those it refers to, as ninja writes a payload's into the OpenAPI components."""
    schema = model.model_json_schema(ref_template=REF_TEMPLATE, schema_generator=NinjaGenerateJsonSchema)
    return {**schema.pop("$defs", {}), model.__name__: schema}


# What `_BODY` refers to; the API's root adds it to its OpenAPI components (no operation takes it as a payload).
BODY_SCHEMAS = _components(TicketIn)


@router.post("/tickets", response={200: TicketOut, 201: TicketOut, ERRORS: ErrorOut}, openapi_extra=_BODY)
def intake_ticket(request):
    """Create a ticket from a help desk (201), or find the one with this source and external id (200) and
    bring its subject, body and requester up to date; a `comment` becomes the ticket's next message.
    The same request again changes nothing, and one older than the ticket's `updated_at` changes no field.
    Integration users' tokens, each bound to its help desk
    (`manage.py create_api_token NAME --integration --source SLUG`): a ticket of another source is refused."""
    require(request.auth, "tickets.add_ticket")
    require(request.auth, "tickets.change_ticket")
    token = getattr(request, "api_token", None)  # set by staff.auth.BearerToken; None for the admin's session
    try:
        source = _token_source(token)
        data = _parse(request.body)
        if data.source != source:
            raise Refused(
                "source_mismatch",
                f"This token sends tickets for {source}; the ticket's source is {data.source}. "
                f"Use a token made with --source {data.source}.",
                403,
            )
    except (Refused, ValidationError) as exc:
        raise _kept(exc, source=API, body=request.body) from None
    return _reply(data, request.auth, source=API, body=request.body)


def _token_source(token: ApiToken | None) -> str:
    """The help desk the token is bound to. A token made before tokens were bound (or the admin's session)
    is refused: which help desk's sessions it may touch is not ours to guess."""
    if token is None or not token.source:
        raise Refused(
            "token_not_bound",
            "This token is bound to no help desk. Make one that is, "
            "`manage.py create_api_token NAME --integration --source SLUG` (e.g. --source zendesk), "
            "and revoke this one.",
            403,
        )
    return token.source


@router.post(
    "/intake/zendesk", auth=None, response={200: TicketOut, 201: TicketOut, ERRORS: ErrorOut}, openapi_extra=_BODY
)
def intake_zendesk(request):
    """`POST /api/tickets` for a Zendesk webhook: no token, the request carries Zendesk's signature
    (`X-Zendesk-Webhook-Signature`, keyed with INTAKE_ZENDESK_SECRET) instead. Nothing is accepted
    while INTAKE_ZENDESK_SECRET is unset."""
    secret = settings.INTAKE_ZENDESK_SECRET
    if not secret:
        # Never open: with no secret no request can prove it is Zendesk's (401, like a bad signature).
        raise Refused("intake_not_configured", "Zendesk intake is off: INTAKE_ZENDESK_SECRET is not set.", 401)
    body_size_check(request)
    refusal = zendesk_refusal(
        secret=secret,
        timestamp=request.headers.get(TIMESTAMP_HEADER, ""),
        signature=request.headers.get(SIGNATURE_HEADER, ""),
        body=request.body,
        now=timezone.now(),
    )
    if refusal is not None:
        raise Refused("bad_signature", f"Not a signed Zendesk request: {refusal}.", 401)
    try:
        data = _parse(request.body)
        if data.source != HelpDesk.ZENDESK:
            raise ValidationError([{"loc": ["body", "source"], "msg": "must be 'zendesk' on this endpoint"}])
    except (Refused, ValidationError) as exc:
        raise _kept(exc, source=HelpDesk.ZENDESK, body=request.body) from None
    return _reply(data, None, source=HelpDesk.ZENDESK, body=request.body)


def _parse(body: bytes) -> TicketIn:
    """The body as a TicketIn: malformed JSON, a key twice or deep nesting is a 400, a body that does
    not fit a 422 (as ninja's own)."""
    try:
        raw = body_json(body)
    except BodyRefused as exc:
        raise Refused("malformed_json", str(exc), 400) from None
    try:
        data = TicketIn.model_validate(raw)
    except pydantic.ValidationError as exc:
        errors = [{"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in exc.errors()]
        raise ValidationError(errors) from None
    return data


def _kept(exc: Refused | ValidationError, *, source: str, body: bytes) -> Exception:
    """`exc`, once the refused request is in the intake problems list (its sender proved who it is)."""
    if isinstance(exc, Refused):
        code, reason = exc.code, exc.message
    else:
        code, reason = "invalid_input", "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors)
    intake_problem_record(source=source, body=body, code=code, reason=reason)
    return exc
