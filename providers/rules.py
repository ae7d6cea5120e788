"""A deterministic rule-based investigator. It is rules, not a language model.

It reads the ticket (its subject, description and the customer's follow-up messages) and the
evidence it is shown, one decision a turn:
1. look up every job the ticket mentions (ids of AGENT_JOB_ID_PATTERN's shape, J-<digits> by default);
2. search the documentation for every error code seen (in the ticket or a job);
3. unless a documented error code already explains a failed job, search the documentation with the
   ticket's own words: its subject, then, until an article answers, each distinct problem its
   messages state (greetings, signatures and quoted history left out), up to MAX_PROBLEM_SEARCHES
   while the budget leaves room for the draft; an article is cited only when it matches well (MATCH_THRESHOLD), quoting the
   passage that matched, and a problem no article answers becomes an open question;
4. check the services the ticket names, unless a documented error code already
   explains a failed job or an article answers the ticket's problem: the operator's services it mentions by name (the catalog
   the engine read into the context), and the demo's four by their usual words
   ("CSV" is the export service) where the catalog lists them;
5. draft a packet citing the evidence it used, listing what it could not establish, with a suggested reply
   to the customer written from the same findings (providers.replies: the job's outcome, the article and the
   passage that answers, a service's trouble, each article's public link); with nothing to cite, hand off, saying what it looked up and found, and why that is not enough.
It reports no token usage: it spends none.

A lookup that got no answer (its service could not be reached, it did not answer in time, or a worker restart
cut it off: LOST) is never passed over in silence. The rules make it once more, later: not as their very next
call, since repeating the call just made ends a run as NO_PROGRESS, but after another lookup, while one
is left to make (a lookup tried twice without an answer is not tried again). Still unanswered when the draft is
written, it is named in the open questions with its reason, the summary begins "Incomplete:", and no suggested
reply is written: what the lost answer would have said may change every conclusion, so none is drawn for
the customer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from providers.base import BuiltInModel, ModelAdapter, ModelRequestSpec, ModelResponse, TokenUsage
from providers.context import Context, EvidenceItem
from providers.replies import ReplyWriter
from tickets.search import match_share, words
from tools import read_job_status, read_service_status, search_docs
from tools.base import CONTROL_CHARACTERS

# The tools the rules call, as their modules name them (each is in tools.registry.TOOLS: a test checks it).
JOBS, DOCS, SERVICES = read_job_status.TOOL.name, search_docs.TOOL.name, read_service_status.TOOL.name
RULE_TOOLS = (JOBS, DOCS, SERVICES)

ARGS = {tool.name: tool.args for tool in (read_job_status.TOOL, search_docs.TOOL, read_service_status.TOOL)}

ERROR_CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+){1,}\b")
# The demo's services (tickets.demo) by the words a customer uses for them.
SERVICE_WORDS = {
    "export": ("export", "csv"),
    "api": ("api", "endpoint", "webhook"),
    "auth": ("login", "log in", "sign in", "password", "sso", "2fa"),
    "billing": ("billing", "invoice", "payment", "charge"),
}
RULES_NOTE = "Prepared by the rule-based investigator (rules, not a language model)."
NOTHING_TO_LOOK_UP = "The rules found nothing to look up in this ticket; a person should read it."
WHY_HAND_OFF = (
    "The rules draft only from job records, documents that name the error code or match the ticket's own"
    " words well, and service status, so a person should read the ticket."
)
MAX_PROBLEM_SEARCHES = 2  # the subject and one more problem: a ticket rarely states more that an article answers
# An article answers a problem when its title and quoted passage hold at least this share of the problem's
# words, and two of them at least. Measured with bench/answer_bench.py over Bitwarden's help center (158
# articles, 22 answerable tickets and 6 that none answers), with the search ranking as it is now: at 0.3 and
# at 0.4, 90.9 % of the answerable packets name an answering article and none of the others names one; at
# 0.5, 68.2 % and none; at 0.6, 59.1 % and none. 0.4: the higher of the two that lose nothing.
MATCH_THRESHOLD = 0.4
MATCH_MIN_WORDS = 2
QUERY_MAX = 200  # search_docs' query length
SHORT_SUBJECT = 4  # a subject of fewer words is searched with the body's first sentence
_GREETING = re.compile(r"^(hi|hello|hey|dear|good (morning|afternoon|evening)|greetings)\b", re.IGNORECASE)
_SIGN_OFF = re.compile(
    r"^(--\s*|thanks|thank you|many thanks|regards|best|cheers|kind regards|best regards|sincerely)\b[\s,.!]*$",
    re.IGNORECASE,
)
_GREETING_LEAD = re.compile(r"^(hi|hello|hey)( there| team| all)?[,!.]\s+", re.IGNORECASE)  # "Hello, I lost …"
_QUOTE_HEADER = re.compile(r"^on .{3,200} wrote:$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A lookup that got no answer: its service could not be reached, did not answer in time, or a worker restart cut
# the lookup off. Each with the reason the packet gives.
LOST = {
    "transient_error": "{reads} could not be reached",
    "timeout": "{reads} did not answer in time",
    "interrupted": "the lookup was interrupted by a worker restart",
}
UNANSWERED = frozenset(LOST)
LOST_TRIES = 2  # a lookup is made at most this often without an answer (the loop's own retry counts too)
# How the rules say that no article answers a problem the ticket states: a draft asks it in an open question that
# begins with GAP_QUESTION; a handoff with nothing to cite says, in its reason, that a search GAP_HANDOFF. The
# knowledge gaps list (staff.gaps) finds the packets by these words, so they are written here once.
GAP_QUESTION = "Which article should have answered"
GAP_HANDOFF = "found no article that matches it well"


def _content(item: EvidenceItem) -> dict[str, Any]:
    try:
        value = json.loads(item.content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class RulesAdapter(ModelAdapter):
    name = BuiltInModel.RULES

    def request(self, spec: ModelRequestSpec) -> ModelResponse:
        return ModelResponse(Investigation(spec.context).next_decision(), TokenUsage())


class Investigation:
    """One look at the context; `next_decision` is the step the rules take."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.text = ctx.customer_text  # the subject, description and the customer's follow-ups (a staff reply's
        # example job id is not the customer's)
        self.outcomes: dict[tuple[str, str], list[str]] = {}
        for a in ctx.attempts:
            self.outcomes.setdefault(self._key(a.tool, a.args), []).append(a.outcome)
        self.tried = set(self.outcomes)
        self.last_call = self._key(ctx.attempts[-1].tool, ctx.attempts[-1].args) if ctx.attempts else None
        self.by_tool: dict[str, list[EvidenceItem]] = {}
        for item in ctx.evidence:
            self.by_tool.setdefault(item.tool, []).append(item)
        self._jobs = [_content(e) | {"ref": e.ref} for e in self.by_tool.get(JOBS, [])]

    @staticmethod
    def _key(tool: str, args: dict[str, Any]) -> tuple[str, str]:
        """A lookup as the loop records it: its arguments normalized ("Management Portal" is recorded lower case)."""
        return tool, json.dumps(ARGS[tool].normalize(args) if tool in ARGS else args, sort_keys=True)

    def _untried(self, tool: str, args: dict[str, Any]) -> bool:
        return self._key(tool, args) not in self.tried

    def _lost(self, key: tuple[str, str]) -> bool:
        outcomes = self.outcomes.get(key, [])
        return bool(outcomes) and all(outcome in UNANSWERED for outcome in outcomes)

    def _may_try(self, tool: str, args: dict[str, Any]) -> bool:
        """Not made yet; or made without an answer, fewer than LOST_TRIES times, and not the call just made."""
        key = self._key(tool, args)
        if key not in self.tried:
            return True
        return self._lost(key) and len(self.outcomes[key]) < LOST_TRIES and key != self.last_call

    def lost_lookups(self) -> list[tuple[str, dict[str, Any], str]]:
        """The lookups that never got an answer, in the order first made: (tool, arguments, the last outcome)."""
        lost: list[tuple[str, dict[str, Any], str]] = []
        for a in self.ctx.attempts:
            key = self._key(a.tool, a.args)
            if self._lost(key) and all(key != self._key(t, g) for t, g, _ in lost):
                lost.append((a.tool, a.args, self.outcomes[key][-1]))
        return lost

    def jobs(self) -> list[dict[str, Any]]:
        return self._jobs

    def error_codes(self) -> list[str]:
        codes = ERROR_CODE.findall(self.text) + [j["error_code"] for j in self.jobs() if j.get("error_code")]
        return list(dict.fromkeys(codes))

    def services(self) -> list[str]:
        """The services the ticket names, each once: by the demo's words, then by the operator's names.

        With no catalog (the status page could not be read) the demo's words alone, as the lookup will tell.
        """
        lowered = self.text.casefold()
        by_words = [name for name, words in SERVICE_WORDS.items() if any(w in lowered for w in words)]
        catalog = self.ctx.catalogs.get(SERVICES)
        if catalog is None:
            return by_words
        listed = [catalog.find(name) for name in by_words] + catalog.named_in(self.text)
        return list(dict.fromkeys(name for name in listed if name is not None))

    def job_ids(self) -> list[str]:
        return read_job_status.job_ids_in(self.text)

    def problems(self) -> list[str]:
        """What the ticket asks about, in its own words: its subject, then each sentence of the customer's
        messages that states something the ones before did not (half its words new), at most
        MAX_PROBLEM_SEARCHES; greetings, sign-offs, signatures and quoted history left out."""
        texts = [self.ctx.body, *(m.body for m in self.ctx.messages if m.from_customer)]
        sentences = [s for text in texts for s in _sentences(own_words(text))]
        first = self.ctx.subject
        if len(set(words(first))) < SHORT_SUBJECT and sentences:  # "Export fails": the body says what fails
            first = f"{first}: {sentences.pop(0)}"
        candidates = [first, *sentences]
        kept: list[str] = []
        seen: set[str] = set()
        for sentence in candidates:
            said = set(words(sentence))
            if len(said) < MATCH_MIN_WORDS or len(said - seen) * 2 < len(said):
                continue
            kept.append(_cut_query(sentence))
            seen |= said
            if len(kept) == MAX_PROBLEM_SEARCHES:
                break
        return kept

    def _room_for_a_search(self) -> bool:
        """A problem search leaves a model request for the draft and a lookup for a service (when shown)."""
        left = self.ctx.allowances
        return left.get("model_requests_left", 3) >= 3 and left.get("tool_attempts_left", 2) >= 2

    def problem_searches(self) -> list[tuple[str, EvidenceItem | None]]:
        """Each problem with this run's search of it in the evidence (None: not searched in this run, or
        nothing came back): a search an earlier run made is not this run's to cite."""
        by_query = {str(_content(i).get("query", "")): i for i in self.by_tool.get(DOCS, [])}
        found = []
        for problem in self.problems():
            args = {"query": problem, "max_results": 3}
            searched = not self._untried(DOCS, args)
            found.append((problem, by_query.get(ARGS[DOCS].normalize(args)["query"]) if searched else None))
        # (a search that got no answer has no item either: it is not a search that found nothing, see lost_lookups)
        return found

    @staticmethod
    def answer(problem: str, item: EvidenceItem) -> dict[str, Any] | None:
        """The search's first article (in its order: the title counts most) that matches `problem` well enough
        to cite: its title and quoted passage hold MATCH_THRESHOLD of the problem's words, MATCH_MIN_WORDS at least."""
        asked = len(set(words(problem)))
        for doc in _content(item).get("results", []):
            share = match_share(problem, f"{doc.get('title', '')} {doc.get('excerpt', '')}")
            if share >= MATCH_THRESHOLD and round(share * asked) >= MATCH_MIN_WORDS:
                return doc
        return None

    def next_decision(self) -> dict[str, Any]:
        # Job lookups need a verified session; without one they are left as open questions.
        for job_id in self.job_ids() if self.ctx.session_verified else []:
            if self._may_try(JOBS, {"job_id": job_id}):
                return {"call": {"tool": JOBS, "args": {"job_id": job_id}}}
        for code in self.error_codes():
            args = {"query": code.casefold(), "max_results": 3}
            if self._may_try(DOCS, args):
                return {"call": {"tool": DOCS, "args": args}}
        if not self.explained_failures():
            answered = False
            for problem, item in self.problem_searches():
                args = {"query": problem, "max_results": 3}
                if self._may_try(DOCS, args):  # each run searches for itself, as it looks up each job
                    if not self._room_for_a_search():
                        break
                    return {"call": {"tool": DOCS, "args": args}}
                if item is not None and self.answer(problem, item) is not None:
                    answered = True
                    break  # the ticket's first answered problem is its main one: the rest is context
            # An article that answers the problem is the answer; a service named in passing ("we also use
            # the API") is not checked then, so its status is never cited for a problem it has no part in.
            for service in self.services() if not answered else []:
                if self._may_try(SERVICES, {"service": service}):
                    return {"call": {"tool": SERVICES, "args": {"service": service}}}
        return self.draft()

    def docs_for(self, code: str) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for item in self.by_tool.get(DOCS, []):
            for doc in _content(item).get("results", []):
                if code.casefold() in json.dumps(doc).casefold():
                    found.append((item.ref, doc))
        return found

    def explained_failures(self) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
        explained = []
        for job in self.jobs():
            code = job.get("error_code")
            for ref, doc in self.docs_for(code) if code else []:
                explained.append((job, ref, doc))
                break
        return explained

    def draft(self) -> dict[str, Any]:
        sentences, cited, questions = [], [], []
        reply = ReplyWriter()
        explained = {id(j) for j, _, _ in self.explained_failures()}
        for job, doc_ref, doc in self.explained_failures():
            sentences.append(self._job_sentence(job))
            sentences.append(
                f'{doc["id"]} {doc["revision"]} ("{doc["title"]}") documents {job["error_code"]} [{doc_ref}]:'
                f" {doc['excerpt'].strip()}"
            )
            reply.job(job, explained_by=doc)
            cited += [job["ref"], doc_ref]
            questions += self._job_questions(job)
        for job in self.jobs():
            if id(job) not in explained and all(job["ref"] != c for c in cited):
                sentences.append(self._job_sentence(job))
                reply.job(job)
                cited.append(job["ref"])
        if not explained:
            unanswered = []
            for problem, item in self.problem_searches():
                article = self.answer(problem, item) if item is not None else None
                if article is not None and item is not None:
                    sentences.append(self._answer_sentence(problem, article, item.ref))
                    reply.article(article)
                    cited.append(item.ref)
                elif item is not None:
                    unanswered.append((problem, item.ref))
            if unanswered:
                asked = " and ".join(f"“{problem}”" for problem, _ in unanswered)
                refs = ", ".join(ref for _, ref in unanswered)
                questions.append(f"{GAP_QUESTION} {asked}? The search [{refs}] found none that matches well.")
        found_before_services = bool(reply.paragraphs)
        for item in self.by_tool.get(SERVICES, []):
            sentences.append(self._service_sentence(item))
            reply.service(_content(item), news_only=found_before_services)
            cited.append(item.ref)
        if not cited:
            return {"handoff": self.handoff_reason()}
        lost = self.lost_lookups()
        questions += [self._lost_question(tool, args, outcome) for tool, args, outcome in lost]
        if not self.ctx.session_verified and self.job_ids():
            questions.append(
                f"The customer's session is not verified, so {', '.join(self.job_ids())} could not be looked up:"
                " what do the job records say?"
            )
        if "renam" in self.text.casefold():
            questions.append("Is the failure related to the workspace rename, or only coincident with it?")
        if lost:
            named = "; ".join(
                f"{_lost_subject(tool, args)} ({_lost_reason(tool, outcome)})" for tool, args, outcome in lost
            )
            sentences.insert(
                0,
                f"Incomplete: {named}; what it would have said could change the findings below, so no conclusion is drawn.",
            )
        sentences.append(RULES_NOTE)
        draft = {
            "summary": " ".join(sentences)[:2000],
            "evidence": list(dict.fromkeys(cited)),
            "open_questions": list(dict.fromkeys(questions)),
        }
        written = reply.text() if not lost else ""  # a reply is a conclusion: none without the lost answer
        return {"draft": draft | ({"reply": written} if written else {})}

    @staticmethod
    def _lost_question(tool: str, args: dict[str, Any], outcome: str) -> str:
        ask = {
            JOBS: "What does the job record say?",
            DOCS: "Which article answers it?",
            SERVICES: "What is the service's status?",
        }.get(tool, "What would it have said?")
        return f"{_lost_subject(tool, args)}: {_lost_reason(tool, outcome)}. {ask}"

    def handoff_reason(self) -> str:
        """Why the rules hand off with nothing to cite: what they looked up, what came back, why it is not enough."""
        said = []
        lost = self.lost_lookups()
        unreached = [
            str(args.get("job_id")) for tool, args, outcome in lost if tool == JOBS and outcome != "interrupted"
        ]
        if unreached:
            said.append(
                f"The job status service could not be reached, so {', '.join(unreached)} could not be looked up."
            )
        said += [
            f"{_lost_subject(tool, args)}: {_lost_reason(tool, outcome)}."
            for tool, args, outcome in lost
            if tool != JOBS or outcome == "interrupted"
        ]
        problems = {ARGS[DOCS].normalize({"query": p})["query"] for p in self.problems()}
        for item in self.by_tool.get(DOCS, []):
            query = str(_content(item).get("query", ""))
            if query in problems:
                said.append(f"The documentation search for “{query}” [{item.ref}] {GAP_HANDOFF}.")
            else:
                said.append(self._search_sentence(item))
        if not said:
            return NOTHING_TO_LOOK_UP
        return " ".join([*said, WHY_HAND_OFF])

    @staticmethod
    def _search_sentence(item: EvidenceItem) -> str:
        content = _content(item)
        query = str(content.get("query") or item.args.get("query", ""))
        docs = content.get("results", [])
        if not docs:
            return f"The documentation search for “{query}” [{item.ref}] found no articles."
        found = ", ".join(f"{d.get('id')} {d.get('revision')} (“{d.get('title')}”)" for d in docs)
        naming = [str(d.get("id")) for d in docs if query.casefold() in json.dumps(d).casefold()]
        if not naming:
            return (
                f"The documentation search for “{query}” [{item.ref}] found {found}; none of them mentions “{query}”."
            )
        return (
            f"The documentation search for “{query}” [{item.ref}] found {found}; {', '.join(naming)} mentions"
            f" “{query}”, but the rules explain an error only for a job record that shows it, and none did."
        )

    @staticmethod
    def _answer_sentence(problem: str, doc: dict[str, Any], ref: str) -> str:
        """The article that answers a problem the ticket states: its title, the passage that matched, its link."""
        link = f" ({doc['url']})" if doc.get("url") else ""
        return (
            f"For “{problem}”, the article “{doc.get('title')}” ({doc.get('id')} {doc.get('revision')}){link}"
            f" says [{ref}]: “{str(doc.get('excerpt', '')).strip()}”"
        )

    @staticmethod
    def _service_sentence(item: EvidenceItem) -> str:
        """The service's status and the incidents its source lists for it (a page's incident may be page-wide)."""
        status = _content(item)
        incidents = "; ".join(
            f"{i.get('id')} “{i.get('title')}” ({i.get('status')})" for i in status.get("incidents", [])
        )
        listed = f"; incidents: {incidents}" if incidents else ""
        return f"Service {status.get('service')} is {status.get('status')} [{item.ref}]{listed}."

    @staticmethod
    def _job_sentence(job: dict[str, Any]) -> str:
        when = job.get("failed_at") or job.get("finished_at") or "an unknown time"
        code = f" with {job['error_code']}" if job.get("error_code") else ""
        requester = job.get("requested_by") or "an unknown user"
        role = job.get("requester_current_role") or "unknown"
        return (
            f"Job {job.get('job_id')} ({job.get('kind')}) {job.get('status')}{code} at {when} [{job['ref']}];"
            f" it was requested by {requester}, whose current role is {role}."
        )

    @staticmethod
    def _job_questions(job: dict[str, Any]) -> list[str]:
        when = job.get("failed_at") or job.get("finished_at") or "the time it ran"
        return [
            f"What was {job.get('requested_by') or 'the requester'}'s role when {job.get('job_id')} ran"
            f" ({when})? The job record shows only the current role."
        ]


