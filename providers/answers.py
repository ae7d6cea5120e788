"""What a model may answer besides a lookup: a draft review packet or a handoff. Pure, no ORM.

The loop validates a reply's draft and handoff with these schemas (engine.decisions), and the
provider adapters offer them to a model as the two decision functions (providers.tooldefs).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers.replies import reply_problem


class DraftSchema(BaseModel):
    """A proposed review packet."""

    model_config = ConfigDict(extra="forbid", strict=True)

    summary: str = Field(description="What was found, citing evidence as E1, E2, … (at most 2000 characters).")
    evidence: list[str] = Field(min_length=1, description="Evidence references the summary relies on.")
    open_questions: list[str] = Field(description="What could not be established (may be empty).")
    reply: str | None = Field(
        None,
        description="Optional reply for staff to send the customer: plain words, only what cited evidence supports"
        " (cite as [E1]; links only to cited articles' urls).",
    )

    @field_validator("reply")
    @classmethod
    def _reply(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if not value:
            return None
        problem = reply_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("summary is blank")
        if len(value) > 2000:
            raise ValueError("summary is longer than 2000 characters")
        return value


class HandoffSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field(description="Why a human is needed.")
