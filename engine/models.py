"""Runs and what they spent. Counters and statuses are written only by engine.services."""

from __future__ import annotations

import copy
import zoneinfo
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from engine.budgets import Bound, Budget, Tally, Usage, budget_limits
from engine.statuses import ACTIVE, Detail, Status
from tools.compare import Outcome


class Run(models.Model):
    class Purpose(models.TextChoices):
        INVESTIGATION = "investigation"
        EVALUATION = "evaluation", "evaluation of a candidate model"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.PROTECT, related_name="runs")
    session = models.ForeignKey("tickets.CustomerSession", on_delete=models.PROTECT, related_name="runs")
    # The ticket's text as the run was shown it: a ticket updated later (intake) leaves the run's context
    # and its packet as they were.
    subject = models.CharField(
        max_length=300, blank=True, default="", help_text="The ticket's subject when the run started."
    )
    body = models.TextField(blank=True, default="", help_text="The ticket's body when the run started.")
    # Messages are never changed or renumbered (tickets.TicketMessage), so the number is the snapshot.
    messages_seen = models.PositiveIntegerField(
        default=0, help_text="The highest message number on the ticket when the run started (0: the description alone)."
    )
    # Indexed by (status, deadline_at) below, which serves a filter on status alone too; every
    # further index on a run is written again each time a step changes the status.
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.QUEUED)
    detail = models.CharField(max_length=24, choices=Detail.choices, blank=True, default="")
    stop_note = models.TextField(blank=True, default="")
    model_name = models.CharField(max_length=120)
    model_script = models.JSONField(
        null=True, blank=True, help_text="Replay model and tool faults of a scenario run; null for real runs."
    )
    require_approval = models.JSONField(default=list, blank=True, help_text="Tools whose calls need approval.")
    budget = models.JSONField(help_text="The budget this run was started with; never changed.")
    purpose = models.CharField(
        max_length=16,
        choices=Purpose.choices,
        default=Purpose.INVESTIGATION,
        help_text="An evaluation run replays a reviewed packet's ticket for a candidate model; it never enters "
        "the review queue, the outcomes dashboard or the webhook.",
    )

    model_requests = models.PositiveIntegerField(default=0)
    tool_attempts = models.PositiveIntegerField(default=0)
    validation_errors = models.PositiveIntegerField(default=0)
    tokens_reserved = models.PositiveBigIntegerField(default=0)
    tokens_used = models.PositiveBigIntegerField(default=0)
    cost_reserved_micros = models.PositiveBigIntegerField(default=0)
    cost_used_micros = models.PositiveBigIntegerField(default=0)
    last_executed_key = models.TextField(blank=True, default="", help_text="Tool and arguments dispatched last.")
    evidence_refs = models.JSONField(default=list, blank=True, help_text="References produced or reused, in order.")
    pending_call = models.JSONField(null=True, blank=True, help_text="The call waiting for approval.")
    cancel_requested = models.BooleanField(default=False)

    created_at = models.DateTimeField(default=timezone.now)
    deadline_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=0, help_text="Bumped by every committed step.")
    lease_owner = models.CharField(max_length=200, blank=True, default="", help_text="Worker driving the run.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    # Not columns: set by engine.sql.run_locked (and run_relocked) on the run a step holds.
    tally: Tally  # its request and attempt rows, as of the step
    # Its attempts as its packet lists them (engine.packets.packet_attempt), kept by the steps that reserve and
    # settle them: set (empty) only on a run read before its first attempt, so that it lists every one of them.
    attempts_listed: list[dict[str, Any]]
    _session_row: tuple[Any, ...]  # the customer session's columns its `session` was built from
    # Set by from_db: each column's value as read (by attname), kept in step by fields_saved.
    _loaded_values: dict[str, Any]

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "deadline_at"]),
            # The staff lists (admin, API) newest first and the dashboard's periods, always of one purpose: at
            # 100,000 runs the run list sorted every run for its first page (730 ms). None of these columns
            # changes after the insert, so a step's update stays a HOT update.
            models.Index(fields=["purpose", "created_at", "id"], name="run_by_purpose_created"),
            # The run list's filter by model reads the names through it (engine.selectors.run_model_names).
            models.Index(fields=["model_name"], name="run_model_name"),
            # Lists of what investigations produced (the review queue's packets, approvals) join their runs for the
            # purpose: counting a page's 10,001 packets read each run from the table (80 ms at 100,000 runs), and
            # merges with this index alone. Neither column changes after the insert.
            models.Index(fields=["purpose", "id"], name="run_by_purpose_id"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} on {self.ticket_id}"

    @classmethod
    def from_db(cls, db, field_names, values):
        """A run as read, keeping a copy of what was read: a step writes what it changed (`fields_changed`)."""
        run = super().from_db(db, field_names, values)
        run._loaded_values = {
            name: _snapshot(value)
            for name, value in zip(field_names, values, strict=True)
            if value is not models.DEFERRED
        }
        return run

    def fields_changed(self) -> list[str]:
        """The fields set to another value since the run was read or last saved (`fields_saved`): what a
        step writes, so that no field a step sets can be left out. Every field, for a run never read."""
        loaded = self.__dict__.get("_loaded_values")
        if loaded is None:
            return [f.name for f in Run._meta.concrete_fields if not f.primary_key]
        return [
            f.name
            for f in Run._meta.concrete_fields
            if f.attname in self.__dict__ and (f.attname not in loaded or loaded[f.attname] != self.__dict__[f.attname])
        ]

    def fields_saved(self, names: list[str]) -> None:
        """The named fields are written as they are now (held with the step's writes, which commit or fail with it)."""
        loaded = self.__dict__.setdefault("_loaded_values", {})
        for name in names:
            attname = column_field(Run, name).attname
            loaded[attname] = _snapshot(self.__dict__[attname])

    def fields_read(self, **values) -> None:
        """Values just read from the database: set, and known as stored."""
        for name, value in values.items():
            setattr(self, name, value)
        self.fields_saved(list(values))

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    def get_budget(self) -> Budget:
        """The run's budget (fixed when the run was created, so read once per instance)."""
        cached = self.__dict__.get("_budget")
        if cached is None or cached[0] is not self.budget:
            cached = self.__dict__["_budget"] = (self.budget, Budget.from_mapping(self.budget))
        return cached[1]

    def usage(self) -> Usage:
        return Usage(
            model_requests=self.model_requests,
            tool_attempts=self.tool_attempts,
            tokens_used=self.tokens_used,
            tokens_reserved=self.tokens_reserved,
            cost_used=self.cost_used_micros,
            cost_reserved=self.cost_reserved_micros,
        )

    def time_left(self, now=None) -> float:
        return (self.deadline_at - (now or timezone.now())).total_seconds()


