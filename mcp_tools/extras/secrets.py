"""Store the Hugging Face token in Secret Manager (google-cloud-secret-manager).

The token is read ONLY from an environment variable or a file the user names: it is never a
function argument (so it never passes through a model's context), never returned and never logged.
Only the secret's resource name and the new version are returned.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.extras._common import EXTRAS, resolve_project
from mcp_tools.google_api import build_client, call
from mcp_tools.names import validate_secret_id
from mcp_tools.settings import get_settings

log = logging.getLogger(__name__)

_TOKEN_RE = re.compile(r"^hf_[A-Za-z0-9]{30,64}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MAX_TOKEN_FILE_BYTES = 4096


# Loggers that, at DEBUG, attach the request body (here: the token) to their log records.
_PAYLOAD_LOGGERS = ("google.cloud.secretmanager_v1", "google.auth.transport", "google.api_core")


class TokenNotSetError(UserError):
    """The named environment variable holds no token (a client may then be asked for it)."""


@contextmanager
def _no_payload_debug_logs() -> Iterator[None]:
    """Keep the Google client libraries from logging the request payload while the token is sent.

    The GAPIC REST transport and google-auth log each request body at DEBUG (as record extras).
    For the duration of the call, those loggers are held at INFO; their levels are restored after.
    """
    manager = logging.Logger.manager
    names = [
        n for n in list(manager.loggerDict) if any(n == p or n.startswith(p + ".") for p in _PAYLOAD_LOGGERS)
    ]
    saved: list[tuple[logging.Logger, int]] = []
    for name in {*names, *_PAYLOAD_LOGGERS}:
        lg = logging.getLogger(name)
        if lg.getEffectiveLevel() < logging.INFO or lg.level and lg.level < logging.INFO:
            saved.append((lg, lg.level))
            lg.setLevel(logging.INFO)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


class SavedSecret(BaseModel):
    secret: str = Field(description="the secret's resource name, projects/P/secrets/ID")
    version: str = Field(description="the new version's resource name")
    version_id: str
    created_secret: bool = Field(description="True when the secret did not exist and was created")
    source: str = Field(description="where the token was read from (the variable name or the file path)")


def _read_token(from_env: str | None, from_file: str | Path | None) -> tuple[str, str]:
    """(token, where it came from). Error messages never include the token or any part of it."""
    if from_file is not None:
        path = Path(from_file).expanduser()
        if not path.exists():
            raise UserError(f"token file {str(path)!r} does not exist")
        if not path.is_file():
            raise UserError(f"token file {str(path)!r} is not a regular file")
        try:
            if path.stat().st_size > _MAX_TOKEN_FILE_BYTES:
                raise UserError(f"token file {str(path)!r} is larger than a token can be")
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"token file {str(path)!r} does not exist") from None
        except PermissionError:
            raise UserError(f"token file {str(path)!r} is not readable") from None
        except UnicodeDecodeError:
            raise UserError(f"token file {str(path)!r} is not text") from None
        token, source = raw.strip(), f"file {path}"
    elif from_env is not None:
        if not isinstance(from_env, str) or not _ENV_NAME_RE.match(from_env):
            raise UserError("from_env must be an environment variable name (letters, digits, '_')")
        value = os.environ.get(from_env)
        if not value:
            raise TokenNotSetError(
                f"environment variable {from_env} is not set (or empty): export the token there first"
            )
        token, source = value.strip(), f"environment variable {from_env}"
    else:
        raise UserError("no token source: name an environment variable (from_env) or a file (from_file)")
    if not _TOKEN_RE.match(token):
        raise UserError(
            f"the value in {source} does not look like a Hugging Face access token "
            "(expected 'hf_' followed by 30-64 letters and digits)"
        )
    return token, source


def save_hf_token(
    secret_id: str = "hf-token",
    *,
    from_env: str | None = "HF_TOKEN",
    from_file: str | Path | None = None,
    project: str | None = None,
) -> SavedSecret:
    """Store the Hugging Face token as a new version of Secret Manager secret ``secret_id``.

    The token is read from ``from_file`` when given, else from the environment variable ``from_env``.
    The secret is created (automatic replication) when missing.
    """
    settings = get_settings()
    secret_id = validate_secret_id(secret_id)
    project_id = resolve_project(project, settings)
    token, source = _read_token(from_env, from_file)

    import google_crc32c
    from google.api_core import exceptions as gexc
    from google.cloud import secretmanager

    client = build_client(
        secretmanager.SecretManagerServiceClient, settings, endpoint=settings.secretmanager_api_endpoint
    )
    name = f"projects/{project_id}/secrets/{secret_id}"
    created = False

    def _ensure_secret() -> None:
        nonlocal created
        try:
            client.get_secret(name=name, **EXTRAS.rpc)
            return
        except gexc.NotFound:
            pass
        try:
            client.create_secret(
                request={
                    "parent": f"projects/{project_id}",
                    "secret_id": secret_id,
                    "secret": {"replication": {"automatic": {}}, "labels": {"managed-by": "gemma-sre"}},
                },
                **EXTRAS.rpc,
            )
            created = True
        except gexc.Conflict:  # created concurrently (409 ALREADY_EXISTS): use it
            pass

    call(f"Secret Manager (get or create {name})", _ensure_secret, policy=EXTRAS)

    data = token.encode("utf-8")
    crc = google_crc32c.Checksum(data)
    del token

    def _add() -> str:
        # Retried only on failures that prove nothing was stored: a retried add after a lost
        # response would store a duplicate version.
        with _no_payload_debug_logs():
            version = client.add_secret_version(
                request={"parent": name, "payload": {"data": data, "data_crc32c": int(crc.hexdigest(), 16)}},
                **EXTRAS.rpc,
            )
        return str(version.name)

    version_name = call(f"Secret Manager (add a version to {name})", _add, policy=EXTRAS.with_(mutation=True))
    log.info("stored a new version of %s (token read from %s)", name, source)
    return SavedSecret(
        secret=name,
        version=version_name,
        version_id=version_name.rsplit("/", 1)[-1],
        created_secret=created,
        source=source,
    )
