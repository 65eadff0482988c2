"""Errors that carry a message meant for a person: every face prints them as one line."""

from __future__ import annotations


class UserError(Exception):
    """Bad input (a file, a flag, a name): exit code 2, one clear line, no traceback."""


class ExternalError(Exception):
    """Something outside us failed (an API, the endpoint) after retries: one clear line."""


class NotFoundError(UserError):
    """The named resource (a service, a revision) does not exist: told apart by type, not by wording."""
