"""What the engine announces, for the packages above it to act on without the engine importing them.

Both are sent inside the step's transaction, synchronously, with the step's writes (`writes=`,
an engine.sql.StepWrites): a receiver's writes, held there, commit or roll back with the step's,
and a receiver that raises fails the step as its own code would. integrations.apps connects the
help desk's events.
"""

from __future__ import annotations

from django.dispatch import Signal

# A run's packet was just written: run=, packet=, now=, writes=. Not sent for an evaluation's run.
packet_written = Signal()

# A call just started waiting for a supervisor: run=, approval=, now=, writes=. Not sent for an evaluation's run.
approval_asked = Signal()
