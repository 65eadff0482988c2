"""Shared plumbing for the extras: the call policy and the project / region lookup.

Name checks are ``mcp_tools.names``'s.

Clients, retries, timeouts and errors for the Google APIs are ``mcp_tools.google_api``'s.
"""

from __future__ import annotations

import logging

from mcp_tools.errors import UserError
from mcp_tools.google_api import CallPolicy
from mcp_tools.names import validate_project, validate_region
from mcp_tools.settings import Settings, get_settings

log = logging.getLogger(__name__)

#: How the extras' calls are tried: a listing for a person waiting, so short timeouts.
EXTRAS = CallPolicy(attempts=3, base_delay_s=0.2, max_delay_s=2.0, timeout_s=15.0)


def _resolve(value: str | None, fallback: str | None, what: str, env: str) -> str:
    if not (value or fallback):
        raise UserError(f"no {what}: pass {what} or set {env}")
    return value or fallback or ""


def resolve_project(project: str | None, settings: Settings | None = None) -> str:
    fallback = (settings or get_settings()).project
    return validate_project(_resolve(project, fallback, "project", "GOOGLE_CLOUD_PROJECT"))


def resolve_region(region: str | None, settings: Settings | None = None) -> str:
    fallback = (settings or get_settings()).location
    return validate_region(_resolve(region, fallback, "region", "GOOGLE_CLOUD_LOCATION"))
