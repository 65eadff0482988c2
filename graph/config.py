"""The loop's configuration: a typed object read from the run config (``config["configurable"]``).

As in the LangGraph react-agent template, nodes call ``Configuration.from_runnable_config(config)``;
anything not given falls back to the process settings (``GEMMA_SRE_*``). The serializable part is
also kept in the thread's state (``meta.config``) so ``gemma-sre approve THREAD`` in another process
resumes against the same service and endpoints.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from graph.slo import SloConfig
from mcp_tools.settings import Policy, Settings, get_settings

if TYPE_CHECKING:
    from mcp_tools.google_api import Deadline

#: Keys of ``configurable`` that hold live objects or this process's clock, never persisted.
RUNTIME_KEYS = ("model", "tools", "deadline_at")

#: The traffic percents a canary is given, one step after another (the last is 100).
DEFAULT_CANARY_STEPS = (10, 50, 100)

#: Configuration keys that set ``slo``'s latency targets in milliseconds (the canary's SLOs had their
#: own fields before ``SloConfig`` was the one source): still read, set over ``slo``, never written.
SLO_MS_KEYS = {"slo_ttft_p95_ms": "ttft_p95_s", "slo_itl_p95_ms": "itl_p95_s"}

#: The bounds of ``cycle_deadline_s`` (seconds).
CYCLE_DEADLINE_MIN_S = 1.0
CYCLE_DEADLINE_MAX_S = 3600.0


class Configuration(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    service: str = ""
    policy: Policy = Policy.APPROVE
    auto_kinds: list[str] = Field(default_factory=list)
    project: str | None = None
    location: str | None = None
    run_api_endpoint: str | None = None
    logging_api_endpoint: str | None = None
    monitoring_api_endpoint: str | None = None
    anonymous_credentials: bool = False
    vllm_base_url: str | None = None  # the monitored endpoint when the service URI is not reachable
    state_dir: str | None = None
    # The model that diagnoses (None: analyzers only). ``use_model=False`` never calls one.
    use_model: bool = True
    model_url: str | None = None
    fallback_model_url: str | None = None
    model_name: str | None = None
    mcp_servers_file: str | None = None
    max_tool_steps: int = 4
    # Bounds and retries.
    log_limit: int = 50_000
    log_window_s: float = 86400.0  # first cycle: the last day (bounded by log_limit)
    # Cloud Monitoring: the series' window and alignment (None: read it when it is the real API or
    # an endpoint is configured for it; False: never).
    read_monitoring: bool | None = None
    series_window_s: float = Field(default=1800.0, ge=60, le=86400)
    series_period_s: float = Field(default=60.0, ge=60, le=3600)
    # The SLOs and time thresholds (a hung engine's minutes, a full KV cache) the series are judged by.
    slo: SloConfig = Field(default_factory=SloConfig)
    # A 1-token completion probe while /health answers (0: none): a stuck engine hangs it.
    probe_timeout_s: float = Field(default=8.0, ge=0, le=120)
    retries: int = 3
    retry_base_s: float = 0.5
    # One overall deadline per cycle for everything before a decision: observe (every Cloud Run,
    # Logging and endpoint read) and diagnose (the model and its tools). Each call's timeout is what
    # is left of it; a dependency that hangs ends the cycle with an escalation, not a wait. Once a
    # change is applied, verify and rollback run under ``verify_deadline_s`` instead: cutting a
    # rollout short would leave the service half-changed.
    cycle_deadline_s: float = Field(
        default=180.0, ge=CYCLE_DEADLINE_MIN_S, le=CYCLE_DEADLINE_MAX_S, allow_inf_nan=False
    )
    verify_deadline_s: float = 300.0
    verify_poll_s: float = 1.0
    smoke_prompt: str = "Reply with the word ok."
    # The canary (apply, verify, rollback): a fix to a service that serves is deployed as a tagged
    # revision with no traffic, checked on its own URL (Ready, /health, a smoke completion, its "GPU
    # KV cache size" line against the planner, a short benchmark against the serving revision's),
    # then given traffic in ``canary_steps`` percent, each watched for ``canary_hold_s`` against the
    # SLOs; a breach the fix causes sends all traffic back. ``canary=False``: the fix takes all
    # traffic once Ready (as a service with no serving revision always does).
    canary: bool = True
    canary_steps: list[int] = Field(default_factory=lambda: list(DEFAULT_CANARY_STEPS))
    canary_hold_s: float = Field(default=30.0, ge=0, le=3600, allow_inf_nan=False)
    # Each measurement: a short benchmark (mcp_tools.bench) of this many chat requests.
    canary_requests: int = Field(default=8, ge=1, le=200)
    canary_concurrency: int = Field(default=2, ge=1, le=64)
    canary_prompt_tokens: int = Field(default=64, ge=1, le=8192)
    canary_output_tokens: int = Field(default=16, ge=2, le=1024)
    canary_request_timeout_s: float = Field(default=30.0, gt=0, le=600, allow_inf_nan=False)
    # A regression: the fix's median TTFT or inter-token latency above this many times the serving
    # revision's (and by more than ``canary_min_delta_ms``: below that it is noise). None: not compared.
    canary_max_ratio: float | None = Field(default=1.5, gt=1.0, le=100, allow_inf_nan=False)
    canary_min_delta_ms: float = Field(default=25.0, ge=0, allow_inf_nan=False)
    # Each step is watched against ``slo``'s TTFT and inter-token p95 targets (here p95 over the step's
    # requests; ``slo_ttft_p95_ms`` / ``slo_itl_p95_ms`` still set them, ``SLO_MS_KEYS``) and this
    # error rate (5xx, 429, timeouts and dropped connections over the step's requests).
    slo_error_rate: float = Field(default=0.01, ge=0, le=1, allow_inf_nan=False)
    # A PNG of the canary's figures next to the report (matplotlib, imported only then), or at this path.
    canary_chart: bool = False
    canary_chart_path: str | None = None
    # False: the cycle writes no report files (a watch cycle's read-only look, when its incident is
    # already some thread's: one incident, one report).
    write_report: bool = True
    # Live objects (never persisted): the model a face resolved (a ``ModelEndpoint``, a URL or a chat
    # model: used as is, instead of resolving model_url / fallback_model_url), extra LangChain tools.
    model: Any = Field(default=None, exclude=True)
    tools: Any = Field(default=None, exclude=True)
    # When this cycle's deadline falls, in this process's ``time.monotonic()`` (set by the runner).
    deadline_at: float | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _slo_in_ms(cls, data: Any) -> Any:
        """``slo_ttft_p95_ms`` / ``slo_itl_p95_ms`` (the keys a canary's SLOs had): into ``slo``, only for
        a target ``slo`` does not set (a thread persisted before ``slo`` carries the old defaults in
        them, which must not override a customised ``slo``)."""
        if not isinstance(data, dict) or not any(k in data for k in SLO_MS_KEYS):
            return data
        data = dict(data)
        slo = data.get("slo")
        if isinstance(slo, SloConfig):
            merged, given = slo.model_dump(), slo.model_fields_set
        else:
            merged = dict(slo or {})
            given = {k for k, v in merged.items() if v is not None}
        for key, field in SLO_MS_KEYS.items():
            ms = data.pop(key, None)
            if ms is not None and field not in given:
                merged[field] = float(ms) / 1000.0
        data["slo"] = merged
        return data

    @field_validator("canary_steps")
    @classmethod
    def _steps(cls, v: list[int]) -> list[int]:
        if not v or any(not 1 <= p <= 100 for p in v) or any(b <= a for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("canary_steps must be increasing percents from 1 to 100, e.g. [10, 50, 100]")
        if v[-1] != 100:
            raise ValueError("canary_steps must end at 100 (the fix takes all traffic at the last step)")
        return v

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Configuration:
        """The process settings under ``overrides``. An override of None is "not given", except for a
        field that takes None as a value other than its default (``canary_max_ratio=None``: latency
        not compared), so a thread's persisted configuration reads back as it was written."""
        s = settings or get_settings()
        base: dict[str, Any] = {
            "service": s.service or "",
            "policy": s.policy,
            "auto_kinds": list(s.auto_kinds),
            "project": s.project,
            "location": s.location,
            "run_api_endpoint": s.run_api_endpoint,
            "logging_api_endpoint": s.logging_api_endpoint,
            "monitoring_api_endpoint": s.monitoring_api_endpoint,
            "anonymous_credentials": s.anonymous_credentials,
            "vllm_base_url": s.vllm_base_url,
            "state_dir": str(s.state_dir),
            "model_url": s.diagnosis_model_url,
            "fallback_model_url": s.fallback_model_url,
            "model_name": s.model_name,
            "mcp_servers_file": str(s.mcp_servers_file) if s.mcp_servers_file else None,
            "cycle_deadline_s": s.cycle_deadline_s,
        }
        base.update({k: v for k, v in overrides.items() if v is not None or k in _NONE_IS_A_VALUE})
        return cls.model_validate(base)

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None = None) -> Configuration:
        configurable = dict((config or {}).get("configurable") or {})
        known = {k: v for k, v in configurable.items() if k in cls.model_fields or k in SLO_MS_KEYS}
        return cls.from_settings(**known)

    def persisted(self) -> dict[str, Any]:
        """The serializable part, for the thread's state."""
        return self.model_dump(mode="json")

    def settings(self) -> Settings:
        """Process settings with this configuration's project, endpoints and credentials."""
        s = get_settings()
        return s.model_copy(
            update={
                "project": self.project,
                "location": self.location,
                "run_api_endpoint": self.run_api_endpoint,
                "logging_api_endpoint": self.logging_api_endpoint,
                "monitoring_api_endpoint": self.monitoring_api_endpoint,
                "anonymous_credentials": self.anonymous_credentials,
                "vllm_base_url": self.vllm_base_url,
                "policy": self.policy,
                "auto_kinds": list(self.auto_kinds),
                "state_dir": Path(self.state_dir) if self.state_dir else s.state_dir,
                "model_url": self.model_url,
                "fallback_model_url": self.fallback_model_url,
            }
        )

    @property
    def monitoring_wanted(self) -> bool:
        """Whether observe reads Cloud Monitoring: always against the real APIs; against an emulator
        (another API endpoint is overridden) only when one is configured for Monitoring too."""
        if self.read_monitoring is not None:
            return self.read_monitoring
        if self.monitoring_api_endpoint:
            return True
        return not (self.run_api_endpoint or self.logging_api_endpoint)

    def deadline(self) -> Deadline:
        """This cycle's deadline: the runner's (``deadline_at``), else one starting now."""
        from mcp_tools.google_api import Deadline

        if self.deadline_at is not None:
            return Deadline.until(self.deadline_at, self.cycle_deadline_s)
        return Deadline(total_s=self.cycle_deadline_s)

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir) if self.state_dir else get_settings().state_dir


#: The fields whose None is a setting of its own, not "not given" (their default is not None).
_NONE_IS_A_VALUE = frozenset(
    name
    for name, f in Configuration.model_fields.items()
    if not f.is_required()
    and f.get_default(call_default_factory=True) is not None
    and type(None) in typing.get_args(f.annotation)
)