def _snapshot(value: Any) -> Any:
    """A value as it is now, for `fields_changed` to compare with later: a copy of a JSON field's list or
    dict (changed in place, it would compare equal), the value itself otherwise (it cannot change)."""
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


@cache
def column_field(model: type[models.Model], name: str) -> models.Field:
    """The field `name` (or "pk") of `model`, one with a column of its own. `_meta.get_field` may also
    answer a reverse relation or a generic foreign key, which have none: asking for one is a mistake here."""
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.concrete, f"{model.__name__}.{name} has no column"
    return field


class ModelRequest(models.Model):
    class Outcome(models.TextChoices):
        PENDING = "pending"
        OK = "ok"
        MALFORMED = "malformed"
        INVALID_DRAFT = "invalid_draft"
        ERROR = "error"
        TIMEOUT = "timeout"
        DEADLINE = "deadline"
        USAGE_OVERRUN = "usage_overrun"
        INTERRUPTED = "interrupted"

    # No index of its own: the unique (run, seq) constraint leads with the run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="model_request_rows", db_index=False)
    seq = models.PositiveIntegerField(help_text="1-based, per run, in this run's records.")
    reserved_tokens = models.PositiveBigIntegerField()
    reserved_cost_micros = models.PositiveBigIntegerField()
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="As reported.")
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="As reported.")
    charged_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    charged_cost_micros = models.PositiveBigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.PENDING)
    proposal = models.CharField(max_length=200, blank=True, help_text="What the reply proposed, briefly.")
    validation_error = models.TextField(blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="model_request_seq_unique")]


