"""Customers, their sessions and tickets, and what the agent may read about them."""

from decimal import Decimal

from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import IntegrityError, models

from kit.lines import validate_single_line


class Account(models.Model):
    code = models.CharField(max_length=32, unique=True)
    name = models.CharField(max_length=200)
    workspace = models.CharField(max_length=100, help_text="Current workspace name.")
    # Lists of strings (JSON, so SQLite keeps them too); intake matches them (tickets.services.account_for_intake).
    org_ids = models.JSONField(
        default=list,
        blank=True,
        help_text="The help desk's organization external ids that are this account (comma-separated; any case).",
    )
    email_domains = models.JSONField(
        default=list,
        blank=True,
        help_text="Requesters' e-mail domains that are this account (comma-separated), e.g. acme.example.",
    )
    # Caps on the runs intake starts by itself (AGENT_AUTO_INVESTIGATE); empty follows the settings.
    auto_runs_per_hour = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Automatic investigations this account may get in any hour; empty: AGENT_AUTO_RUNS_PER_HOUR; "
        "0: none.",
    )
    auto_dollars_per_day = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Dollars this account's automatic investigations may spend in a day, the budgets of those still "
        "going counted whole; empty: AGENT_AUTO_DOLLARS_PER_DAY; 0: none.",
    )

    def __str__(self) -> str:
        return self.code

    def save(self, *args, **kwargs) -> None:
        """Ids and domains are kept lower-case: intake matches them whatever case the help desk sends."""
        self.org_ids = [value.strip().lower() for value in self.org_ids if value.strip()]
        self.email_domains = [value.strip().lower().lstrip("@") for value in self.email_domains if value.strip()]
        super().save(*args, **kwargs)


class WorkspaceRename(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="renames")
    old_name = models.CharField(max_length=100)
    new_name = models.CharField(max_length=100)
    renamed_at = models.DateTimeField()

    class Meta:
        ordering = ["renamed_at"]


class CustomerUser(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        EDITOR = "editor"
        VIEWER = "viewer"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="users")
    email = models.EmailField(unique=True)
    role = models.CharField(max_length=16, choices=Role.choices, help_text="Current role.")

    def __str__(self) -> str:
        return self.email


class CustomerSession(models.Model):
    """Who a ticket acts for. A session belongs to its `source`: intake from that help desk makes it and
    keeps its `verified` and user up to date; intake from anywhere else is refused it, and a session made
    here (blank source: staff, the demo) is never intake's to change."""

    ref = models.CharField(max_length=64, unique=True)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="sessions")
    user = models.ForeignKey(CustomerUser, null=True, blank=True, on_delete=models.SET_NULL)
    verified = models.BooleanField(default=False)
    source = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="The help desk that made this session and alone changes it (e.g. zendesk); blank when made here.",
    )

    def __str__(self) -> str:
        return self.ref


class Ticket(models.Model):
    ref = models.CharField(max_length=32, unique=True)
    source = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="The help desk the ticket came from (e.g. zendesk); blank when made here.",
    )
    external_id = models.CharField(max_length=64, blank=True, default="", help_text="The ticket's id in its help desk.")
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="tickets")
    session = models.ForeignKey(CustomerSession, on_delete=models.PROTECT, related_name="tickets")
    subject = models.CharField(max_length=300, validators=[validate_single_line])
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    evaluation_copy = models.BooleanField(
        default=False, help_text="A copy a candidate model's evaluation ran on; hidden from staff lists."
    )
    evidence_count = models.PositiveIntegerField(
        default=0, help_text="Highest evidence number given on this ticket; bumped under the ticket's row lock."
    )
    extra = models.JSONField(
        default=dict, blank=True, help_text="Fields the help desk sent that intake does not read, kept as they came."
    )
    message_count = models.PositiveIntegerField(
        default=0, help_text="Highest message number given on this ticket; bumped under the ticket's row lock."
    )
    external_updated_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the help desk last updated the ticket, as its latest request said; an older request "
        "changes no field.",
    )
    auto_held_at = models.DateTimeField(
        null=True, blank=True, help_text="When a cap of its account kept intake from investigating it."
    )
    auto_held_note = models.CharField(
        max_length=300, blank=True, default="", help_text="Why it was not investigated automatically."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"], condition=~models.Q(external_id=""), name="ticket_external_id_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.ref


class TicketMessage(models.Model):
    """A follow-up on a ticket after its description (the ticket's `body`), numbered 1, 2, … as it arrived.

    Messages are only ever added (tickets.services.ticket_message_add, under the ticket's row lock): a run
    records the highest number it saw (Run.messages_seen), which stays true only if numbers never move.
    They are shown in the order they were written (`written_at`), then of arrival.
    """

    class Author(models.TextChoices):
        CUSTOMER = "customer", "the customer"
        STAFF = "staff", "staff"

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="messages")
    number = models.PositiveIntegerField()
    external_id = models.CharField(
        max_length=64, blank=True, default="", help_text="The comment's id in the help desk; the same id is kept once."
    )
    author = models.CharField(max_length=16, choices=Author.choices)
    body = models.TextField()
    written_at = models.DateTimeField(help_text="When it was written, as the help desk said (else when it arrived).")
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["ticket", "written_at", "number"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "number"], name="ticket_message_number_unique"),
            models.UniqueConstraint(
                fields=["ticket", "external_id"],
                condition=~models.Q(external_id=""),
                name="ticket_message_external_id_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.ticket.ref}#{self.number}"


class IntakeProblem(models.Model):
    """A request intake refused after its signature or token was checked, kept whole for staff.

    Staff give it an account and bring it in (the intake runs again on `body`
    with that account); `ticket` is then the ticket it made or updated.
    """

    received_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=32, help_text="The endpoint it came through (zendesk, api).")
    body = models.TextField(help_text="The request body as it came.")
    code = models.CharField(max_length=64, help_text="Why it was refused (the error code the sender got).")
    reason = models.TextField()
    account = models.ForeignKey(
        Account, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="The account to use."
    )
    ticket = models.ForeignKey(Ticket, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.source} {self.code} at {self.received_at:%Y-%m-%d %H:%M}"


