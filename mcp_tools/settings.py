"""Settings shared by every face of gemma-sre.

The names users of the existing Gemma-on-Cloud-Run tooling already export are read as they are
(``GOOGLE_CLOUD_PROJECT``, ``GOOGLE_CLOUD_LOCATION``, ``VLLM_BASE_URL``, ``MODEL_NAME``); everything
of our own is ``GEMMA_SRE_*``. Nothing here has a default that names anyone's project, region,
bucket or URL: an unset value stays ``None`` and the code that needs it says so.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from mcp_tools.errors import UserError


class Policy(StrEnum):
    """What the agent and the MCP server may do to a service."""

    READ_ONLY = "read-only"  # observe and diagnose; mutating tools are not even listed
    SUGGEST = "suggest"  # plan and show diffs, never apply
    APPROVE = "approve"  # apply after a recorded human approval (default)
    AUTO = "auto"  # apply the kinds listed in GEMMA_SRE_AUTO_KINDS without asking

    @classmethod
    def parse(cls, value: str | None, what: str = "--policy") -> Policy | None:
        """A policy from user input (None stays None: the settings' policy applies)."""
        if value is None or value == "":
            return None
        try:
            return cls(value)
        except ValueError:
            from mcp_tools.errors import UserError

            raise UserError(f"{what}: {value!r} is not one of {', '.join(p.value for p in cls)}") from None


def check_http_url(url: str, what: str) -> str:
    """``url`` when it is an http(s) URL with a host; else a ``UserError`` naming ``what``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{what}: {url!r} is not an http(s) URL")
    return url.strip()


def _default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gemma-sre"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GEMMA_SRE_", extra="ignore", populate_by_name=True)

    # Names the existing tooling uses (no prefix).
    project: str | None = Field(
        default=None, validation_alias=AliasChoices("GOOGLE_CLOUD_PROJECT", "project")
    )
    location: str | None = Field(
        default=None, validation_alias=AliasChoices("GOOGLE_CLOUD_LOCATION", "location")
    )
    vllm_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("VLLM_BASE_URL", "vllm_base_url")
    )
    model_name: str | None = Field(default=None, validation_alias=AliasChoices("MODEL_NAME", "model_name"))

    # Our own (GEMMA_SRE_*).
    service: str | None = None
    policy: Policy = Policy.APPROVE
    auto_kinds: list[str] = Field(default_factory=list)
    # The model that diagnoses; defaults to the monitored endpoint. A fallback is tried when it is down.
    model_url: str | None = None
    fallback_model_url: str | None = None
    model_api_key: SecretStr | None = None
    model_timeout_s: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    http_timeout_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    # One cycle's overall deadline (observe and diagnose: every read and the model inside it).
    cycle_deadline_s: float = Field(default=180.0, ge=1, le=3600, allow_inf_nan=False)
    state_dir: Path = Field(default_factory=_default_state_dir)
    checkpoint_url: str | None = None  # sqlite path (default under state_dir) or postgresql:// URL
    mcp_servers_file: Path | None = None  # an mcpServers JSON file, as Antigravity / Gemini CLI write it
    mcp_token: SecretStr | None = None  # bearer token required when the MCP HTTP server binds off-loopback
    mcp_principal: str | None = None  # who decides through MCP (recorded as the approver); default mcp:<user>
    # How long an MCP confirmation token stays valid, seconds.
    mcp_confirm_ttl_s: float = Field(default=300.0, gt=0, le=86_400, allow_inf_nan=False)
    # Test and sandbox seams: point the official clients at another endpoint (e.g. the sandbox).
    run_api_endpoint: str | None = None
    logging_api_endpoint: str | None = None
    monitoring_api_endpoint: str | None = None  # Cloud Monitoring (gRPC host:port; http:// = the sandbox)
    storage_api_endpoint: str | None = None
    secretmanager_api_endpoint: str | None = None
    quotas_api_endpoint: str | None = None
    aiplatform_api_endpoint: str | None = None
    anonymous_credentials: bool = False

    @field_validator("auto_kinds")
    @classmethod
    def _auto_kinds(cls, v: list[str]) -> list[str]:
        from mcp_tools.remediation import MUTATING_KINDS

        known = sorted(k.value for k in MUTATING_KINDS)
        bad = [k for k in v if k not in known]
        if bad:
            raise ValueError(f"{bad} are not mutating remediation kinds (one of {', '.join(known)})")
        return v

    @field_validator("model_url", "fallback_model_url", "vllm_base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        try:
            return check_http_url(v, "value")
        except UserError as e:
            raise ValueError(str(e).removeprefix("value: ")) from None

    @field_validator("mcp_token")
    @classmethod
    def _token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().strip():
            raise ValueError("a token of only whitespace is no token")
        return v

    @property
    def diagnosis_model_url(self) -> str | None:
        return self.model_url or self.vllm_base_url


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment; a bad value is one ``UserError`` that
    names the variable."""
    try:
        return Settings()
    except ValidationError as e:
        first = e.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        env = _ENV_NAMES.get(field, f"GEMMA_SRE_{field.upper()}")
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise UserError(f"{env}: {msg}") from None
    except SettingsError as e:
        raise UserError(f"settings: {' '.join(str(e).split())}") from None


_ENV_NAMES = {
    "project": "GOOGLE_CLOUD_PROJECT",
    "location": "GOOGLE_CLOUD_LOCATION",
    "vllm_base_url": "VLLM_BASE_URL",
    "model_name": "MODEL_NAME",
}
