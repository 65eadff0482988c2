"""Errors that carry a message meant for a person: every face prints them as one line."""

from __future__ import annotations


class UserError(Exception):
    """Bad input (a file, a flag, a name): exit code 2, one clear line, no traceback."""


class ExternalError(Exception):
    """Something outside us failed (an API, the endpoint) after retries: one clear line."""


class NotFoundError(UserError):
    """The named resource (a service, a revision) does not exist: told apart by type, not by wording."""


class AuthError(ExternalError):
    """No credentials, or credentials that may not do this (401, 403): one line that says which."""


def short_error(e: BaseException | None) -> str:
    """One line for a message or a report: the class and the first line of the message, bounded."""
    if e is None:
        return "unknown error"
    text = str(getattr(e, "message", None) or e).strip()
    first = " ".join(text.splitlines()[0].split()) if text else ""
    out = f"{e.__class__.__name__}: {first}" if first else e.__class__.__name__
    return out if len(out) <= 300 else out[:297] + "..."
