"""A deterministic rule-based investigator. It is rules, not a language model.

It reads the ticket (its subject, description and the customer's follow-up messages) and the
evidence it is shown, one decision a turn:
1. look up every job the ticket mentions (ids of AGENT_JOB_ID_PATTERN's shape, J-<digits> by default);
2. search the documentation for every error code seen (in the ticket or a job);
3. check the services the ticket names, unless a documented error code already
   explains a failed job: the operator's services it mentions by name (the catalog
   the engine read into the context), and the demo's four by their usual words
   ("CSV" is the export service) where the catalog lists them;
4. draft a packet citing the evidence it used, listing what it could not establish;
   with nothing to cite, hand off, saying what it looked up and found, and why that is not enough.
It reports no token usage: it spends none.
"""

from __future__ import annotations

import json
import re
from typing import Any

from providers.base import BuiltInModel, ModelAdapter, ModelRequestSpec, ModelResponse, TokenUsage
from providers.context import Context, EvidenceItem
from tools import read_job_status, read_service_status, search_docs

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
    "The rules draft only from job records, documents that name the error code, and service status,"
    " so a person should read the ticket."
)
UNANSWERED = frozenset({"transient_error", "timeout"})  # a lookup whose service could not be reached in time


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
        self.tried = {self._key(a.tool, a.args) for a in ctx.attempts}
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

    def next_decision(self) -> dict[str, Any]:
        # Job lookups need a verified session; without one they are left as open questions.
        for job_id in self.job_ids() if self.ctx.session_verified else []:
            if self._untried(JOBS, {"job_id": job_id}):
                return {"call": {"tool": JOBS, "args": {"job_id": job_id}}}
        for code in self.error_codes():
            args = {"query": code.casefold(), "max_results": 3}
            if self._untried(DOCS, args):
                return {"call": {"tool": DOCS, "args": args}}
        if not self.explained_failures():
            for service in self.services():
                if self._untried(SERVICES, {"service": service}):
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
        explained = {id(j) for j, _, _ in self.explained_failures()}
        for job, doc_ref, doc in self.explained_failures():
            sentences.append(self._job_sentence(job))
            sentences.append(
                f'{doc["id"]} {doc["revision"]} ("{doc["title"]}") documents {job["error_code"]} [{doc_ref}]:'
                f" {doc['excerpt'].strip()}"
            )
            cited += [job["ref"], doc_ref]
            questions += self._job_questions(job)
        for job in self.jobs():
            if id(job) not in explained and all(job["ref"] != c for c in cited):
                sentences.append(self._job_sentence(job))
                cited.append(job["ref"])
        for item in self.by_tool.get(SERVICES, []):
            sentences.append(self._service_sentence(item))
            cited.append(item.ref)
        if not cited:
            return {"handoff": self.handoff_reason()}
        questions += [
            f"{job_id} could not be looked up: the job status service could not be reached."
            " What does the job record say?"
            for job_id in self.unreached_jobs()
        ]
        if not self.ctx.session_verified and self.job_ids():
            questions.append(
                f"The customer's session is not verified, so {', '.join(self.job_ids())} could not be looked up:"
                " what do the job records say?"
            )
        if "renam" in self.text.casefold():
            questions.append("Is the failure related to the workspace rename, or only coincident with it?")
        sentences.append(RULES_NOTE)
        return {
            "draft": {
                "summary": " ".join(sentences)[:2000],
                "evidence": list(dict.fromkeys(cited)),
                "open_questions": list(dict.fromkeys(questions)),
            }
        }

    def unreached_jobs(self) -> list[str]:
        """The jobs whose every lookup failed because the job status service did not answer."""
        outcomes: dict[str, set[str]] = {}
        for a in self.ctx.attempts:
            if a.tool == JOBS:
                outcomes.setdefault(str(a.args.get("job_id")), set()).add(a.outcome)
        return [job for job, seen in outcomes.items() if seen and seen <= UNANSWERED]

    def handoff_reason(self) -> str:
        """Why the rules hand off with nothing to cite: what they looked up, what came back, why it is not enough."""
        said = []
        unreached = self.unreached_jobs()
        if unreached:
            said.append(
                f"The job status service could not be reached, so {', '.join(unreached)} could not be looked up."
            )
        for item in self.by_tool.get(DOCS, []):
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