def _lost_subject(tool: str, args: dict[str, Any]) -> str:
    """What a lost lookup was to read, as the open question names it."""
    if tool == JOBS:
        return f"{args.get('job_id')} could not be looked up"
    if tool == DOCS:
        return f"The documentation search for “{args.get('query')}” could not be made"
    if tool == SERVICES:
        return f"The status of {args.get('service')} could not be read"
    return f"{tool} could not be read"


def _lost_reason(tool: str, outcome: str) -> str:
    reads = {JOBS: "the job status service", DOCS: "the knowledge base", SERVICES: "the service status page"}
    return LOST[outcome].format(reads=reads.get(tool, "its service"))


def own_words(text: str) -> str:
    """The text as its writer wrote it now: quoted lines (">") left out, and everything from a sign-off, a
    signature ("--") or a quoted message's header ("On … wrote:") on; greeting lines left out."""
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if _SIGN_OFF.match(stripped) or _QUOTE_HEADER.match(stripped) or stripped in ("--", "—"):
            break
        if stripped.startswith(">") or _GREETING.match(stripped) and len(words(stripped)) <= 3:
            continue
        kept.append(_GREETING_LEAD.sub("", stripped))
    return "\n".join(kept)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _cut_query(sentence: str) -> str:
    """A sentence as a search query: control characters as spaces (the query refuses them, and a ticket may
    hold a stray one), at most QUERY_MAX characters, cut at a word."""
    sentence = " ".join(CONTROL_CHARACTERS.sub(" ", sentence).split())
    return sentence if len(sentence) <= QUERY_MAX else sentence[:QUERY_MAX].rsplit(" ", 1)[0]
