"""One review packet as every surface shows it: the packet page, the API, the webhook, the `investigate` command.

`PacketView` is built once from a run and its packet (as `EvidenceView` is for one evidence item);
each surface is a projection of it and computes nothing from the models itself, so a derived field
(an explanation, a headline, the decision the packet stands on) is decided here, once.

What needs a query (evidence, reviews, approvals, the headline) is read when a surface first asks
for it and kept: the webhook, written inside a run's last step, reads none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.utils import timezone

from engine.approvals import Waiting, approval_shown
from engine.headlines import Headline, run_headline
from engine.models import PacketReview, ReviewPacket, Run, ToolAttempt
from engine.statuses import Status, stop_name
from engine.timeline import EvidenceView, evidence_for, investigator, spent_rows, stop_explanation, stop_label
from tickets.models import TicketMessage
from tickets.selectors import ticket_customer_wrote_after, ticket_messages
from tools.base import canonical_json

ReviewState = ReviewPacket.ReviewState
DECIDED = (ReviewState.ACCEPTED, ReviewState.REJECTED)
# A lookup whose every attempt ended so never got an answer: the packet is incomplete without it.
UNANSWERED: dict[str, str] = {
    ToolAttempt.Outcome.TRANSIENT_ERROR: "its service could not be reached",
    ToolAttempt.Outcome.TIMEOUT: "it did not answer in time",
    ToolAttempt.Outcome.INTERRUPTED: "a worker restart cut it off",
}


@dataclass(frozen=True)
class LostLookup:
    """A lookup the run made that never got an answer: its tool, arguments, and why (its last attempt's outcome)."""

    tool: str
    args: dict[str, Any]
    outcome: str

    @property
    def why(self) -> str:
        return UNANSWERED[self.outcome]

    @property
    def call(self) -> str:
        return f"{self.tool} {canonical_json(self.args)}"


@dataclass(frozen=True)
class PacketView:
    """What staff and the help desk are shown of `packet`, the packet of `run` (its ticket loaded with it).

    `evidence_checks`: the re-reading of the cited evidence a staff surface made as it opened the packet
    (staff.recheck, each as its `as_dict`), carried as given; empty where nothing was re-read.
    """

    run: Run = field(repr=False)
    packet: ReviewPacket = field(repr=False)
    evidence_checks: tuple[Mapping[str, Any], ...] = ()

    # --- the packet as written (no query) ---------------------------------------------

    @property
    def id(self) -> int:
        return self.packet.pk

    @property
    def run_id(self) -> int:
        return self.run.pk

    @property
    def run_status(self) -> str:
        return self.run.status

    @property
    def ticket_ref(self) -> str:
        return self.run.ticket.ref

    @property
    def ticket_source(self) -> str:
        """Where the ticket came from (the help desk's intake, or staff), and its id there."""
        return self.run.ticket.source

    @property
    def ticket_external_id(self) -> str:
        return self.run.ticket.external_id

    @property
    def subject(self) -> str:
        """The ticket's subject as the run was shown it."""
        return self.run.subject

    @property
    def body(self) -> str:
        return self.run.body

    @property
    def messages_seen(self) -> int:
        """The ticket's highest message number when the run started (0: the description alone)."""
        return self.run.messages_seen

    @property
    def saw(self) -> str:
        """Which of the ticket's text the run was shown, in words: "the description and messages 1–2"."""
        return messages_seen_words(self.run.messages_seen)

    @property
    def model_name(self) -> str:
        return self.run.model_name

    @property
    def actor(self) -> str:
        """Who proposed the run's steps, in the words staff read."""
        return investigator(self.run.model_name)

    @property
    def summary(self) -> str | None:
        return self.packet.summary

    @property
    def reply(self) -> str:
        """The suggested reply to the customer ("" when none was written)."""
        return self.packet.reply

    @property
    def evidence_refs(self) -> list[str]:
        return list(self.packet.evidence_refs)

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return self.packet.attempts

    @property
    def open_questions(self) -> list[str]:
        return self.packet.open_questions

    @cached_property
    def lost_lookups(self) -> list[LostLookup]:
        """The lookups that never got an answer (every attempt of the call unanswered), each once, in the order
        first made: what the packet's findings lack (a worker restart, a service down). From the packet's attempts."""
        outcomes: dict[str, list[dict[str, Any]]] = {}
        for attempt in self.packet.attempts:
            outcomes.setdefault(canonical_json([attempt["tool"], attempt["args"]]), []).append(attempt)
        return [
            LostLookup(tries[-1]["tool"], tries[-1]["args"], tries[-1]["outcome"])
            for tries in outcomes.values()
            if all(t["outcome"] in UNANSWERED for t in tries)
        ]

    @property
    def incomplete(self) -> bool:
        """A lookup of the run never got an answer: the packet says what it found without it."""
        return bool(self.lost_lookups)

    @property
    def stop_reason(self) -> str:
        return self.packet.stop_reason

    @property
    def detail(self) -> str:
        return self.packet.detail

    @property
    def stop_note(self) -> str:
        return self.packet.stop_note

    @property
    def stop_name(self) -> str:
        return stop_name(self.packet.stop_reason)

    @property
    def stop_label(self) -> str:
        return stop_label(self.packet.stop_reason, self.packet.detail)

    @property
    def stop_explanation(self) -> str:
        """The stop in plain words with its note: what the API and the help desk are told."""
        return self._explained(self.packet.stop_note)

    @property
    def explanation(self) -> str:
        """The stop as the packet page explains it: a refused proposal's own reason, shown beside it,
        replaces the note."""
        return self._explained("" if self.packet.refused else self.packet.stop_note)

    @property
    def stop_sentence(self) -> str:
        """The stop in plain words, no note (the `investigate` command prints the note on a line of its own)."""
        return self._explained("")

    def _explained(self, note: str) -> str:
        return stop_explanation(self.packet.stop_reason, self.packet.detail, note, model_name=self.run.model_name)

    @property
    def handoff(self) -> bool:
        """The run handed the ticket to a person (no summary, on purpose)."""
        return self.packet.stop_reason == Status.NEEDS_HELP

    @property
    def refused(self) -> dict[str, Any] | None:
        return self.packet.refused

    @property
    def budget_spent(self) -> dict[str, Any]:
        return self.packet.budget_spent

    @property
    def spent(self) -> list[tuple[str, str]]:
        return spent_rows(self.packet.budget_spent)

    @property
    def review_state(self) -> str:
        return self.packet.review_state

    @property
    def superseded(self) -> bool:
        return self.packet.review_state == ReviewState.SUPERSEDED

    @property
    def created_at(self) -> datetime:
        return self.packet.created_at

    # --- read when first asked for --------------------------------------------------------

    @cached_property
    def evidence(self) -> list[EvidenceView]:
        return evidence_for(ticket_id=self.run.ticket_id, refs=self.evidence_refs)

    @cached_property
    def messages(self) -> list[TicketMessage]:
        """The follow-up messages the run saw, in the order they were written."""
        return ticket_messages(ticket_id=self.run.ticket_id, up_to=self.run.messages_seen)

    @cached_property
    def customer_wrote_again(self) -> bool:
        """A pending packet whose ticket has a customer's message newer than the run: its reviewer should know."""
        if self.packet.review_state != ReviewState.PENDING:
            return False
        return ticket_customer_wrote_after(ticket_id=self.run.ticket_id, number=self.run.messages_seen)

    @cached_property
    def headline(self) -> Headline:
        return run_headline(run=self.run, packet=self.packet)

    @cached_property
    def reviews(self) -> list[PacketReview]:
        """The review history, oldest first (system entries, such as a supersession, have no reviewer)."""
        return list(self.packet.reviews.select_related("reviewer").order_by("created_at", "id"))

    @property
    def decision(self) -> PacketReview | None:
        """The review the packet's decision stands on: its latest staff review (None while undecided), as
        staff.reviews.packet_decision reads it under the packet's lock."""
        if self.packet.review_state not in DECIDED:
            return None
        return next((r for r in reversed(self.reviews) if r.reviewer_id is not None), None)

    @cached_property
    def approvals(self) -> list[Waiting]:
        """The run's approvals as staff see them now (a pending one of an ended run is expired)."""
        now = timezone.now()
        return [approval_shown(a, self.run, now) for a in self.run.approvals.all()]


def messages_seen_words(number: int) -> str:
    """ "the description", "the description and message 1", "the description and messages 1–3"."""
    if number <= 0:
        return "the description"
    if number == 1:
        return "the description and message 1"
    return f"the description and messages 1–{number}"


def packet_view(*, run: Run, packet: ReviewPacket, evidence_checks: Sequence[Mapping[str, Any]] = ()) -> PacketView:
    return PacketView(run=run, packet=packet, evidence_checks=tuple(evidence_checks))
