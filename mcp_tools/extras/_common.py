"""Shared plumbing for the extras: input validation and settings lookup.

Clients, retries, timeouts and errors for the Google APIs are ``mcp_tools.google_api``'s.
"""

from __future__ import annotations

import logging
import re

from mcp_tools.errors import UserError
from mcp_tools.google_api import CallPolicy
from mcp_tools.settings import Settings, get_settings

log = logging.getLogger(__name__)

#: How the extras' calls are tried: a listing for a person waiting, so short timeouts.
EXTRAS = CallPolicy(attempts=3, base_delay_s=0.2, max_delay_s=2.0, timeout_s=15.0)

_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[0-9]{1,20}$")
_REGION_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+[0-9]+$")
_ZONE_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+[0-9]+-[a-z]$")
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_HF_PART_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$")
_SECRET_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_RFC1035_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


def _describe(value: object) -> str:
    """A value for an error message: repr, cut short so a hostile value cannot flood the message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_project(project: str, what: str = "project") -> str:
    if not isinstance(project, str) or not _PROJECT_RE.match(project):
        raise UserError(f"{what} {_describe(project)} is not a valid Google Cloud project id or number")
    return project


def validate_region(region: str, what: str = "region") -> str:
    if not isinstance(region, str) or not _REGION_RE.match(region):
        raise UserError(f"{what} {_describe(region)} is not a valid region name (e.g. like 'europe-west1')")
    return region


def validate_location(location: str, what: str = "location") -> str:
    """A region or a zone (GKE clusters may be zonal)."""
    if not isinstance(location, str) or not (_REGION_RE.match(location) or _ZONE_RE.match(location)):
        raise UserError(f"{what} {_describe(location)} is not a valid region or zone name")
    return location


def validate_bucket(bucket: str) -> str:
    name = bucket.removeprefix("gs://").rstrip("/") if isinstance(bucket, str) else bucket
    if (
        not isinstance(name, str)
        or not _BUCKET_RE.match(name)
        or ".." in name
        or name.startswith("goog")
        or ("." not in name and len(name) > 63)
    ):
        raise UserError(f"bucket {_describe(bucket)} is not a valid Cloud Storage bucket name")
    return name


def validate_object_prefix(prefix: str, what: str = "prefix") -> str:
    """An object-name prefix: printable, no control characters, no '..' path segments."""
    if not isinstance(prefix, str):
        raise UserError(f"{what} must be a string")
    cleaned = prefix.lstrip("/")
    if len(cleaned.encode()) > 1024 or any(ord(c) < 32 or ord(c) == 127 for c in cleaned):
        raise UserError(f"{what} {_describe(prefix)} is not a valid object-name prefix")
    if any(part in ("..", ".") for part in cleaned.split("/")):
        raise UserError(f"{what} {_describe(prefix)} must not contain '.' or '..' path segments")
    return cleaned


def validate_model_id(model_id: str) -> str:
    """A Hugging Face repo id, strictly ``org/name``."""
    if not isinstance(model_id, str) or model_id.count("/") != 1:
        raise UserError(f"model id {_describe(model_id)} must be of the form 'org/name'")
    org, name = model_id.split("/")
    for part in (org, name):
        if not _HF_PART_RE.match(part) or ".." in part or "--" in part:
            raise UserError(
                f"model id {_describe(model_id)} must be of the form 'org/name' "
                "(letters, digits, '-', '_', '.'; at most 96 characters each)"
            )
    return model_id


def validate_secret_id(secret_id: str) -> str:
    if not isinstance(secret_id, str) or not _SECRET_ID_RE.match(secret_id):
        raise UserError(
            f"secret id {_describe(secret_id)} must be 1-255 letters, digits, '-' or '_' "
            "(a Secret Manager secret id)"
        )
    return secret_id


def validate_rfc1035(name: str, what: str, max_len: int = 63) -> str:
    if not isinstance(name, str) or len(name) > max_len or not _RFC1035_RE.match(name):
        raise UserError(
            f"{what} {_describe(name)} must be lower-case letters, digits and '-', start with a letter, "
            f"at most {max_len} characters"
        )
    return name


def resolve_project(project: str | None, settings: Settings | None = None) -> str:
    settings = settings or get_settings()
    value = project or settings.project
    if not value:
        raise UserError("no project: pass project or set GOOGLE_CLOUD_PROJECT")
    return validate_project(value)


def resolve_region(region: str | None, settings: Settings | None = None) -> str:
    settings = settings or get_settings()
    value = region or settings.location
    if not value:
        raise UserError("no region: pass region or set GOOGLE_CLOUD_LOCATION")
    return validate_region(value)
