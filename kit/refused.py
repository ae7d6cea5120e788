"""The one error a refused request raises, whichever surface it came through."""

from __future__ import annotations


class Refused(Exception):
    """A staff request not carried out: a machine `code`, a message for people, an HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status
