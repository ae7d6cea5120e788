"""One ticket's story: the ticket, the job it names, the customer's follow-ups, its runs and their reviews.

Reviews come a few hours after the packet (a log-normal delay, half within three hours, during the
day or not), so the newest packets are still pending; one packet in 200 is never looked at. A packet
a newer run of its ticket overtook before anyone reviewed it is superseded, as `engine.packets` does.
About 72 % of reviewed packets are accepted; a rejection names a reason and a note; one review in 70
is changed later by a supervisor. An acceptance re-checks the cited evidence (`EvidenceCheck`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.models import EvidenceCheck, PacketReview, ReviewPacket
from engine.packets import reply_change
from engine.scaleseed.copying import Row, TableCopy
from engine.scaleseed.draws import Weighted
from engine.scaleseed.runs import RunRows, RunSetting, RunWriter, TicketEvidence
from engine.scaleseed.schedule import TicketTimes
from engine.scaleseed.world import TOPICS, AccountCast, World
from tickets.models import Job, Ticket, TicketMessage
from tools.base import canonical_json
from tools.compare import Outcome
from tools.read_job_status import JobView, job_result

REVIEW_MEDIAN_HOURS = 3.0
NEVER_REVIEWED = 0.005
ACCEPTED = 0.72
DECISION_CHANGED = 1 / 70
REASON_NOTES = {
    PacketReview.Reason.WRONG_CONCLUSION: "The job failed for another reason; see the customer's last message.",
    PacketReview.Reason.EVIDENCE: "The cited article is about a different plan.",
    PacketReview.Reason.SHOULD_HAVE_LOOKED: "It should have read the service status first.",
    PacketReview.Reason.NO_ARTICLE: "No article covers this; needs a new one.",
    PacketReview.Reason.UNCLEAR: "Hard to follow.",
    PacketReview.Reason.NOT_USEFUL: "Tells the customer nothing they did not know.",
    PacketReview.Reason.OTHER: "Duplicate of an earlier ticket.",
}
REASONS = Weighted(zip(REASON_NOTES, (3, 2, 2, 1.5, 1, 1.5, 0.5), strict=True))
RECHECKS = Weighted(((Outcome.UNCHANGED, 96), (Outcome.CHANGED, 3), (Outcome.GONE, 1)))
TOPIC_DRAW = Weighted((t, t.weight) for t in TOPICS)


class Ids:
    """The next primary key of each table, from the highest one there when the seed began."""

    def __init__(self, first: dict[type, int]):
        self.next = dict(first)

    def take(self, model: type) -> int:
        value = self.next[model]
        self.next[model] = value + 1
        return value


@dataclass
class Teller:
    """Writes tickets' stories into the tables' COPY buffers."""

    world: World
    ids: Ids
    rng: random.Random
    now: datetime
    tables: dict[type, TableCopy]

    def __post_init__(self):
        self.runs = RunWriter(world=self.world, ids=self.ids, rng=self.rng)

    def ticket(self, times: TicketTimes) -> None:
        rng = self.rng
        account = self.world.accounts.draw(rng)
        customer = rng.choice(account.customers) if rng.random() < 0.88 else account.anonymous
        topic = TOPIC_DRAW.draw(rng)
        ticket_id = self.ids.take(Ticket)
        job = self._job(ticket_id, account, customer, topic, times.created_at) if topic.job else None
        subject = rng.choice(topic.subjects)
        body = topic.body.format(job=job[0] if job else "")
        messages = self._messages(ticket_id, times)
        setting = RunSetting(ticket_id, customer, account.id, topic, subject, body, job)
        ticket = self._ticket_row(ticket_id, account, customer, subject, body, times, messages)
        self._add(Ticket, ticket)
        evidence = TicketEvidence()
        written: list[RunRows] = []
        for run_id, start in zip(times.run_ids, times.starts, strict=True):
            seen = sum(1 for m in messages if m["written_at"] < start)
            run = self.runs.run(setting=setting, evidence=evidence, run_id=run_id, created_at=start, messages_seen=seen)
            written.append(run)
            for model, rows in run.rows.items():
                self.tables[model].extend(rows)
        self._reviews(written)
        ticket["evidence_count"] = len(evidence.numbers)  # the highest number given, as evidence_record keeps it

    def _add(self, model: type, row: Row) -> None:
        self.tables[model].add(row)

    # --- the ticket and what it names --------------------------------------------------------------

    def _ticket_row(self, ticket_id, account: AccountCast, customer, subject, body, times, messages) -> Row:
        from_desk = self.rng.random() < 0.75
        external = str(4_000_000 + ticket_id) if from_desk else ""
        return {
            "id": ticket_id,
            "ref": f"ZD-{external}" if from_desk else f"T-{2_000_000 + ticket_id}",
            "source": "zendesk" if from_desk else "",
            "external_id": external,
            "account_id": account.id,
            "session_id": customer.session_id,
            "subject": subject,
            "body": body,
            "created_at": times.created_at,
            "message_count": len(messages),
            "external_updated_at": max([times.created_at, *(m["written_at"] for m in messages)]) if from_desk else None,
        }

    def _job(self, ticket_id, account: AccountCast, customer, topic, created_at) -> tuple[str, str, bool]:
        """The job the ticket names, and its status as read_job_status reads it (the same row, re-read later)."""
        rng = self.rng
        requester = customer if customer.user_id else rng.choice(account.customers)
        kind, error = topic.job
        failed = rng.random() < 0.85
        started = (created_at - timedelta(hours=rng.uniform(0.2, 48))).replace(microsecond=0)
        finished = started + timedelta(seconds=int(rng.uniform(20, 1800)))
        ref, sensitive = f"J-{500_000_000 + ticket_id}", rng.random() < 0.02
        self._add(
            Job,
            {
                "id": self.ids.take(Job),
                "ref": ref,
                "account_id": account.id,
                "kind": kind,
                "status": "failed" if failed else "succeeded",
                "error_code": error if failed else "",
                "requested_by_id": requester.user_id,
                "created_at": started,
                "finished_at": finished,
                "sensitive": sensitive,
            },
        )
        view = JobView(
            ref,
            kind,
            "failed" if failed else "succeeded",
            error if failed else None,
            requester.email,
            requester.role,
            started,
            finished,
        )
        return ref, canonical_json(job_result(view).content), sensitive

    def _messages(self, ticket_id: int, times: TicketTimes) -> list[Row]:
        """Follow-ups on a quarter of the tickets, between its arrival and two days after its last run."""
        rng = self.rng
        if rng.random() >= 0.25:
            return []
        end = min(times.starts[-1] + timedelta(days=2), self.now - timedelta(minutes=1))
        span = max((end - times.created_at).total_seconds(), 1.0)
        moments = sorted(times.created_at + timedelta(seconds=rng.uniform(0, span)) for _ in range(rng.randint(1, 3)))
        rows = []
        for number, at in enumerate(moments, start=1):
            author = "customer" if rng.random() < 0.7 else "staff"
            rows.append(
                {
                    "id": self.ids.take(TicketMessage),
                    "ticket_id": ticket_id,
                    "number": number,
                    "external_id": f"{ticket_id}-{number}",
                    "author": author,
                    "body": "Any news on this? It is still failing."
                    if author == "customer"
                    else "We are looking into it.",
                    "written_at": at,
                    "received_at": at,
                }
            )
        self.tables[TicketMessage].extend(rows)
        return rows

    # --- reviews ---------------------------------------------------------------------------------

    def _reviews(self, runs: list[RunRows]) -> None:
        """Each packet reviewed, superseded by the next run's packet, or still pending, as its times say."""
        rng = self.rng
        for run, newer in zip(runs, [*runs[1:], None], strict=True):
            packet = run.packet
            delay = timedelta(hours=rng.lognormvariate(math.log(REVIEW_MEDIAN_HOURS), 1.3)) + timedelta(minutes=2)
            at = None if rng.random() < NEVER_REVIEWED else packet["created_at"] + delay
            if newer is not None and (at is None or newer.packet["created_at"] < at):
                note = f"Superseded by the packet of run {newer.packet['run_id']}, a newer investigation of the same ticket."
                self._review(packet, None, PacketReview.Decision.SUPERSEDED, newer.packet["created_at"], note=note)
            elif at is not None and at < self.now:
                self._decide(packet, run, at)

    def _decide(self, packet: Row, run: RunRows, at: datetime) -> None:
        """A staff member's decision; now and then a supervisor's second, changing it."""
        rng = self.rng
        reviewer = rng.choice(self.world.reviewers)
        accept = rng.random() < ACCEPTED
        if accept:
            self._accept(packet, run, reviewer, at)
        else:
            self._reject(packet, reviewer, at)
        if rng.random() < DECISION_CHANGED and at + timedelta(days=1) < self.now:
            supervisor = rng.choice(self.world.supervisors)
            later = at + timedelta(hours=rng.uniform(1, 20))
            if accept:
                self._reject(packet, supervisor, later, note="Changed on a second look: the conclusion does not hold.")
            else:
                self._review(
                    packet,
                    supervisor[0],
                    PacketReview.Decision.ACCEPTED,
                    later,
                    note="Changed on a second look: it was right.",
                    reply=packet["reply"],
                )

    def _accept(self, packet: Row, run: RunRows, reviewer, at: datetime) -> None:
        changed = []
        for evidence_id, ref in zip(run.cited_evidence, packet["evidence_refs"], strict=False):
            result = RECHECKS.draw(self.rng)
            if result != Outcome.UNCHANGED:
                changed.append(ref)
            self._add(
                EvidenceCheck,
                {
                    "id": self.ids.take(EvidenceCheck),
                    "evidence_id": evidence_id,
                    "packet_id": packet["id"],
                    "checked_at": at - timedelta(seconds=30),
                    "checked_by_id": reviewer[0],
                    "result": result.value,
                    "differences": [
                        {"field": "status", "old": "failed", "new": "succeeded", "text": "status: failed → succeeded"}
                    ]
                    if result == Outcome.CHANGED
                    else [],
                    "reason": "the job is gone" if result == Outcome.GONE else "",
                },
            )
        reply = packet["reply"]
        if reply and self.rng.random() < 0.3:
            reply = reply.replace("Best regards,", "Let us know if this helps.\n\nBest regards,")
        self._review(packet, reviewer[0], PacketReview.Decision.ACCEPTED, at, reply=reply, changed=changed)

    def _reject(self, packet: Row, reviewer, at: datetime, note: str = "") -> None:
        reason = REASONS.draw(self.rng)
        self._review(
            packet,
            reviewer[0],
            PacketReview.Decision.REJECTED,
            at,
            reason=reason.value,
            note=note or REASON_NOTES[reason],
        )

    def _review(
        self, packet: Row, reviewer_id, decision, at: datetime, *, note="", reason="", reply="", changed=()
    ) -> None:
        self._add(
            PacketReview,
            {
                "id": self.ids.take(PacketReview),
                "packet_id": packet["id"],
                "reviewer_id": reviewer_id,
                "decision": decision.value,
                "note": note,
                "reason": reason,
                "reply": reply,
                "created_at": at,
                "acknowledged_changed_evidence": bool(changed),
                "changed_evidence": list(changed),
            },
        )
        packet["review_state"] = ReviewPacket.ReviewState(decision.value).value
        if reviewer_id is not None:  # what staff.reviews keeps on the packet beside its state
            packet["review_reason"] = reason
            packet["first_reviewed_at"] = packet.get("first_reviewed_at") or at
            packet["reply_change"] = reply_change(packet["reply"], reply)