class ToolAttempt(models.Model):
    class Outcome(models.TextChoices):
        PENDING = "pending"
        OK = "ok"
        ERROR = "error"
        TRANSIENT_ERROR = "transient_error"
        TIMEOUT = "timeout"
        INTERRUPTED = "interrupted"

    # No index of its own: the unique (run, seq) constraint leads with the run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    seq = models.PositiveIntegerField()
    call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=64)
    args = models.JSONField(help_text="Normalized arguments.")
    call_key = models.TextField()
    retry_number = models.PositiveSmallIntegerField(default=0, help_text="0 for a proposed call, n for its n-th retry.")
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.PENDING)
    result_excerpt = models.TextField(blank=True)
    error = models.TextField(blank=True)
    evidence = models.ForeignKey("tickets.Evidence", null=True, blank=True, on_delete=models.SET_NULL)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="tool_attempt_seq_unique")]


class Observation(models.Model):
    """What the model was shown besides evidence: a reused receipt, a failure, a validation error.

    A DISCARDED observation records a late result refused by the run's steps; it is never shown to the model.
    """

    class Kind(models.TextChoices):
        VALIDATION_ERROR = "validation_error", "reply not used"
        RECEIPT_REUSED = "receipt_reused", "call already made"
        INTERRUPTED = "interrupted", "call interrupted"
        TOOL_FAILURE = "tool_failure", "lookup failed"
        DISCARDED = "discarded_late_result", "late result discarded"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="observations")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    text = models.TextField()
    evidence_ref = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "id"]


class Approval(models.Model):
    """A supervisor's answer for one exact call of one run; used at most once."""

    class State(models.TextChoices):
        PENDING = "pending"
        GRANTED = "granted"
        DENIED = "denied"
        USED = "used"
        EXPIRED = "expired"

    class Answer(models.TextChoices):
        """A supervisor's answer, as the API and the run page send it."""

        GRANT = "grant"
        DENY = "deny"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    tool = models.CharField(max_length=64)
    args = models.JSONField()
    call_key = models.TextField()
    call_id = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    requested_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=150, blank=True)
    reason = models.CharField(
        max_length=300,
        blank=True,
        default="",
        help_text="Why the call needs approval, recorded when the approval is asked for.",
    )
    note = models.TextField(blank=True, default="", help_text="The supervisor's reason for a denial.")

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run"], condition=models.Q(state="pending"), name="one_pending_approval_per_run"
            )
        ]


def queue_place() -> models.Case:
    """A packet's place in the review queue of every state: 0 when pending (ReviewPacket.ReviewState.PENDING,
    written out since ReviewPacket.Meta's index needs it before the class exists), 1 otherwise."""
    return models.Case(
        models.When(review_state="pending", then=models.Value(0)),
        default=models.Value(1),
        output_field=models.IntegerField(),
    )


class ReviewPacket(models.Model):
    """What staff review. Written once when the run ends; reviews never edit it."""

    class ReviewState(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        SUPERSEDED = "superseded"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="packet")
    summary = models.TextField(null=True, blank=True)
    evidence_refs = models.JSONField(default=list)
    attempts = models.JSONField(default=list)
    open_questions = models.JSONField(default=list)
    stop_reason = models.CharField(max_length=24, choices=Status.choices)
    detail = models.CharField(max_length=24, choices=Detail.choices, blank=True, default="")
    stop_note = models.TextField(blank=True, default="")
    refused = models.JSONField(
        null=True,
        blank=True,
        help_text="The proposal the run ended on (tool, args, id) and why, in words for staff only.",
    )
    budget_spent = models.JSONField(default=dict)
    reply = models.TextField(
        blank=True,
        default="",
        help_text="The suggested reply to the customer, for staff to edit and send; empty when nothing was found.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    review_state = models.CharField(
        max_length=16, choices=ReviewState.choices, default=ReviewState.PENDING, db_index=True
    )
    # What the packet's decision says beside its state, kept by the review that makes it (staff.reviews), so the
    # outcomes dashboard counts a year of packets in the database instead of reading every review of each.
    review_reason = models.CharField(
        max_length=24, blank=True, default="", help_text="The reason the deciding rejection gave; empty otherwise."
    )
    first_reviewed_at = models.DateTimeField(null=True, blank=True, help_text="When a person first reviewed it.")
    reply_change = models.FloatField(
        null=True,
        blank=True,
        help_text="Accepted with its suggested reply kept: how far the kept reply is from the suggestion (edit "
        "distance over the longer length); empty otherwise.",
    )
    # The run's start and purpose, copied when the packet is written (neither changes), so the dashboard counts
    # a period's packets from this table alone instead of reading each one's run (staff.dashboard).
    run_created_at = models.DateTimeField(null=True, blank=True)
    run_purpose = models.CharField(max_length=16, choices=Run.Purpose.choices, default=Run.Purpose.INVESTIGATION)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            # The review queue, oldest first, of one state or of all with the pending first (staff.admin.packets):
            # at 100,000 packets the queue sorted them all for its first page (1.2 s for every state).
            models.Index(fields=["review_state", "created_at", "id"], name="packet_queue"),
            # The review history, in its packets' order (PacketReview.Meta.ordering): it sorted every packet (400 ms).
            models.Index(fields=["created_at", "id"], name="packet_created"),
            models.Index(queue_place(), "created_at", "id", name="packet_pending_first"),
            models.Index(fields=["run_purpose", "run_created_at"], name="packet_by_run_created"),
            # The queue's count of one state takes its packets' runs from here (with run_by_purpose_id): it read
            # every packet of the state from the table first (the rejected ones: 150 ms at 100,000 packets).
            models.Index(fields=["review_state", "run"], name="packet_state_run"),
        ]

    def __str__(self) -> str:
        return f"packet of run {self.run_id} ({self.stop_reason})"


