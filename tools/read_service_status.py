"""read_service_status: a service's status and its recent incidents (CONFORMANCE §4).

The services are the operator's. AGENT_SERVICE_STATUS_BACKEND chooses the backend at each call: our
own Service table, or a Statuspage summary (AGENT_SERVICE_STATUS_URL, `/api/v2/summary.json`), whose
components and component groups are the services. What a call may name is `service_catalog`: the
Service rows, or the page's components and groups (kept for CATALOG_SECONDS per process, so neither
the prompt nor the argument check reads the page more often). A name matches by name or slug in any
case (`tools.base.Catalog`); a name not listed is a bad argument naming the services that are. Anyone
may ask; a service no longer listed when the lookup runs is an error that a re-check reads as its
source gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models.signals import post_delete, post_save
from pydantic import AwareDatetime, Field, ValidationInfo, field_validator

from tickets.models import Service
from tickets.selectors import SessionScope, service_get_with_incidents, service_names
from tools.base import NAMES_SHOWN, Catalog, ResultView, Tool, ToolArgs, anyone, by_setting, catalog_of
from tools.compare import Comparison, Difference, by_id, field_differences, word
from tools.httpbackends import Reply, http_get, parse_reply, refuse_status
from tools.lookups import UNBOUNDED, Lookup, ToolError, ToolResult, iso

NAME = "read_service_status"
BACKEND = "AGENT_SERVICE_STATUS_BACKEND"
RECENT_INCIDENTS = 5
MAX_SERVICE_LENGTH = 100
CATALOG_SECONDS = 60.0  # how long a status page's names are kept before a model request reads them again
CATALOG_WAIT_SECONDS = 5.0  # the longest a read of the names waits: a model request waits behind it

log = logging.getLogger("agentrun")


class ReadServiceStatusArgs(ToolArgs):
    """Read a service's status and recent incidents."""

    case_rules = {"service": str.lower}

    service: str = Field(min_length=1, max_length=MAX_SERVICE_LENGTH, description="The service name.")

    @field_validator("service")
    @classmethod
    def _listed(cls, value: str, info: ValidationInfo) -> str:
        catalog = catalog_of(info)
        if catalog is not None and catalog.find(value) is None:
            raise ValueError(catalog.refusal(value, "service"))
        return value

    @classmethod
    def offered_schema(cls, catalog: Catalog | None) -> dict[str, Any]:
        """The services by name: an enum when they fit NAMES_SHOWN, else the first of them in the description."""
        schema = super().offered_schema(catalog)
        if catalog is not None and catalog.names:
            service = schema["properties"]["service"]
            if len(catalog.names) <= NAMES_SHOWN:
                service["description"] = "The service, by its name as listed (any case)."
                service["enum"] = list(catalog.names)
            else:
                service["description"] = f"The service, by its name as listed (any case): one of {catalog.shown()}."
        return schema


@dataclass(frozen=True)
class IncidentView:
    id: str
    title: str
    status: str
    started_at: datetime
    resolved_at: datetime | None


def service_result(service: str, status: str, incidents: list[IncidentView]) -> ToolResult:
    """The service (named as its source lists it), its status and its most recent incidents, newest first."""
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


# --- what a call may name ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    catalog: Catalog | None
    at: float  # time.monotonic() when it was read


DATABASE = "database"
_last_read: dict[str, _Read] = {}  # by source: DATABASE, or the status page's URL
_last_read_lock = threading.Lock()  # held while the page is read, so that one thread reads it for all


def _remember(source: str, catalog: Catalog) -> None:
    with _last_read_lock:
        _last_read[source] = _Read(catalog, time.monotonic())


def _read_last(source: str) -> Catalog | None:
    with _last_read_lock:
        last = _last_read.get(source)
    return last.catalog if last else None


def catalog_from_database(wait: float | None) -> Catalog | None:
    """The Service rows: as they are now for the check of a call (`wait` 0, one query); before a model request
    (`wait` > 0), as read within CATALOG_SECONDS, so that a run's requests cost no query; with `wait` None, as
    this process read them last. A row saved or deleted in this process is seen at once (`_forget_rows`)."""
    if wait is None:
        return _read_last(DATABASE)
    if wait > 0:
        with _last_read_lock:
            last = _last_read.get(DATABASE)
        if last is not None and time.monotonic() - last.at < CATALOG_SECONDS:
            return last.catalog
    return _database_catalog()


def _database_catalog() -> Catalog:
    catalog = Catalog.of(service_names())
    _remember(DATABASE, catalog)
    return catalog


