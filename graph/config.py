"""The loop's configuration: a typed object read from the run config (``config["configurable"]``).

As in the LangGraph react-agent template, nodes call ``Configuration.from_runnable_config(config)``;
anything not given falls back to the process settings (``GEMMA_SRE_*``). The serializable part is
also kept in the thread's state (``meta.config``) so ``gemma-sre approve THREAD`` in another process
resumes against the same service and endpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from graph.slo import SloConfig
from mcp_tools.settings import Policy, Settings, get_settings

if TYPE_CHECKING:
    from mcp_tools.google_api import Deadline

#: Keys of ``configurable`` that hold live objects or this process's clock, never persisted.
RUNTIME_KEYS = ("model", "tools", "deadline_at")

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
    # Live objects (never persisted): the model a face resolved (a ``ModelEndpoint``, a URL or a chat
    # model: used as is, instead of resolving model_url / fallback_model_url), extra LangChain tools.
    model: Any = Field(default=None, exclude=True)
    tools: Any = Field(default=None, exclude=True)
    # When this cycle's deadline falls, in this process's ``time.monotonic()`` (set by the runner).
    deadline_at: float | None = Field(default=None, exclude=True)

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> Configuration:
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
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(base)

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None = None) -> Configuration:
        configurable = dict((config or {}).get("configurable") or {})
        known = {k: v for k, v in configurable.items() if k in cls.model_fields}
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
