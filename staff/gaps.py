"""Knowledge gaps: what customers asked that no article answered, grouped by topic, most asked first.

A packet shows a gap in one of three ways: the rule-based investigator asked, in an open question, which article
should have answered (the question begins with providers.rules.GAP_QUESTION); it handed the ticket to a person
because its search found no article that matches (its reason says providers.rules.GAP_HANDOFF); or its reviewer
rejected it because no article answers it (the decision's reason is PacketReview.Reason.NO_ARTICLE). `gaps_read`
reads them in one statement, whatever the number of packets; `topics_of` groups their tickets without the
database, so the same tickets always make the same topics.

How tickets are grouped, so that a supervisor can tell why two tickets share a topic. A ticket's words are its
subject's and its body's (the customer's own: greetings, sign-offs and quoted history left out), compared by their
Snowball stems as the knowledge base's search compares them ("exports" and "exporting" are one word), stop words
and the words any request holds (FILLER: "please", "help") left out. Tickets are taken oldest first; each joins
the topic whose tickets it is most like: the mean, over the topic's tickets, of the share of words two tickets
have in common (the Jaccard index: the words both hold over the words either holds), when that mean is at least
JOIN_AT and the ticket shares at least MIN_SHARED words with one of them; otherwise it starts a topic of its own.
A topic's key words are those at least half its tickets hold (two at least); a lone ticket's are its subject's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from django.db.models import OuterRef, Q, Subquery, TextField
from django.db.models.functions import Cast

from engine.models import PacketReview, ReviewPacket, Run
from engine.statuses import Status
from providers.rules import GAP_HANDOFF, GAP_QUESTION, WHY_HAND_OFF, own_words
from tickets.search import stem, words

# Measured on the 16 tickets of tests/agentrun/test_gaps.py (written as customers write them, eight topics told apart
# by hand): at 0.15 and 0.2 the topics are exactly those; at 0.1 a failing CSV import joins the locked-out logins
# (both say "failed" and "password"); at 0.25 the three tickets on invoices in euros part, and so do the three on
# dark mode. Tickets on neighbouring things may share a topic at 0.2: a vault exported to PDF and an empty CSV
# export (they share "export", "file" and "vault"); the key words show why.
JOIN_AT = 0.2
MIN_SHARED = 2
KEY_WORDS_SHOWN = 6
# Words nearly every request holds, which say nothing of what it asks about (stop words are left out already).
FILLER = frozenset(
    """hi hello hey dear thanks thank please regards cheers best kind help question issue problem would could also
    get know want need like way tell anyone someone us im ive cant cannot dont doesnt possible able try trying""".split()
)
_FILLER_STEMS = frozenset(stem(w) for w in FILLER)


@dataclass(frozen=True)
class GapPacket:
    """A packet that shows a gap: when (its writing, or the rejection), the open questions that ask, the handoff's
    reason, its reviewer's note."""

    id: int
    at: datetime
    questions: tuple[str, ...]
    handoff: str  # what the rules searched and found no article for, when they handed off for it ("" otherwise)
    rejected: bool  # rejected because no article answers it
    note: str

    @property
    def how(self) -> str:
        """The signs of the gap in words, as the page and the CSV name them."""
        signs = [
            sign
            for sign, shown in (
                ("open question", self.questions),
                ("handed to a person: no article matched", self.handoff),
                (f"rejected: {PacketReview.Reason.NO_ARTICLE.label}", self.rejected),
            )
            if shown
        ]
        return "; ".join(signs)


@dataclass(frozen=True)
class GapTicket:
    """A ticket with the packets that show its gap (at least one), newest first."""

    ticket_id: int
    ref: str
    subject: str
    body: str
    packets: tuple[GapPacket, ...]

    @property
    def last_at(self) -> datetime:
        return max(p.at for p in self.packets)

    @property
    def first_at(self) -> datetime:
        return min(p.at for p in self.packets)

    @cached_property
    def words(self) -> dict[str, str]:
        """Its words as compared: stem -> the word as first written, subject first (see the module's docstring)."""
        return topic_words(f"{self.subject}\n{own_words(self.body)}")

    @cached_property
    def stems(self) -> frozenset[str]:
        return frozenset(self.words)


@dataclass(frozen=True)
class Topic:
    """Tickets grouped by the words they share: the key words, then the tickets, most recent first."""

    key_words: tuple[str, ...]
    tickets: tuple[GapTicket, ...]

    @property
    def last_at(self) -> datetime:
        return max(t.last_at for t in self.tickets)


