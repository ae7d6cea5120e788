"""Fixtures of the agentrun tests: a help desk's webhook endpoint, started on demand and closed after the test."""

from __future__ import annotations

import pytest

from integrations.webhooks import webhook_threads_settle
from tests.support.webhooks import Receiver, configure


@pytest.fixture
def receivers():
    """Start receivers with `receivers(statuses, delay)`; senders and servers are done when the test ends."""
    started: list[Receiver] = []

    def start(statuses=(200,), delay=0.0) -> Receiver:
        started.append(Receiver(statuses, delay))
        return started[-1]

    yield start
    assert webhook_threads_settle(15), "a background delivery is still running"
    for receiver in started:
        receiver.close()


@pytest.fixture
def hook(receivers, settings):
    receiver = receivers()
    configure(settings, receiver.url)
    return receiver
