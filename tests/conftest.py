"""Shared fixtures: the demo data set's personas, staff users and clients by role, and a way to play a scenario.

Tests that drive the loop need `transactional_db`: the loop commits every step
and tool backends read from their own thread, so they see only committed data.
"""

from __future__ import annotations

import weakref
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import Client

from engine.roles import SUPERVISORS, SUPPORT_STAFF, roles_setup
from engine.waiting import operations_settle
from integrations.webhooks import webhook_threads_settle
from scenarios.format import Scenario
from scenarios.runner import run_scenario
from tests.support.sqlitesearch import SqliteSearch
from tests.support.staff import client_for, make_user
from tests.support.zendeskserver import ZendeskServer, zendesk_configure
from tickets.demo import seed_demo
from tickets.models import CustomerSession, Ticket


@pytest.fixture
def demo(db):
    seed_demo()


@pytest.fixture
def demo_committed(transactional_db):
    seed_demo()


@pytest.fixture
def dana_session(demo_committed) -> CustomerSession:
    return CustomerSession.objects.get(ref="S-ACME-1")


@pytest.fixture
def globex_session(demo_committed) -> CustomerSession:
    return CustomerSession.objects.get(ref="S-GLOBEX-1")


@pytest.fixture
def anon_session(demo_committed) -> CustomerSession:
    return CustomerSession.objects.get(ref="S-ACME-ANON")


@pytest.fixture
def ticket_t1001(demo_committed) -> Ticket:
    return Ticket.objects.get(ref="T-1001")


@pytest.fixture
def play(demo_committed):
    """Run a scenario, given as keyword arguments, through the production loop; returns its report."""

    def _play(model: list[Any], **fields: Any) -> dict[str, Any]:
        data = {"name": "test", "session": "S-ACME-1", "ticket": "T-1001", "model": model, **fields}
        return run_scenario(Scenario.model_validate(data))

    return _play


# --- staff users and their clients, one of each role ------------------------------------------


@pytest.fixture
def roles(db):
    return roles_setup()


@pytest.fixture
def staff_user(roles) -> User:
    return make_user("staff", SUPPORT_STAFF)


@pytest.fixture
def supervisor_user(roles) -> User:
    return make_user("supervisor", SUPERVISORS)


@pytest.fixture
def outsider(roles) -> User:
    """Can log in to the admin, holds no role."""
    return make_user("outsider", None)


@pytest.fixture
def staff_client(staff_user) -> Client:
    return client_for(staff_user)


@pytest.fixture
def supervisor_client(supervisor_user) -> Client:
    return client_for(supervisor_user)


@pytest.fixture(scope="session")
def sqlite_search(tmp_path_factory) -> SqliteSearch:
    """The knowledge base's search on SQLite, the embedded default, played in fresh processes."""
    return SqliteSearch(tmp_path_factory.mktemp("sqlite-search"))


# --- the help desk ---------------------------------------------------------------------------


@pytest.fixture
def zendesk(settings):
    """A fake Zendesk (its Tickets API) holding ticket 48213, open, with the settings pointing at it and both
    notes on; its requests are in `zendesk.received`, the notes it took in `zendesk.notes(48213)`. The notes
    sent in the background are done, and the server closed, when the test ends. Behind a live_server, point
    the packet links at it: `zendesk_configure(settings, zendesk, site_url=live_server.url)`."""
    server = ZendeskServer(tickets={48213: "open"})
    zendesk_configure(settings, server)
    yield server
    assert webhook_threads_settle(15), "a background delivery is still running"
    server.close()


# --- operations the loop stopped waiting for ------------------------------------------------


def _join_operations(timeout: float = 15.0) -> None:
    assert operations_settle(timeout), "an operation the loop gave up on is still running"


@pytest.fixture
def settle():
    """A function that waits until every operation the loop gave up waiting for has finished.

    A timed-out model request or dispatch keeps running in its daemon thread; a
    test calls `settle()` to see what its late result did (it must do nothing),
    and the fixture settles them again when the test ends so none outlives it.
    """
    yield _join_operations
    _join_operations()


# --- the test database is dropped at the end -------------------------------------------------

_wrappers: weakref.WeakSet = weakref.WeakSet()
connection_created.connect(lambda sender, connection, **kwargs: _wrappers.add(connection), weak=False)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """The test database; when the session ends, no connection of ours is left on it.

    Playwright's sync API runs the browser tests in greenlets, each with its own
    context, and Django keeps a connection per context: the one the database was
    created with stays checked out of the pool in a context nobody returns to,
    and dropping the database would find it still in use. Connections of other
    contexts are closed here; the current one Django closes itself.
    """
    yield
    current = set(connections.all(initialized_only=True))
    for wrapper in list(_wrappers):
        if wrapper not in current and wrapper.connection is not None:
            wrapper.connection.close()