# --- staff surfaces: who asked, reviews, API tokens ---------------------------------


class RunRequest(models.Model):
    """Who started a run, from where, and the Idempotency-Key that makes a retried start return it."""

    class Via(models.TextChoices):
        ADMIN = "admin", "the admin"
        API = "api", "the API"
        INTAKE = "intake", "help desk intake"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="request")
    requested_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="run_requests"
    )
    via = models.CharField(max_length=16, choices=Via.choices)
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The staff capabilities; engine.roles gives them to the two groups.
        permissions = [
            ("start_investigation", "Can start investigations"),
            ("review_packet", "Can accept or reject review packets"),
            ("cancel_run", "Can cancel runs"),
            ("answer_approval", "Can approve or deny a waiting call"),
            ("view_dashboard", "Can see the outcomes dashboard"),
            ("change_budget_defaults", "Can edit budget defaults"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_request_idempotency_unique",
            )
        ]


class AppendOnly(models.Model):
    """Rows written once: saving one again, or deleting it, raises ValueError."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError(f"{self._meta.verbose_name_plural} are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError(f"{self._meta.verbose_name_plural} are append-only")


class PacketReview(AppendOnly):
    """One decision on a review packet. Append-only: never changed or deleted.

    A staff member accepts or rejects; the system (no reviewer) marks a pending packet
    superseded when a newer packet is written for the same ticket.
    """

    class Decision(models.TextChoices):
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        SUPERSEDED = "superseded"

    class Reason(models.TextChoices):
        """Why a packet was rejected: one of a closed set, with the note in the reviewer's words."""

        WRONG_CONCLUSION = "wrong_conclusion", "wrong conclusion"
        EVIDENCE = "evidence", "missing or wrong evidence"
        SHOULD_HAVE_LOOKED = "should_have_looked", "should have looked something up"
        NO_ARTICLE = "no_article", "no article answers it"
        UNCLEAR = "unclear", "unclear"
        NOT_USEFUL = "not_useful", "not useful to the customer"
        OTHER = "other", "other"

    class Action(models.TextChoices):
        """What a reviewer asks for, as the API and the packet page send it; `decision` is what is recorded."""

        ACCEPT = "accept"
        REJECT = "reject"

        @property
        def decision(self) -> PacketReview.Decision:
            return PacketReview.Decision.ACCEPTED if self == self.ACCEPT else PacketReview.Decision.REJECTED

    packet = models.ForeignKey(ReviewPacket, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="packet_reviews",
        help_text="Empty for a system entry.",
    )
    decision = models.CharField(max_length=16, choices=Decision.choices)
    note = models.TextField(blank=True, default="")
    reason = models.CharField(
        max_length=24, choices=Reason.choices, blank=True, default="", help_text="Why it was rejected."
    )
    reply = models.TextField(
        blank=True,
        default="",
        help_text="The reply as the reviewer kept it (the suggestion, edited or not); empty when none was kept.",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    acknowledged_changed_evidence = models.BooleanField(
        default=False, help_text="The reviewer said they accept knowing that cited evidence changed or is gone."
    )
    changed_evidence = models.JSONField(
        default=list, blank=True, help_text="The evidence refs re-checked as changed or gone when accepted."
    )

    class Meta:
        ordering = ["packet", "created_at", "id"]
        indexes = [
            # A packet's reviews in order: its first review and the one its state stands on (its latest by a
            # person) are read per packet by the packet page, the queue's reason filter and the dashboard;
            # without it PostgreSQL walks created_at's index backwards over every review for each packet.
            models.Index(fields=["packet", "created_at", "id"], name="packetreview_in_order"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} by {self.reviewer_id or 'the system'} on packet {self.packet_id}"


class ApiToken(models.Model):
    """A per-user bearer token. Only its SHA-256 digest is stored; the token is shown once."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    source = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="The help desk (a ticket's source, e.g. zendesk) an integration's token sends tickets for; "
        "POST /api/tickets refuses any other. Blank for staff tokens.",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


def default_time_zone() -> str:
    return settings.TIME_ZONE


def validate_time_zone(value: str) -> None:
    if value not in available_time_zones():
        raise ValidationError(f"{value!r} is not a time zone name (such as Europe/Berlin or America/New_York).")


@cache
def available_time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


class StaffPreference(models.Model):
    """One person's settings for the staff pages: the time zone times are shown in."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="staff_preference")
    time_zone = models.CharField(
        max_length=64,
        default=default_time_zone,
        validators=[validate_time_zone],
        help_text="Times on the staff pages are shown in this zone.",
    )

    class Meta:
        verbose_name = "my preferences"
        verbose_name_plural = "my preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class BudgetDefaults(models.Model):
    """Supervisors' overrides of the budget new runs start with; one row. Empty fields keep the default.

    Applied over settings.AGENT_BUDGET_DEFAULTS by engine.config.default_budget. A running
    run keeps the budget it started with.
    """

    # One nullable field per limit of Budget, added below from its declaration.
    updated_by = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    FIELDS = tuple(budget_limits())

    class Meta:
        verbose_name = verbose_name_plural = "budget defaults"

    def __str__(self) -> str:
        return "Budget defaults for new runs"

    def overrides(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in self.FIELDS if getattr(self, name) is not None}

    @classmethod
    def current_overrides(cls) -> dict[str, int | float]:
        row = cls.objects.filter(pk=1).first()
        return row.overrides() if row else {}


def override_field(kind: type, bound: Bound) -> models.Field:
    """The column that holds a supervisor's override of one budget limit; empty keeps the default."""
    if kind is float:
        return models.FloatField(null=True, blank=True)
    return (models.PositiveBigIntegerField if bound.wide else models.PositiveIntegerField)(null=True, blank=True)


for _name, (_kind, _bound) in budget_limits().items():
    BudgetDefaults.add_to_class(_name, override_field(_kind, _bound))


# --- packet notifications to the help desk -----------------------------------------


class WebhookDelivery(models.Model):
    """One message to the help desk: recorded in the transaction that caused it, sent after it commits
    (integrations.webhooks). The payload is exactly what is sent, as JSON; it never changes.

    `target` says where it goes: the packet webhook (a signed event, `AGENT_PACKET_WEBHOOK_URL`), or a
    private note on the Zendesk ticket `ticket_external_id` (integrations.zendesknotes). Both go
    through the same claim, attempts and retries."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    class Target(models.TextChoices):
        WEBHOOK = "webhook", "packet webhook"
        ZENDESK_NOTE = "zendesk_note", "Zendesk note"

    class EventType(models.TextChoices):
        PACKET_WRITTEN = "packet.written"
        PACKET_REVIEWED = "packet.reviewed"
        APPROVAL_WAITING = "approval.waiting"

    event_id = models.UUIDField(unique=True, help_text="The event's id, sent as its `id`.")
    event_type = models.CharField(max_length=32, choices=EventType.choices)
    target = models.CharField(max_length=16, choices=Target.choices, default=Target.WEBHOOK)
    ticket_external_id = models.CharField(
        max_length=64, blank=True, default="", help_text="The Zendesk ticket a note goes to; blank for the webhook."
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="When a pending delivery is due.")
    claimed_until = models.DateTimeField(
        null=True, blank=True, help_text="A sender holds the delivery until then; nobody else sends it meanwhile."
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id}"


class WebhookAttempt(models.Model):
    """One try at sending a delivery: its HTTP status, or the error that stood for one."""

    class Outcome(models.TextChoices):
        DELIVERED = "delivered"
        RETRY = "retry", "failed, tried again"
        FAILED = "failed", "failed for good"

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    latency_ms = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="webhook_attempt_number_unique")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}"


class EvidenceCheck(AppendOnly):
    """One re-read of an evidence item's source when its packet was opened. Append-only.

    Written only when a check ran (a result reused from the cache writes nothing);
    staff.recheck writes them.
    """

    evidence = models.ForeignKey("tickets.Evidence", on_delete=models.CASCADE, related_name="checks")
    packet = models.ForeignKey(ReviewPacket, on_delete=models.CASCADE, related_name="evidence_checks")
    checked_at = models.DateTimeField(default=timezone.now)
    checked_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="evidence_checks"
    )
    result = models.CharField(max_length=16, choices=Outcome.choices)
    differences = models.JSONField(default=list, blank=True, help_text="Each field that reads differently now.")
    reason = models.TextField(blank=True, default="", help_text="Why the source is gone or could not be checked.")

    class Meta:
        ordering = ["-checked_at", "-id"]
        indexes = [models.Index(fields=["evidence", "checked_at"])]

    def __str__(self) -> str:
        return f"{self.result} check of evidence {self.evidence_id} on packet {self.packet_id}"


# --- candidate models tested against reviewed packets ---------------------------------


class Evaluation(models.Model):
    """A candidate model run over the tickets of reviewed packets (evaluation.services)."""

    class Reviewed(models.TextChoices):
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        ALL = "all"

    candidate_model = models.CharField(max_length=120)
    model_script = models.JSONField(null=True, blank=True, help_text="The replies of a replay candidate.")
    reviewed = models.CharField(max_length=16, choices=Reviewed.choices, default=Reviewed.ACCEPTED)
    since = models.DateTimeField(null=True, blank=True, help_text="Only packets written since then.")
    limit = models.PositiveIntegerField(null=True, blank=True)
    live_tools = models.BooleanField(default=False, help_text="Tools read the live backends, not the recorded results.")
    created_by = models.CharField(max_length=150, blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    figures = models.JSONField(default=dict, blank=True, help_text="Agreement, rates, costs and regressions.")

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"evaluation {self.pk} of {self.candidate_model}"


class EvaluationCase(models.Model):
    """One reviewed packet's ticket, run again by the candidate."""

    class State(models.TextChoices):
        PENDING = "pending"
        DONE = "done"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="cases")
    original_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluated_in")
    candidate_run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluation_case"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    original_review = models.CharField(max_length=16, choices=ReviewPacket.ReviewState.choices, blank=True, default="")
    original_reason = models.CharField(
        max_length=24,
        choices=PacketReview.Reason.choices,
        blank=True,
        default="",
        help_text="Why the original packet was rejected (its decision's reason); empty for an accepted one.",
    )
    status = models.CharField(max_length=24, choices=Status.choices, blank=True, default="")
    detail = models.CharField(max_length=24, choices=Detail.choices, blank=True, default="")
    drafted = models.BooleanField(default=False)
    original_drafted = models.BooleanField(default=False)
    cited_sources = models.JSONField(default=list, blank=True, help_text="Tool and arguments of each cited item.")
    accepted_sources = models.JSONField(default=list, blank=True, help_text="The original packet's cited sources.")
    overlap = models.FloatField(null=True, blank=True, help_text="Share of the original's sources cited again.")
    model_requests = models.PositiveIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0)
    cost_micros = models.PositiveBigIntegerField(default=0)
    original_cost_micros = models.PositiveBigIntegerField(default=0)
    wall_seconds = models.FloatField(null=True, blank=True)
    agreed = models.BooleanField(default=False, help_text="Drafted as the original did, citing all its sources.")
    regression = models.BooleanField(default=False, help_text="Accepted before; now no draft or fewer sources.")

    class Meta:
        ordering = ["evaluation", "id"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "original_run"], name="evaluation_case_unique")]

    def __str__(self) -> str:
        return f"case of run {self.original_run_id} in evaluation {self.evaluation_id}"
