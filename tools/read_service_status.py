"""read_service_status: a service's status and its recent incidents (CONFORMANCE §4).

AGENT_SERVICE_STATUS_BACKEND chooses the backend at each call: our own Service table, or a
Statuspage summary (AGENT_SERVICE_STATUS_URL, `/api/v2/summary.json`) whose component named like
the service gives the status. Anyone may ask; a service that is not listed is an error that a
re-check reads as its source gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import TextChoices
from pydantic import AwareDatetime, Field

from tickets.selectors import SessionScope, service_get_with_incidents
from tools.base import ResultView, Tool, ToolArgs, anyone, by_setting
from tools.compare import Comparison, Difference, by_id, field_differences, word
from tools.httpbackends import Reply, http_get, parse_reply, refuse_status
from tools.lookups import UNBOUNDED, Lookup, ToolError, ToolResult, iso

NAME = "read_service_status"
BACKEND = "AGENT_SERVICE_STATUS_BACKEND"
RECENT_INCIDENTS = 5


class ServiceName(TextChoices):
    """The services `read_service_status` may be asked about (CONFORMANCE §4)."""

    EXPORT = "export"
    API = "api"
    AUTH = "auth"
    BILLING = "billing"


SERVICES = tuple(ServiceName.values)
# ServiceName's values as a type: a type checker needs them written out (Literal[SERVICES] is a
# tuple to it, not a type); a test keeps the two the same.
ServiceValue = Literal["export", "api", "auth", "billing"]


class ReadServiceStatusArgs(ToolArgs):
    """Read a service's status and recent incidents."""

    case_rules = {"service": str.lower}

    service: ServiceValue = Field(description="The service name.")  # strict: a plain string, not the enum


@dataclass(frozen=True)
class IncidentView:
    id: str
    title: str
    status: str
    started_at: datetime
    resolved_at: datetime | None


def service_result(service: str, status: str, incidents: list[IncidentView]) -> ToolResult:
    """The service's status and its most recent incidents, newest first."""
    recent = sorted(incidents, key=lambda i: i.started_at, reverse=True)[:RECENT_INCIDENTS]
    content = {
        "service": service,
        "status": status,
        "incidents": [
            {
                "id": i.id,
                "title": i.title,
                "status": i.status,
                "started_at": iso(i.started_at),
                "resolved_at": iso(i.resolved_at),
            }
            for i in recent
        ],
    }
    return ToolResult(content, f"service:{service}")


def not_listed(service: str) -> ToolError:
    return ToolError(f"no service named {service!r} is listed", gone=True)


# --- the database backend: our own Service table ------------------------------------------------


def read_from_database(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    try:
        service, incidents = service_get_with_incidents(name=args["service"], recent=RECENT_INCIDENTS)
    except ObjectDoesNotExist:
        raise not_listed(args["service"]) from None
    return service_result(
        service.name,
        service.status,
        [IncidentView(i.ref, i.title, i.status, i.started_at, i.resolved_at) for i in incidents],
    )


# --- the http backend: a Statuspage summary -------------------------------------------------------


class Component(Reply):
    id: str
    name: str
    status: str


class ComponentRef(Reply):
    id: str
    name: str = ""


class Incident(Reply):
    id: str
    name: str
    status: str
    created_at: AwareDatetime
    started_at: AwareDatetime | None = None
    resolved_at: AwareDatetime | None = None
    components: list[ComponentRef] = []


class Summary(Reply):
    """The part of a Statuspage `/api/v2/summary.json` these lookups read."""

    components: list[Component]
    incidents: list[Incident] = []


def read_over_http(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    """The component named like the service (case-insensitively) and the incidents the page lists for it."""
    what = "the status page"
    status, body = http_get(
        settings.AGENT_SERVICE_STATUS_URL, {"Accept": "application/json"}, lookup.timeout, what=what
    )
    refuse_status(status, what=what, credential=None)
    summary = parse_reply(Summary, body, what=what)
    wanted = args["service"].casefold()
    component = next((c for c in summary.components if c.name.casefold() == wanted), None)
    if component is None:
        raise not_listed(args["service"])
    incidents = [
        IncidentView(i.id, i.name, i.status, i.started_at or i.created_at, i.resolved_at)
        for i in summary.incidents
        if any(ref.id == component.id or ref.name.casefold() == wanted for ref in i.components)
    ]
    return service_result(args["service"], _component_status(component.status), incidents)


def _component_status(status: str) -> str:
    """Statuspage's `degraded_performance` is what our own table calls `degraded`; the rest as the page says."""
    return "degraded" if status == "degraded_performance" else status


# --- as staff see it, and re-checked -----------------------------------------------------------------


class ServiceStatusView(ResultView):
    kind = "service"

    def source(self, source_ref: str) -> str:
        return source_ref.removeprefix("service:") + " service status"

    def excerpt(self, content: dict[str, Any], width: int) -> str:
        incidents = "; ".join(f"{i['id']} {i['title']} ({i['status']})" for i in content.get("incidents", []))
        return f"status: {content.get('status')}" + (f"; incidents: {incidents}" if incidents else "")


def compare(old: dict[str, Any], new: dict[str, Any], standing: Mapping[str, str] | None = None) -> Comparison:
    """The service's fields, then its incidents by id: each one's fields, gone from the list, or new."""
    differences = field_differences(old, new)
    before, after = by_id(old.get("incidents")), by_id(new.get("incidents"))
    for id_, incident in before.items():
        if id_ not in after:
            differences.append(Difference(f"incident {id_}", word(incident.get("status")), "no longer listed"))
        else:
            differences += field_differences(incident, after[id_], prefix=f"incident {id_} ")
    differences += [
        Difference(f"incident {i}", "not listed", word(after[i].get("status"))) for i in after if i not in before
    ]
    return Comparison.of(differences)


TOOL = Tool(
    NAME,
    ReadServiceStatusArgs,
    anyone,
    backend=by_setting(BACKEND, database=read_from_database, http=read_over_http),
    reads="the service status page",
    view=ServiceStatusView(),
    compare=compare,
)