def topic_words(text: str) -> dict[str, str]:
    """The words of `text` that can name a topic: stem -> the word as first written (case-folded), in order.
    Stop words, FILLER, numbers and single letters (J-42 is "j" and "42") are left out."""
    found: dict[str, str] = {}
    for word in words(text):
        if len(word) < 2 or word.isdigit():
            continue
        stemmed = stem(word)
        if stemmed not in _FILLER_STEMS:
            found.setdefault(stemmed, word)
    return found


# --- grouping (pure) -----------------------------------------------------------------------------


def topics_of(tickets: Iterable[GapTicket]) -> list[Topic]:
    """The tickets grouped into topics (the module's docstring says how), most asked first: more tickets first,
    then the most recently asked, then by key words. The same tickets, in any order, make the same topics."""
    groups: list[list[GapTicket]] = []
    placed: list[tuple[int, int]] = []  # each ticket placed so far: (its group, how many words it holds)
    holding: dict[str, list[int]] = {}  # a stem -> the placed tickets that hold it
    for ticket in sorted(tickets, key=lambda t: (t.first_at, t.ref)):
        joined = _most_like(ticket, groups, placed, holding)
        if joined is None:
            joined = len(groups)
            groups.append([])
        groups[joined].append(ticket)
        for s in ticket.stems:
            holding.setdefault(s, []).append(len(placed))
        placed.append((joined, len(ticket.stems)))
    topics = [
        Topic(_key_words(group), tuple(sorted(group, key=lambda t: (t.last_at, t.ref), reverse=True)))
        for group in groups
    ]
    return sorted(topics, key=lambda t: (-len(t.tickets), -t.last_at.timestamp(), t.key_words))


def _most_like(
    ticket: GapTicket, groups: list[list[GapTicket]], placed: list[tuple[int, int]], holding: dict[str, list[int]]
) -> int | None:
    """The group `ticket` joins (the first of those alike as much), or None: none is alike enough.

    Only the tickets that share a word with it are looked at (through `holding`): the others add 0 to a group's
    mean, so a ticket costs the number of tickets that share its words, not the number of tickets.
    """
    shared = Counter(index for s in ticket.stems for index in holding.get(s, ()))
    sums: dict[int, float] = {}
    near: set[int] = set()  # the groups with a ticket that shares MIN_SHARED words with it
    for index, both in shared.items():
        group, size = placed[index]
        sums[group] = sums.get(group, 0.0) + both / (len(ticket.stems) + size - both)  # the Jaccard index
        if both >= MIN_SHARED:
            near.add(group)
    best, best_score = None, 0.0
    for group in sorted(near):
        score = sums[group] / len(groups[group])
        if score >= JOIN_AT and score > best_score:
            best, best_score = group, score
    return best


def _key_words(group: Sequence[GapTicket]) -> tuple[str, ...]:
    """The words at least half the tickets hold (two at least), most held first, then in the order first written;
    a lone ticket's are its subject's (its body's when its subject has none)."""
    if len(group) == 1:
        only = group[0]
        return tuple(list((topic_words(only.subject) or only.words).values())[:KEY_WORDS_SHOWN])
    held = Counter(s for t in group for s in t.stems)
    order = {s: i for i, s in enumerate(dict.fromkeys(s for t in group for s in t.words))}
    shared = [s for s, n in held.items() if n >= 2 and n * 2 >= len(group)] or [s for s, n in held.items() if n >= 2]
    shared.sort(key=lambda s: (-held[s], order[s]))
    return tuple(_written(s, group) for s in shared[:KEY_WORDS_SHOWN])


def _written(stemmed: str, group: Sequence[GapTicket]) -> str:
    """A stem as the tickets write it most often (the first such, alphabetically, on a tie)."""
    forms = Counter(t.words[stemmed] for t in group if stemmed in t.words)
    return min(forms, key=lambda w: (-forms[w], w))


# --- the read ------------------------------------------------------------------------------------


