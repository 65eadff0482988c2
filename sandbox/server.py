"""The in-process handle: ``start_sandbox(...)`` -> ``Sandbox`` (a context manager).

``Sandbox.url`` is the ``api_endpoint`` for the official clients (Cloud Run Admin v2 and Cloud
Logging v2 share the one port), ``.project`` / ``.location`` the ids scenarios deploy into (any id
works, as with other emulators), ``.journal`` the mutating calls received, ``.faults`` the fault
injector shared by the APIs and the served endpoints, ``.clock`` the simulated clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.app import SandboxApp
from sandbox.clock import SimClock, rfc3339
from sandbox.cloudlogging.model import REQUESTS, STDOUT, LogStore, run_resource
from sandbox.cloudrun.model import CloudRunBackend, Revision
from sandbox.faults import FaultInjector
from sandbox.journal import Journal
from sandbox.physics import Physics, PhysicsConfig

logger = logging.getLogger(__name__)

DEFAULT_PROJECT = "sandbox-project"
DEFAULT_LOCATION = "sandbox-region1"


class _ShutdownFilter(logging.Filter):
    """Hide uvicorn's traceback for simulated requests still decoding when the sandbox stops."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, asyncio.CancelledError) and "shutdown" in str(exc))


logging.getLogger("uvicorn.error").addFilter(_ShutdownFilter())


