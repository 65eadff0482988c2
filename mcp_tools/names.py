"""Google Cloud resource names, each checked once: Cloud Run services and revisions, projects,
regions and zones, Cloud Storage buckets and object prefixes, Hugging Face model ids, Secret
Manager ids and RFC 1035 labels.

Every check takes a value from outside (a tool argument, a flag, a settings field), returns it
(or its normal form) when it is valid and raises one ``UserError`` naming the rule when it is not.
"""

from __future__ import annotations

import re

from mcp_tools.errors import UserError

# Cloud Run: lower-case letters, digits and hyphens, starting with a letter, not ending with a hyphen.
_SERVICE_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,47}[a-z0-9])?")
_REVISION_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_PROJECT_RE = re.compile(r"(?:[a-z][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20}")
_REGION_RE = re.compile(r"[a-z]+(?:-[a-z]+)+[0-9]+")
_ZONE_RE = re.compile(r"[a-z]+(?:-[a-z]+)+[0-9]+-[a-z]")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_HF_PART_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_SECRET_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,255}")
_RFC1035_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")


def describe(value: object) -> str:
    """A value for an error message: repr, cut short so a hostile value cannot flood the message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _matches(value: object, *patterns: re.Pattern[str]) -> bool:
    return isinstance(value, str) and any(p.fullmatch(value) for p in patterns)


def _checked(value: str, ok: bool, message: str) -> str:
    if not ok:
        raise UserError(message)
    return value


_SERVICE_RULE = (
    "use 1-49 lower-case letters, digits or hyphens, starting with a letter and not ending with a hyphen"
)
_REVISION_RULE = "use lower-case letters, digits or hyphens, starting with a letter"
_SECRET_RULE = "must be 1-255 letters, digits, '-' or '_' (a Secret Manager secret id)"


def validate_service_name(name: str) -> str:
    """A Cloud Run service's short name, checked against Cloud Run's naming rules."""
    msg = f"invalid Cloud Run service name {describe(name)}: {_SERVICE_RULE}"
    return _checked(name, _matches(name, _SERVICE_RE), msg)


def validate_revision_name(name: str) -> str:
    msg = f"invalid Cloud Run revision name {describe(name)}: {_REVISION_RULE}"
    return _checked(name, _matches(name, _REVISION_RE), msg)


def validate_project(project: str, what: str = "project") -> str:
    msg = f"{what} {describe(project)} is not a valid Google Cloud project id or number"
    return _checked(project, _matches(project, _PROJECT_RE), msg)


def validate_region(region: str, what: str = "region") -> str:
    msg = f"{what} {describe(region)} is not a valid region name (e.g. like 'europe-west1')"
    return _checked(region, _matches(region, _REGION_RE), msg)


def validate_location(location: str, what: str = "location") -> str:
    """A region or a zone (GKE clusters may be zonal)."""
    msg = f"{what} {describe(location)} is not a valid region or zone name"
    return _checked(location, _matches(location, _REGION_RE, _ZONE_RE), msg)


def validate_bucket(bucket: str) -> str:
    """A Cloud Storage bucket name (a ``gs://`` prefix and a trailing slash are dropped)."""
    name = bucket.removeprefix("gs://").rstrip("/") if isinstance(bucket, str) else bucket
    ok = (
        _matches(name, _BUCKET_RE)
        and ".." not in name
        and not name.startswith("goog")
        and ("." in name or len(name) <= 63)
    )
    return _checked(name, ok, f"bucket {describe(bucket)} is not a valid Cloud Storage bucket name")


def validate_object_prefix(prefix: str, what: str = "prefix") -> str:
    """An object-name prefix: printable, no control characters, no '..' path segments."""
    if not isinstance(prefix, str):
        raise UserError(f"{what} must be a string")
    cleaned = prefix.lstrip("/")
    if len(cleaned.encode()) > 1024 or any(ord(c) < 32 or ord(c) == 127 for c in cleaned):
        raise UserError(f"{what} {describe(prefix)} is not a valid object-name prefix")
    if any(part in ("..", ".") for part in cleaned.split("/")):
        raise UserError(f"{what} {describe(prefix)} must not contain '.' or '..' path segments")
    return cleaned


def validate_model_id(model_id: str) -> str:
    """A Hugging Face repo id, strictly ``org/name``."""
    if not isinstance(model_id, str) or model_id.count("/") != 1:
        raise UserError(f"model id {describe(model_id)} must be of the form 'org/name'")
    ok = all(
        _matches(part, _HF_PART_RE) and ".." not in part and "--" not in part for part in model_id.split("/")
    )
    return _checked(
        model_id,
        ok,
        f"model id {describe(model_id)} must be of the form 'org/name' "
        "(letters, digits, '-', '_', '.'; at most 96 characters each)",
    )


def validate_secret_id(secret_id: str) -> str:
    msg = f"secret id {describe(secret_id)} {_SECRET_RULE}"
    return _checked(secret_id, _matches(secret_id, _SECRET_ID_RE), msg)


def validate_rfc1035(name: str, what: str, max_len: int = 63) -> str:
    msg = (
        f"{what} {describe(name)} must be lower-case letters, digits and '-', start with a letter, "
        f"at most {max_len} characters"
    )
    return _checked(name, _matches(name, _RFC1035_RE) and len(name) <= max_len, msg)
