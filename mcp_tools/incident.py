"""The incident file (SPEC.md section 3): one recorded incident per YAML file.

Unknown keys are ignored; a missing required key or a wrong type is a ``UserError`` that names the
file and the key. Used by ``gemma-sre diagnose``, the eval harness and the sandbox (``--incident``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcp_tools.errors import UserError
from mcp_tools.remediation import RemediationKind
from mcp_tools.taxonomy import Category

SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class LogLine(_Lenient):
    timestamp: str | None = None
    severity: str = "DEFAULT"
    text: str | None = None
    json_payload: dict[str, Any] | None = Field(default=None, alias="json")
    revision: str | None = None  # the Cloud Run revision that wrote the line, when the source says

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, v: Any) -> str:
        s = str(v).upper() if v is not None else "DEFAULT"
        if s == "WARN":
            s = "WARNING"
        if s not in SEVERITIES:
            raise ValueError(f"unknown severity {v!r} (one of {', '.join(SEVERITIES)})")
        return s

    @property
    def message(self) -> str:
        """The line as text: the text payload, or the structured payload's message (else the JSON)."""
        if self.text is not None:
            return self.text
        if self.json_payload is not None:
            for key in ("message", "msg", "textPayload"):
                if isinstance(self.json_payload.get(key), str):
                    return str(self.json_payload[key])
            import json

            return json.dumps(self.json_payload, sort_keys=True)
        return ""


class StartupProbe(_Lenient):
    """Cloud Run's startup probe (TCP on the container port unless ``http_path`` is set)."""

    initial_delay_seconds: int = 0
    period_seconds: int = 240
    timeout_seconds: int = 240
    failure_threshold: int = 1
    http_path: str | None = None

    @property
    def budget_seconds(self) -> int:
        """How long a container may take to start before the probe gives up."""
        return self.initial_delay_seconds + self.period_seconds * self.failure_threshold


class ServiceSpec(_Lenient):
    """The neutral description of a vLLM service on Cloud Run (also what an incident records)."""

    name: str = "vllm"
    region: str | None = None
    gpu_type: str | None = None
    gpu_count: int = 1
    cpu: float | int | str | None = None
    memory: str | None = None
    image: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    min_instances: int = 0
    max_instances: int | None = None
    concurrency: int | None = None
    startup_probe: StartupProbe | None = None
    gpu_zonal_redundancy: bool | None = None


class Expected(_Lenient):
    category: str
    remediation_kinds: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    forbidden_kinds: list[str] = Field(default_factory=list)

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        if v not in Category.values():
            raise ValueError(f"unknown category {v!r}")
        return v

    @field_validator("remediation_kinds", "forbidden_kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if k not in set(RemediationKind)]
        if bad:
            raise ValueError(f"unknown remediation kind(s) {bad}")
        return v


class Incident(_Lenient):
    id: str
    title: str
    source: str | None = None
    service: ServiceSpec | None = None
    model_config_: dict[str, Any] = Field(default_factory=dict, alias="model_config")
    logs: list[LogLine]
    metrics: str | None = None
    expected: Expected | None = None
    #: ``real`` (log lines copied verbatim from a public source) or ``composed`` (written from real
    #: wording); None when the file does not say.
    provenance: str | None = None
    path: Path | None = Field(default=None, exclude=True)


def _loc(err: Any) -> str:
    parts = [str(p) for p in err.get("loc", ())]
    return ".".join(parts) or "(top level)"


def parse_incident(data: Any, path: Path | str = "<incident>") -> Incident:
    """Validate a parsed YAML document as an incident; errors name the file and the key."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: an incident file must be a YAML mapping, not {type(data).__name__}")
    try:
        inc = Incident.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        kind = "missing required key" if first.get("type") == "missing" else "bad value for"
        msg = "" if first.get("type") == "missing" else f": {first.get('msg')}"
        raise UserError(f"{path}: {kind} '{_loc(first)}'{msg}") from None
    inc.path = Path(path)
    return inc


def load_incident(path: Path | str) -> Incident:
    """Read one incident file (SPEC.md section 3)."""
    import yaml

    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{p}: no such incident file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise UserError(f"{p}: cannot read incident file ({e.__class__.__name__})") from None
    # The C loader (when PyYAML was built with libyaml) reads long incidents about ten times faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: not valid YAML{where}") from None
    return parse_incident(data, p)


def load_incident_dir(directory: Path | str) -> tuple[list[Incident], list[tuple[Path, str]]]:
    """Every ``*.yaml``/``*.yml`` below a directory: the good incidents, and (path, error) for the bad."""
    d = Path(directory)
    if not d.is_dir():
        raise UserError(f"{d}: not a directory of incident files")
    good: list[Incident] = []
    bad: list[tuple[Path, str]] = []
    for p in sorted([*d.rglob("*.yaml"), *d.rglob("*.yml")]):
        try:
            good.append(load_incident(p))
        except UserError as e:
            bad.append((p, str(e)))
    return good, bad