class Sandbox:
    def __init__(
        self,
        *,
        project: str | None = None,
        location: str | None = None,
        time_scale: float = 60.0,
        zero_latency: bool = False,
        physics: PhysicsConfig | None = None,
        start: float | None = None,
    ) -> None:
        from datetime import UTC, datetime

        self.project = project or DEFAULT_PROJECT
        self.location = location or DEFAULT_LOCATION
        self.clock = SimClock(time_scale, datetime.fromtimestamp(start, UTC) if start is not None else None)
        self.logs = LogStore(self.clock)
        self.journal = Journal()
        self.faults = FaultInjector()
        self.physics = Physics(physics)
        self.zero_latency = zero_latency
        self.scenario_name: str | None = None
        self.url = ""
        self.port = 0
        self._stop: Callable[[], None] | None = None
        self._background: list[Callable[[], None]] = []
        self.cloudrun = CloudRunBackend(
            self.clock,
            self.logs,
            self.physics,
            base_url=lambda: self.url or "http://127.0.0.1",
            zero_latency=zero_latency,
            app_factory=self._make_revision_app,
        )
        from sandbox.monitoring.model import MonitoringBackend
        from sandbox.monitoring.physics import Timeline

        #: each service's timeline (offered load, leaks, a stuck engine, instances): scenarios set it
        self.timelines: dict[str, Timeline] = {}
        self.monitoring = MonitoringBackend(
            self.clock, self.cloudrun, timeline=lambda svc: self.timelines.get(svc, Timeline())
        )
        self.monitoring_url = ""
        self._monitoring_server: Any = None
        self.app = SandboxApp(self)

    # ------------------------------------------------------------------------------ lifecycle
    def start(self, host: str = "127.0.0.1", port: int = 0) -> Sandbox:
        from sandbox.monitoring.grpc_server import MonitoringServer
        from sandbox.serve import start_in_thread

        self.url, self._stop = start_in_thread(self.app, host, port, graceful_timeout_s=1)
        self._monitoring_server = MonitoringServer(self.monitoring, self.faults, host).start()
        self.monitoring_url = self._monitoring_server.url
        self.port = int(self.url.rsplit(":", 1)[1])
        # URIs handed out before the port was known must now point at it
        with self.cloudrun.lock:
            for (p, loc, s), svc in self.cloudrun.services.items():
                uri = self.cloudrun.service_uri(p, loc, s)
                svc["uri"] = uri
                svc["urls"] = [uri]
        return self

    def stop(self) -> None:
        for stop in self._background:
            try:
                stop()
            except Exception:  # pragma: no cover - best effort
                logger.exception("stopping a background task")
        self._background.clear()
        if self._monitoring_server is not None:
            self._monitoring_server.stop()
            self._monitoring_server = None
        if self._stop is not None:
            self._stop()
            self._stop = None

    def __enter__(self) -> Sandbox:
        if not self.url:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_background(self, stop: Callable[[], None]) -> None:
        self._background.append(stop)

    # ------------------------------------------------------------------------------ serving
    def _make_revision_app(self, rev: Revision) -> tuple[Any, Any]:
        from sandbox.vllm_sim.app import VllmSim

        if rev.outcome.sim_config is None:
            raise ValueError(f"revision {rev.short} is ready but has no serving config")
        config = rev.outcome.sim_config
        factor = self.faults.slowdown(rev.service, rev.short)  # an armed ``slow`` fault: a slower fix
        if factor != 1.0:
            config = config.model_copy(update={"ttft_factor": factor})
            rev.outcome.notes["ttft_factor"] = factor
        sim = VllmSim(config, self.faults)
        return sim.app, sim

    def record_request(self, rev: Revision, scope: Any, status: int, latency_s: float, size: int) -> None:
        """A Cloud Run request log entry (run.googleapis.com/requests) for a served request."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        qs = scope.get("query_string", b"").decode("latin-1")
        url = f"{self.url}{scope.get('path', '')}" + (f"?{qs}" if qs else "")
        sev = "ERROR" if status >= 500 else "WARNING" if status >= 400 else "INFO"
        self.logs.append(
            project=rev.project,
            log_id=REQUESTS,
            timestamp=self.clock.now_s(),
            severity=sev,
            resource=run_resource(rev.project, rev.location, rev.service, rev.short),
            http_request={
                "requestMethod": scope.get("method", "GET"),
                "requestUrl": url,
                "status": status,
                "responseSize": str(size),
                "userAgent": headers.get("user-agent", ""),
                "remoteIp": (scope.get("client") or ("127.0.0.1", 0))[0],
                "latency": f"{latency_s:.6f}s",
                "protocol": "HTTP/1.1",
            },
            labels={"instanceId": rev.data.get("uid", "")[:32]},
        )

    # ------------------------------------------------------------------------------ helpers
    @property
    def service(self) -> str | None:
        """The short name of the service the scenario (or incident) deployed first; None when empty."""
        with self.cloudrun.lock:
            for p, loc, s in self.cloudrun.services:
                if p == self.project and loc == self.location:
                    return s
        return None

    def service_name(self, service: str) -> str:
        return f"projects/{self.project}/locations/{self.location}/services/{service}"

    def write_log(
        self,
        service: str,
        *,
        severity: str = "INFO",
        text: str | None = None,
        json_payload: dict[str, Any] | None = None,
        timestamp: float | None = None,
        revision: str | None = None,
        log_id: str = STDOUT,
    ) -> dict[str, Any]:
        """A log entry written by a revision of ``service`` (its latest created one unless ``revision``
        names another), at ``timestamp`` or now: what scenarios and tests plant for the tools to read."""
        if revision is None:
            with self.cloudrun.lock:
                svc = self.cloudrun.services[(self.project, self.location, service)]
                revision = svc["latestCreatedRevision"].rsplit("/", 1)[1]
        return self.logs.append(
            project=self.project,
            log_id=log_id,
            timestamp=self.clock.now_s() if timestamp is None else timestamp,
            severity=severity,
            text=text,
            json_payload=json_payload,
            resource=run_resource(self.project, self.location, service, revision),
        )

    def settings_fields(self) -> dict[str, Any]:
        """The fields that point gemma-sre's ``Settings`` (or a loop ``Configuration``) at this sandbox."""
        return {
            "project": self.project,
            "location": self.location,
            "run_api_endpoint": self.url,
            "logging_api_endpoint": self.url,
            "monitoring_api_endpoint": self.monitoring_url or None,
            "anonymous_credentials": True,
        }

    def deploy(self, spec: Any, *, wait: bool = False, emit_logs: bool = True) -> dict[str, Any]:
        """Create or replace a service from a ``ServiceSpec`` (scenarios; not journaled: no client call).
        ``emit_logs=False`` keeps the revision's fate but not its simulated log lines (incident replay)."""
        from sandbox.convert import service_from_spec

        body = service_from_spec(spec)
        key = (self.project, spec.region or self.location, spec.name)
        if key in self.cloudrun.services:
            op = self.cloudrun.update_service(*key, body)
        else:
            op = self.cloudrun.create_service(*key, body)
        if not emit_logs:
            with self.cloudrun.lock:
                svc = self.cloudrun.services[key]
                rev = self.cloudrun.revisions[key][svc["latestCreatedRevision"].rsplit("/", 1)[1]]
                rev.outcome.logs = []
        if wait:
            self.settle()
        return op

    def settle(self, max_sim_s: float = 3600.0) -> None:
        """Jump the clock until every starting revision is Ready or failed (scenario set-up, tests)."""
        with self.cloudrun.lock:
            pending = [
                r.settle_s
                for revs in self.cloudrun.revisions.values()
                for r in revs.values()
                if r.state == "starting"
            ]
        if pending:
            gap = min(max(pending) - self.clock.now_s() + 0.001, max_sim_s)
            if gap > 0:
                self.clock.advance(gap)
        self.cloudrun.advance()

    def wait_operation(self, op_name: str, timeout: float = 30.0) -> dict[str, Any]:
        """Block (real time) until an operation is done; returns it."""
        _, project, _, location, _, op_id = op_name.split("/", 5)
        deadline = time.monotonic() + timeout
        while True:
            op = self.cloudrun.get_operation(project, location, op_id)
            if op.get("done") or time.monotonic() > deadline:
                return op
            time.sleep(0.01)

    def state(self) -> dict[str, Any]:
        self.cloudrun.advance()
        with self.cloudrun.lock:
            out: dict[str, Any] = {
                "project": self.project,
                "location": self.location,
                "url": self.url,
                "now": rfc3339(self.clock.now_s()),
                "scenario": self.scenario_name,
                "services": {},
            }
            for (p, loc, s), svc in self.cloudrun.services.items():
                revs = self.cloudrun.revisions.get((p, loc, s), {})
                out["services"][f"{p}/{loc}/{s}"] = {
                    "uri": svc.get("uri"),
                    "latestReadyRevision": svc.get("latestReadyRevision"),
                    "latestCreatedRevision": svc.get("latestCreatedRevision"),
                    "serving": self.cloudrun.serving_revisions((p, loc, s)),
                    "revisions": {
                        r.short: {
                            "state": r.state,
                            "category": r.outcome.category,
                            "ready_in_s": round(r.outcome.duration_s, 1),
                            "notes": {k: v for k, v in r.outcome.notes.items() if k != "plan"},
                        }
                        for r in revs.values()
                    },
                }
            return out

    def revision_sim(self, service: str, revision: str | None = None) -> Any:
        """The ``VllmSim`` serving a revision (default: the latest ready one), for tests."""
        key = (self.project, self.location, service)
        self.cloudrun.advance()
        with self.cloudrun.lock:
            revs = self.cloudrun.revisions.get(key, {})
            if revision is None:
                ready = [r for r in revs.values() if r.state == "ready"]
                if not ready:
                    return None
                return max(ready, key=lambda r: r.created_s).sim
            r = revs.get(revision)
            return r.sim if r is not None else None


def start_sandbox(
    scenario: str | None = None,
    incident: str | Path | Any | None = None,
    port: int = 0,
    time_scale: float = 60.0,
    *,
    host: str = "127.0.0.1",
    project: str | None = None,
    location: str | None = None,
    zero_latency: bool = False,
    physics: PhysicsConfig | None = None,
    drive_load: bool = True,
) -> Sandbox:
    """Build a sandbox (optionally loaded with a named scenario or an incident file) and start it on
    ``host:port`` (0: a free port) in a background thread. Use as a context manager, or ``stop()``."""
    from sandbox import scenarios

    if scenario is not None and incident is not None:
        raise ValueError("give a scenario or an incident, not both")
    sb = scenarios.build(
        scenario=scenario,
        incident=incident,
        time_scale=time_scale,
        project=project,
        location=location,
        zero_latency=zero_latency,
        physics=physics,
    )
    sb.start(host, port)
    if drive_load:
        scenarios.after_start(sb)
    return sb


__all__ = ["Sandbox", "start_sandbox"]
