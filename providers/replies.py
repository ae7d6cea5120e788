"""The suggested reply to the customer: what a packet offers staff to edit and send from the help desk.

The agent never answers the customer: a person reads the reply, edits it and sends it. So a reply says only
what the evidence it was written from supports, in plain language: no internal field names, no JSON, no
evidence markers, times as a customer reads them, links only to the public addresses of the articles it
cites. The rule-based investigator writes one from its templates (`ReplyWriter`); a model may fill
`submit_draft`'s `reply`, checked by `reply_problem` (its form) and by the engine against the cited evidence.
A packet whose run found something but drafted nothing gets the holding reply of its stop (`holding_reply`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

MAX_REPLY = 3000
GREETING = "Hello,"
SIGN_OFF = "Best regards,"

# What a customer must never read in a reply: a JSON object, an evidence marker (the packet's, not theirs), a
# field name such as error_code or requester_current_role (snake case in lower case; an upper-case error code
# such as EXPORT_ROLE_REQUIRED is what the customer saw, and may be named).
_JSON = re.compile(r"[{\[]\s*\"")
_FIELD_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
MARKER = re.compile(r"\s?\[(E\d+(?:\s*,\s*E\d+)*)\]")
URL = re.compile(r"https?://[^\s<>()\"']+[^\s<>()\"'.,;:!?]")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$")

# Said when the run stopped before an answer was drafted; the evidence stays for staff, the customer hears that
# a person is on it. Keys: the stop statuses (engine.statuses.Status's values).
# A handoff (NEEDS_HELP) says the findings are not enough to say anything: no reply then.
HOLDING = {
    "CANCELLED": "A colleague is looking into it and will come back to you with an answer.",
}
HOLDING_DEFAULT = "We are still looking into it and will come back to you with an answer."
NO_HOLDING = frozenset({"NEEDS_HELP", "COMPLETED"})
CLOSED = frozenset({"resolved", "completed", "postmortem"})  # incidents that are over (Statuspage's words)


def reply_problem(text: str) -> str | None:
    """What is wrong with a reply's form (None: nothing): its length, JSON, or an internal field name."""
    if len(text) > MAX_REPLY:
        return f"reply is longer than {MAX_REPLY} characters"
    if _JSON.search(text):
        return "reply holds JSON; write to the customer in plain language"
    field_name = _FIELD_NAME.search(URL.sub(" ", text))
    if field_name:
        return f"reply names the internal field {field_name.group(0)!r}; say it in plain language"
    return None


def reply_refs(text: str) -> list[str]:
    """The evidence markers a reply holds ([E1], [E2, E3]), each once, in order."""
    refs = [ref.strip() for group in MARKER.findall(text) for ref in group.split(",")]
    return list(dict.fromkeys(refs))


def without_markers(text: str) -> str:
    """The reply as the customer reads it: the evidence markers taken out."""
    return MARKER.sub("", text)


def reply_urls(text: str) -> list[str]:
    return list(dict.fromkeys(URL.findall(text)))


def customer_time(value: str) -> str:
    """An ISO timestamp as a customer reads it ("14 September 2026 at 10:02 UTC"); anything else unchanged."""
    if not _ISO.match(value or ""):
        return value
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    offset = moment.utcoffset()
    zone = "UTC" if not offset else moment.strftime("UTC%z")
    return f"{moment.day} {moment.strftime('%B %Y at %H:%M')} {zone}"


def holding_reply(*, status: str, subject: str) -> str:
    """The reply of a packet whose run found something but stopped before an answer: thanks, and a person is on
    it; "" for a handoff (the findings were not enough to say anything) or a draft without a reply."""
    if status in NO_HOLDING:
        return ""
    said = HOLDING.get(status, HOLDING_DEFAULT)
    return "\n\n".join([GREETING, f"Thank you for writing to us about “{subject.strip()}”. {said}", SIGN_OFF])


@dataclass
class ReplyWriter:
    """A reply put together from what the evidence says, one paragraph per finding, in the order found."""

    paragraphs: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (title, public URL) of each article cited

    def job(self, job: dict, *, explained_by: dict | None = None) -> None:
        """A job's outcome; with the article that documents its error, what the article says and its link."""
        kind = str(job.get("kind") or "job").replace("_", " ")
        status = str(job.get("status") or "").replace("_", " ")
        when = job.get("failed_at") or job.get("finished_at")
        at = f" on {customer_time(str(when))}" if when else ""
        said = f"We looked at your {kind} {job.get('job_id')}: it {status}{at}"
        if job.get("error_code"):
            said += f" with the error {job['error_code']}"
        if explained_by is None:
            self.paragraphs.append(said + ".")
            return
        self.paragraphs.append(f"{said}. {self._article(explained_by, lead='explains what this error means')}")

    def article(self, doc: dict) -> None:
        """An article that answers a problem the ticket states."""
        self.paragraphs.append(self._article(doc, lead="should help with this"))

    def service(self, status: dict, *, news_only: bool = False) -> None:
        """A service's state as its status source gives it, with the incidents still open; `news_only`: said only
        when something is wrong (a service working normally is news only when nothing else was found)."""
        name, state = status.get("service"), str(status.get("status") or "").replace("_", " ")
        incidents = [i for i in status.get("incidents", []) if i.get("title") and i.get("status") not in CLOSED]
        if not incidents and state == "operational":
            if not news_only:
                self.paragraphs.append(f"Our {name} service is working normally at the moment.")
            return
        listed = "; ".join(f"“{i['title']}” ({str(i.get('status') or '').replace('_', ' ')})" for i in incidents)
        self.paragraphs.append(
            f"Our {name} service is currently {state}." + (f" Our status page lists: {listed}." if listed else "")
        )

    def text(self) -> str:
        """The reply, or "" when nothing was found to say."""
        if not self.paragraphs:
            return ""
        closing = "If you have any questions, reply to this message and we will look further."
        reply = "\n\n".join([GREETING, *self.paragraphs, closing, SIGN_OFF])
        return reply if len(reply) <= MAX_REPLY else reply[: MAX_REPLY - 1].rsplit(" ", 1)[0] + "…"

    def _article(self, doc: dict, *, lead: str) -> str:
        title = str(doc.get("title") or doc.get("id"))
        passage = " ".join(str(doc.get("excerpt") or "").split()).strip("…").strip()
        url = doc.get("url") if str(doc.get("url") or "").startswith(("https://", "http://")) else ""
        if url:
            self.links.append((title, url))
        quoted = f" It says: “{passage}”" if passage else ""
        read = f" You can read it here: {url}" if url else ""
        return f"Our article “{title}” {lead}.{quoted}{read}"