def _forget_rows(**kwargs: Any) -> None:
    with _last_read_lock:
        _last_read.pop(DATABASE, None)


post_save.connect(_forget_rows, sender=Service, dispatch_uid="read_service_status.forget_rows")
post_delete.connect(_forget_rows, sender=Service, dispatch_uid="read_service_status.forget_rows")


def catalog_from_page(wait: float | None) -> Catalog | None:
    """The page's components and groups, read again once CATALOG_SECONDS old when `wait` allows a read
    (at most CATALOG_WAIT_SECONDS). A failed read is logged, keeps the names read before and is not
    tried again for CATALOG_SECONDS: a page that is down does not hold up every model request."""
    url = settings.AGENT_SERVICE_STATUS_URL
    with _last_read_lock:
        last = _last_read.get(url)
        if wait is None or wait <= 0 or (last is not None and time.monotonic() - last.at < CATALOG_SECONDS):
            return last.catalog if last else None
        try:
            catalog: Catalog | None = read_summary(min(wait, CATALOG_WAIT_SECONDS)).catalog()
        except ToolError as exc:
            log.warning("the status page's services could not be read (%s); the names read before stand", exc)
            catalog = last.catalog if last else None
        _last_read[url] = _Read(catalog, time.monotonic())
        return catalog


service_catalog = by_setting(BACKEND, database=catalog_from_database, http=catalog_from_page)


# --- the database backend: our own Service table ------------------------------------------------


def read_from_database(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    service, incidents = _service_named(args["service"])
    return service_result(
        service.name,
        service.status,
        [IncidentView(i.ref, i.title, i.status, i.started_at, i.resolved_at) for i in incidents],
    )


def _service_named(value: str) -> tuple[Service, list]:
    """The row named `value` as stored (the demo's names are lower case), else the one the catalog finds."""
    try:
        return service_get_with_incidents(name=value, recent=RECENT_INCIDENTS)
    except ObjectDoesNotExist:
        name = _database_catalog().find(value)
        if name is None or name == value:
            raise not_listed(value) from None
    try:
        return service_get_with_incidents(name=name, recent=RECENT_INCIDENTS)
    except ObjectDoesNotExist:  # deleted between the two reads
        raise not_listed(value) from None


# --- the http backend: a Statuspage summary -------------------------------------------------------


class Component(Reply):
    """A component, or a component group (`group`, its members' ids in `components`); members carry `group_id`."""

    id: str
    name: str
    status: str
    group: bool = False
    group_id: str | None = None
    components: list[str] = []


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
    components: list[ComponentRef] | None = None  # none: the whole page


class Summary(Reply):
    """The part of a Statuspage `/api/v2/summary.json` these lookups read."""

    components: list[Component]
    incidents: list[Incident] = []

    def catalog(self) -> Catalog:
        return Catalog.of(c.name for c in self.components)

    def component(self, value: str) -> Component | None:
        """The component or group `value` names (by name or slug, any case); the first, if names repeat."""
        name = self.catalog().find(value)
        return next((c for c in self.components if c.name == name), None)

    def affects(self, incident: Incident, component: Component) -> bool:
        """An incident naming no component is the whole page's; one naming a group's member is the group's too."""
        if not incident.components:
            return True
        ids = {component.id, *component.components, *(c.id for c in self.components if c.group_id == component.id)}
        return any(ref.id in ids or ref.name.casefold() == component.name.casefold() for ref in incident.components)


def read_summary(timeout: float | None) -> Summary:
    what = "the status page"
    status, body = http_get(settings.AGENT_SERVICE_STATUS_URL, {"Accept": "application/json"}, timeout, what=what)
    refuse_status(status, what=what, credential=None)
    return parse_reply(Summary, body, what=what)


def read_over_http(scope: SessionScope, args: dict[str, Any], lookup: Lookup = UNBOUNDED) -> ToolResult:
    """The component or group the service names, as the page gives it, and the page's incidents for it."""
    summary = read_summary(lookup.timeout)
    _remember(settings.AGENT_SERVICE_STATUS_URL, summary.catalog())  # read anyway: the names are fresh
    component = summary.component(args["service"])
    if component is None:
        raise not_listed(args["service"])
    incidents = [
        IncidentView(i.id, i.name, i.status, i.started_at or i.created_at, i.resolved_at)
        for i in summary.incidents
        if summary.affects(i, component)
    ]
    return service_result(component.name, _component_status(component.status), incidents)


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
    catalog=service_catalog,
)
