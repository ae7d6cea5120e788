"""What the ticket domain announces, for the packages above it to act on without tickets importing them."""

from __future__ import annotations

from django.dispatch import Signal

# Intake made a ticket, or added a customer's message to one, and its transaction committed: ticket_id=,
# requested_by= (the integration user, None for a signed webhook). Sent only when AGENT_AUTO_INVESTIGATE is on;
# staff.apps starts the investigation (none while the ticket has a run going).
ticket_arrived = Signal()