class Evidence(models.Model):
    """One distinct tool result on a ticket, referenced as E1, E2, …"""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="evidence")
    number = models.PositiveIntegerField()
    tool = models.CharField(max_length=64)
    args = models.JSONField(help_text="Normalized arguments.")
    content = models.TextField(help_text="Canonical JSON text of the result (cut when truncated).")
    content_hash = models.CharField(max_length=64)
    source_ref = models.CharField(max_length=200, blank=True)
    truncated = models.BooleanField(default=False)
    captured_at = models.DateTimeField()
    run = models.ForeignKey("agentrun.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["ticket", "number"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "number"], name="evidence_number_unique"),
            models.UniqueConstraint(fields=["ticket", "content_hash"], name="evidence_content_unique"),
        ]
        verbose_name_plural = "evidence"

    @property
    def ref(self) -> str:
        return f"E{self.number}"

    def __str__(self) -> str:
        return f"{self.ticket.ref}/{self.ref}"


class Document(models.Model):
    code = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=300, validators=[validate_single_line])
    public = models.BooleanField(default=True)
    origin = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="The file it was last imported from (absolute path), or `zendesk-guide:` and the Guide listing "
        "(its URL or saved file); blank when written otherwise. `import_docs --prune` retires only documents whose "
        "file is gone from the folder it imports, or that their listing no longer lists.",
    )
    url = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="Where staff and customers read it (a file's `permalink`, or `import_docs --base-url` plus its path; "
        "a Zendesk Guide article's `html_url`).",
    )
    metadata = models.JSONField(
        blank=True,
        default=dict,
        help_text="The front matter `import_docs` does not act on (layout, tags, aliases, redirect_from…), kept as "
        "written; for a Zendesk Guide article its id, locale, section, labels, updated_at, outdated and promoted.",
    )

    def __str__(self) -> str:
        return self.code


class RevisionFrozen(IntegrityError):
    """A published revision's text, number or document was to change: publish a new revision instead."""


class DocumentRevision(models.Model):
    """One published text of a document. Evidence cites it ("DOC-RENAME-2 r1"), so once written its
    body, number and document never change: new text is a new revision (tickets.services.document_publish).
    Only `is_current` moves. `save()` refuses a change here, and the database's trigger (migration 0007)
    refuses it from any other writer, a queryset's `update()` or plain SQL included.
    """

    FROZEN = ("document_id", "number", "body")

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    body = models.TextField()
    is_current = models.BooleanField(default=False)
    published_at = models.DateTimeField()
    # Written by PostgreSQL's triggers alone (migration 0002: the title weighs A, the body B), whatever
    # writes the revision or its document's title; always empty elsewhere (documents_search).
    search_vector = SearchVectorField(null=True, editable=False)

    class Meta:
        ordering = ["document", "number"]
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="revision_number_unique"),
            models.UniqueConstraint(
                fields=["document"], condition=models.Q(is_current=True), name="one_current_revision"
            ),
        ]

    @property
    def label(self) -> str:
        return f"r{self.number}"

    def __str__(self) -> str:
        return f"{self.document.code}@{self.label}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            self._frozen_check(kwargs.get("update_fields"))
        super().save(*args, **kwargs)

    def _frozen_check(self, update_fields) -> None:
        """Raise RevisionFrozen when this save would write another document, number or body over the stored ones."""
        names = [n for n in self.FROZEN if update_fields is None or {n, n.removesuffix("_id")} & set(update_fields)]
        if not names:
            return
        stored = type(self).objects.filter(pk=self.pk).values_list("document__code", "number", *names).first()
        if stored is not None and stored[2:] != tuple(getattr(self, name) for name in names):
            raise RevisionFrozen(
                f"{stored[0]} r{stored[1]} is published and its text never changes: publish a new revision instead."
            )


class SearchSynonym(models.Model):
    """Words and phrases that mean the same to the knowledge base's search ("2FA, two-step login").

    A query holding any of them finds documents holding any other (tickets.search).
    """

    words = models.CharField(
        max_length=500,
        unique=True,
        validators=[validate_single_line],
        help_text="Two or more words or phrases that mean the same, comma-separated: 2FA, two-step login.",
    )

    class Meta:
        ordering = ["words"]
        verbose_name = "search synonym"

    def __str__(self) -> str:
        return self.words

    def phrases(self) -> list[str]:
        return [p.strip() for p in self.words.split(",") if p.strip()]

    def clean(self) -> None:
        if len(set(p.casefold() for p in self.phrases())) < 2:
            raise ValidationError({"words": "Give two or more words or phrases, comma-separated."})


class Job(models.Model):
    ref = models.CharField(max_length=16, unique=True)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=64)
    status = models.CharField(max_length=32)
    error_code = models.CharField(max_length=64, blank=True)
    requested_by = models.ForeignKey(CustomerUser, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    sensitive = models.BooleanField(default=False, help_text="Lookups may need a supervisor's approval.")

    def __str__(self) -> str:
        return self.ref


class Service(models.Model):
    name = models.CharField(max_length=32, unique=True)
    status = models.CharField(max_length=32)

    def __str__(self) -> str:
        return self.name


class Incident(models.Model):
    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="incidents")
    ref = models.CharField(max_length=32, unique=True)
    title = models.CharField(max_length=300, validators=[validate_single_line])
    status = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return self.ref
