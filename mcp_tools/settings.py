"""Settings shared by every face of gemma-sre.

The names users of the existing Gemma-on-Cloud-Run tooling already export are read as they are
(``GOOGLE_CLOUD_PROJECT``, ``GOOGLE_CLOUD_LOCATION``, ``VLLM_BASE_URL``, ``MODEL_NAME``); everything
of our own is ``GEMMA_SRE_*``. Nothing here has a default that names anyone's project, region,
bucket or URL: an unset value stays ``None`` and the code that needs it says so.

Settings may also come from a config file with named profiles, ``gemma-sre.toml``: the one
``GEMMA_SRE_CONFIG`` names, else ``./gemma-sre.toml``, else ``$XDG_CONFIG_HOME/gemma-sre/gemma-sre.toml``
(first found; ``~/.config`` when ``XDG_CONFIG_HOME`` is unset)::

    default_profile = "staging"

    [profiles.staging]
    project = "my-project"
    region = "us-east4"          # or location
    service = "gemma-12b"
    model_url = "http://127.0.0.1:8000/v1"
    policy = "suggest"

The profile is ``--profile NAME`` (``select_profile``), else ``GEMMA_SRE_PROFILE``, else
``default_profile``. A profile's keys are the settings' names (``GEMMA_SRE_`` dropped, lower case);
environment variables still win over the file. A malformed file, an unknown profile or an unknown
key is one ``UserError``.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

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


CONFIG_FILE = "gemma-sre.toml"

#: ``--profile NAME`` (the CLI's global option); None: GEMMA_SRE_PROFILE, else the file's default.
_selected_profile: str | None = None


def select_profile(name: str | None) -> None:
    """Use profile ``name`` of the config file from now on (the settings are read again)."""
    global _selected_profile
    _selected_profile = name or None
    get_settings.cache_clear()


def config_candidates() -> list[Path]:
    """Where the config file is looked for, in order."""
    explicit = os.environ.get("GEMMA_SRE_CONFIG")
    if explicit:
        return [Path(explicit).expanduser()]
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path.cwd() / CONFIG_FILE, Path(xdg) / "gemma-sre" / CONFIG_FILE]


class Profile(BaseModel):
    """The profile in use: which file, which name, and its keys (field names)."""

    path: Path
    name: str
    values: dict[str, Any] = Field(default_factory=dict)


def load_profile() -> Profile | None:
    """The selected profile of the config file (None: no file, or a file and no profile chosen)."""
    wanted = _selected_profile or os.environ.get("GEMMA_SRE_PROFILE") or None
    path = next((p for p in config_candidates() if p.is_file()), None)
    if path is None:
        if os.environ.get("GEMMA_SRE_CONFIG"):
            raise UserError(f"GEMMA_SRE_CONFIG: {os.environ['GEMMA_SRE_CONFIG']}: no such file")
        if wanted:
            where = " or ".join(str(p) for p in config_candidates())
            raise UserError(f"profile {wanted!r}: there is no config file ({where})")
        return None
    import tomllib  # only when there is a file: a start without one does not load the parser

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{path}: cannot read the config file ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid TOML ({e})") from None
    unknown = sorted(set(doc) - {"default_profile", "profiles"})
    if unknown:
        raise UserError(
            f"{path}: unknown key {unknown[0]!r} (the file holds default_profile and [profiles.NAME] tables)"
        )
    profiles = doc.get("profiles") or {}
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        raise UserError(f"{path}: 'profiles' must be tables, as [profiles.NAME]")
    default = doc.get("default_profile")
    if default is not None and not isinstance(default, str):
        raise UserError(f"{path}: default_profile must be a profile's name")
    name = wanted or default
    if not name:
        return None
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        how = "--profile" if _selected_profile else "GEMMA_SRE_PROFILE" if wanted else "default_profile"
        raise UserError(f"{how} {name!r}: no such profile in {path} (profiles: {known})")
    values = dict(profiles[name])
    if "region" in values:
        if "location" in values:
            raise UserError(f"{path} [profiles.{name}]: region and location name the same setting: give one")
        values["location"] = values.pop("region")
    fields = set(Settings.model_fields)
    bad = sorted(set(values) - fields)
    if bad:
        import difflib

        close = difflib.get_close_matches(bad[0], ["region", *sorted(fields)], n=1)
        hint = f"did you mean {close[0]!r}?" if close else "e.g. project, region, service, model_url, policy"
        raise UserError(f"{path} [profiles.{name}]: unknown key {bad[0]!r} ({hint})")
    return Profile(path=path, name=name, values=values)


class _ProfileSource(TomlConfigSettingsSource):
    """pydantic-settings' TOML source on the selected profile's table (``region`` read as ``location``)."""

    def __init__(self, settings_cls: type[BaseSettings], profile: Profile) -> None:
        self._profile = profile
        super().__init__(settings_cls, toml_file=profile.path, toml_table_header=("profiles", profile.name))

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        return {"profiles": {self._profile.name: self._profile.values}}


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
    # A diagnosis's whole time with the model (attempts, tool rounds); the answer streams and is cut there.
    model_deadline_s: float = Field(default=120.0, gt=0, le=3600, allow_inf_nan=False)
    # Send the rules as a system message and tool rounds as tool messages (only for a served template
    # that has those roles, as Gemma 4's); off: user / model turns only (prompts/turns.py).
    model_system_role: bool = False
    http_timeout_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    # One cycle's overall deadline (observe and diagnose: every read and the model inside it).
    cycle_deadline_s: float = Field(default=180.0, ge=1, le=3600, allow_inf_nan=False)
    state_dir: Path = Field(default_factory=_default_state_dir)
    checkpoint_url: str | None = None  # sqlite path (default under state_dir) or postgresql:// URL
    # Where decisions and applies are recorded (graph.checkpoint): a sqlite path or postgresql:// URL;
    # default: the checkpoint store. Under LangGraph Server (its own checkpointer) set it to a database
    # every replica shares.
    ledger_url: str | None = None
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

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments first, then the environment, then the config file's profile (when there is one)."""
        profile = load_profile()
        sources = [init_settings, env_settings, dotenv_settings, file_secret_settings]
        if profile is not None:
            sources.append(_ProfileSource(settings_cls, profile))
        return tuple(sources)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment; a bad value is one ``UserError`` that
    names the variable."""
    try:
        return Settings()
    except ValidationError as e:
        first = e.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        field = _FIELD_OF_ALIAS.get(field, field)
        env = _ENV_NAMES.get(field, f"GEMMA_SRE_{field.upper()}")
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        profile = load_profile()
        if profile is not None and field in profile.values and not _env_set(field, env):
            key = "region" if field == "location" and "location" not in _raw_keys(profile) else field
            raise UserError(f"{profile.path} [profiles.{profile.name}] {key}: {msg}") from None
        raise UserError(f"{env}: {msg}") from None
    except SettingsError as e:
        raise UserError(f"settings: {' '.join(str(e).split())}") from None


def _env_set(field: str, env: str) -> bool:
    """True when the environment gives ``field`` (then a bad value is the variable's, not the file's)."""
    return env in os.environ or f"GEMMA_SRE_{field.upper()}" in os.environ


def _raw_keys(profile: Profile) -> set[str]:
    import tomllib

    try:
        doc = tomllib.loads(profile.path.read_text(encoding="utf-8"))
        return set((doc.get("profiles") or {}).get(profile.name) or {})
    except (OSError, ValueError):
        return set()


_FIELD_OF_ALIAS = {
    "GOOGLE_CLOUD_PROJECT": "project",
    "GOOGLE_CLOUD_LOCATION": "location",
    "VLLM_BASE_URL": "vllm_base_url",
    "MODEL_NAME": "model_name",
}

_ENV_NAMES = {
    "project": "GOOGLE_CLOUD_PROJECT",
    "location": "GOOGLE_CLOUD_LOCATION",
    "vllm_base_url": "VLLM_BASE_URL",
    "model_name": "MODEL_NAME",
}