def gaps_read(*, since: datetime, until: datetime) -> list[GapTicket]:
    """The tickets whose investigations showed a gap in [since, until): a packet written then that asks which
    article should have answered or hands off because no article matched, or a packet whose decision, made then,
    is a rejection because no article answers it. One statement, whatever the number of packets; evaluation runs
    are left out.

    The open questions are looked for in the list's JSON text (PostgreSQL's jsonb as text, SQLite's stored
    text), then checked one by one here: only a question that begins with GAP_QUESTION counts.
    """
    decision = PacketReview.objects.filter(packet=OuterRef("pk"), reviewer__isnull=False).order_by("-created_at", "-id")
    packets = ReviewPacket.objects.filter(run__purpose=Run.Purpose.INVESTIGATION).annotate(
        questions_text=Cast("open_questions", TextField()),
        decision_reason=Subquery(decision.values("reason")[:1]),
        decision_note=Subquery(decision.values("note")[:1]),
        decision_at=Subquery(decision.values("created_at")[:1]),
    )
    asked = Q(questions_text__contains=GAP_QUESTION) | Q(stop_reason=Status.NEEDS_HELP, stop_note__contains=GAP_HANDOFF)
    asked &= Q(created_at__gte=since, created_at__lt=until)
    rejected = Q(
        review_state=ReviewPacket.ReviewState.REJECTED,
        decision_reason=PacketReview.Reason.NO_ARTICLE,
        decision_at__gte=since,
        decision_at__lt=until,
    )
    rows = (
        packets.filter(asked | rejected)
        .order_by("run__ticket__ref", "id")
        .values_list(
            "pk",
            "created_at",
            "open_questions",
            "stop_reason",
            "stop_note",
            "review_state",
            "decision_reason",
            "decision_note",
            "decision_at",
            "run__ticket_id",
            "run__ticket__ref",
            "run__ticket__subject",
            "run__ticket__body",
            named=True,
        )
    )
    by_ticket: dict[int, tuple[str, str, str, list[GapPacket]]] = {}
    for row in rows:
        packet = _gap_packet(row, since=since, until=until)
        if packet is not None:
            ticket = (row.run__ticket__ref, row.run__ticket__subject, row.run__ticket__body, [])
            by_ticket.setdefault(row.run__ticket_id, ticket)[3].append(packet)
    return [
        GapTicket(tid, ref, subject, body, tuple(sorted(found, key=lambda p: (p.at, p.id), reverse=True)))
        for tid, (ref, subject, body, found) in by_ticket.items()
    ]


def _gap_packet(row: Any, *, since: datetime, until: datetime) -> GapPacket | None:
    """A packet's row (gaps_read's) as a GapPacket, or None when it shows no gap in the period after all. Its date
    is that of the latest sign in the period: the rejection's, else the packet's."""
    asking: tuple[str, ...] = ()
    handoff = ""
    if since <= row.created_at < until:
        asking = tuple(q for q in row.open_questions or [] if isinstance(q, str) and q.startswith(GAP_QUESTION))
        if row.stop_reason == Status.NEEDS_HELP and GAP_HANDOFF in row.stop_note:
            handoff = row.stop_note.replace(WHY_HAND_OFF, "").strip()  # what was searched, not why rules hand off
    decided = row.decision_at
    rejected = (
        row.review_state == ReviewPacket.ReviewState.REJECTED
        and row.decision_reason == PacketReview.Reason.NO_ARTICLE
        and decided is not None
        and since <= decided < until
    )
    if not asking and not handoff and not rejected:
        return None
    at = decided if rejected else row.created_at
    return GapPacket(row.pk, at, asking, handoff, rejected, row.decision_note if rejected else "")


# --- the CSV -------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "topic",
    "key_words",
    "topic_tickets",
    "topic_last_at",
    "ticket",
    "subject",
    "last_at",
    "packets",
    "signs",
    "open_questions",
    "handoff_notes",
    "reviewer_notes",
)


def csv_rows(topics: Sequence[Topic]) -> list[tuple]:
    """One row per ticket, in the list's order, header first; each row names its topic (its rank, its key words)."""
    return [
        CSV_COLUMNS,
        *(
            (
                rank,
                " ".join(topic.key_words),
                len(topic.tickets),
                topic.last_at.isoformat(),
                ticket.ref,
                ticket.subject,
                ticket.last_at.isoformat(),
                " ".join(str(p.id) for p in ticket.packets),
                " | ".join(p.how for p in ticket.packets),
                " | ".join(q for p in ticket.packets for q in p.questions),
                " | ".join(p.handoff for p in ticket.packets if p.handoff),
                " | ".join(p.note for p in ticket.packets if p.note),
            )
            for rank, topic in enumerate(topics, start=1)
            for ticket in topic.tickets
        ),
    ]
