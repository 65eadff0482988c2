"""A fleet of services watched by one or more replicas: ``gemma-sre watch --fleet fleet.toml``.

The file (``FleetFile``)::

    [fleet]
    workers = 4          # cycles at once in this replica (a worker pool)
    interval = "60s"     # one round of every service per interval
    deadline = "50s"     # every cycle of a round starts and ends within this (default: the interval)
    lease = "30s"        # a dead replica's services are picked up within this

    [defaults]           # any service key below, for every service (each may override it)
    policy = "approve"
    model_url = "http://127.0.0.1:8000/v1"

    [[services]]
    service = "gemma-4-12b"
    project = "team-a-prod"
    region = "us-central1"
    policy = "suggest"
    slo = { availability = 0.999, ttft_p95_s = 2.0 }

A round is one period of ``interval`` on the database's clock (period = now // interval), the same for
every replica. In a round each service's cycle is what ``agent.watch.Watcher.cycle`` does for one
service (observe and diagnose read-only; a new or escalated incident gets a thread of its own under
the service's policy), run by whichever replica gets the service's lease first (``graph.leases``):
the ledger holds one row per service and period, so a cycle finishes once fleet-wide, and the
watch state lives in the same database, so any replica carries a service on. A service nobody
reached before the round's deadline is recorded and reported as skipped.

Replicas share ``GEMMA_SRE_CHECKPOINT_URL`` (Postgres across hosts; the default SQLite file under the
state directory serves replicas on one host). The URL stays in the environment, not in the file: it
may carry a password.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import tomllib
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from agent.incidents_tracker import IncidentEvent, TrackerState, TrackerStore
from agent.watch import CycleSummary, Watcher, parse_interval, status_line, store_key
from graph.config import CYCLE_DEADLINE_MIN_S, Configuration
from graph.leases import (
    STATE_TABLE,
    Lease,
    LeaseLost,
    LeaseStore,
    Renewer,
    RunRecord,
    held,
    open_leases,
)
from graph.slo import SloConfig
from mcp_tools import names
from mcp_tools.errors import UserError, short_error
from mcp_tools.settings import Policy, get_settings

log = logging.getLogger(__name__)

#: Most services one file may list.
MAX_SERVICES = 10_000


def _duration(what: str) -> BeforeValidator:
    def parse(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise ValueError("must be a duration like 30s, 5m or 1h, or a number of seconds")
        try:
            return parse_interval(v, what)
        except UserError as e:
            raise ValueError(str(e).removeprefix(f"{what}: ")) from None

    return BeforeValidator(parse)


def _checked(check: Callable[[str], str]) -> BeforeValidator:
    """A ``mcp_tools.names`` check as a pydantic validator (its UserError becomes the field's error)."""

    def run(v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, str):
            raise ValueError("must be a string")
        try:
            return check(v)
        except UserError as e:
            raise ValueError(str(e)) from None

    return BeforeValidator(run)


def _policy(v: Any) -> Any:
    if v is None or isinstance(v, Policy):
        return v
    try:
        return Policy.parse(str(v), "policy")
    except UserError as e:
        raise ValueError(str(e).removeprefix("policy: ")) from None


def _url(v: Any) -> Any:
    if v is None:
        return v
    from mcp_tools.settings import check_http_url

    try:
        return check_http_url(str(v), "url")
    except UserError as e:
        raise ValueError(str(e).removeprefix("url: ")) from None


Url = Annotated[str | None, BeforeValidator(_url)]


class FleetSlo(SloConfig):
    model_config = ConfigDict(extra="forbid")  # a misspelt SLO is an error, not a default


class ServiceSettings(BaseModel):
    """What a service may set (``[defaults]`` for all, each ``[[services]]`` entry for itself)."""

    model_config = ConfigDict(extra="forbid")

    project: Annotated[str | None, _checked(names.validate_project)] = None
    region: Annotated[str | None, _checked(lambda v: names.validate_location(v, "region"))] = None
    policy: Annotated[Policy | None, BeforeValidator(_policy)] = None
    auto_kinds: list[str] | None = None
    # The model endpoint that diagnoses this service (use_model = false: the analyzers only).
    model_url: Url = None
    fallback_model_url: Url = None
    model_name: str | None = None
    use_model: bool | None = None
    # Where the service's APIs are (the sandbox; default: Google's).
    run_api_endpoint: Url = None
    logging_api_endpoint: Url = None
    anonymous_credentials: bool | None = None
    vllm_base_url: Url = None
    cycle_deadline: Annotated[float | None, _duration("cycle_deadline")] = None
    #: The service's SLOs and time thresholds (``graph.slo.SloConfig``'s keys; the rest its defaults).
    slo: FleetSlo | None = None


class FleetService(ServiceSettings):
    service: Annotated[str, _checked(names.validate_service_name)]


class FleetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default=4, ge=1, le=64)
    interval: Annotated[float, _duration("interval")] = 60.0
    deadline: Annotated[float | None, _duration("deadline")] = None
    lease: Annotated[float, _duration("lease")] = 30.0

    @property
    def round_deadline_s(self) -> float:
        return self.deadline if self.deadline is not None else self.interval


class FleetFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fleet: FleetOptions = Field(default_factory=FleetOptions)
    defaults: ServiceSettings = Field(default_factory=ServiceSettings)
    services: list[FleetService] = Field(min_length=1, max_length=MAX_SERVICES)

    @field_validator("services")
    @classmethod
    def _unique(cls, v: list[FleetService]) -> list[FleetService]:
        seen: set[tuple[str | None, str | None, str]] = set()
        for s in v:
            k = (s.project, s.region, s.service)
            if k in seen:
                raise ValueError(f"service {s.service!r} is listed twice for the same project and region")
            seen.add(k)
        return v

    def configurations(self, **base: Any) -> list[Configuration]:
        """Each service's loop configuration: the process settings, then [defaults], then its own."""
        out = []
        for s in self.services:
            merged = {
                **self.defaults.model_dump(exclude_none=True),
                **s.model_dump(exclude_none=True),
            }
            # SLOs merge key by key: a service's own, then [defaults]', then SloConfig's defaults.
            merged["slo"] = {
                **(self.defaults.slo.model_dump(exclude_unset=True) if self.defaults.slo else {}),
                **(s.slo.model_dump(exclude_unset=True) if s.slo else {}),
            }
            merged["location"] = merged.pop("region", None)
            deadline = merged.pop("cycle_deadline", None)
            if deadline is not None:
                merged["cycle_deadline_s"] = deadline
            out.append(Configuration.from_settings(**base, **merged))
        return out

    def keyed(self, **base: Any) -> dict[str, Configuration]:
        """Each service's configuration by its lease and watch-state key (``agent.watch.store_key``):
        what a watcher replica and ``gemma-sre serve --fleet`` both know a service by."""
        return {store_key(cfg): cfg for cfg in self.configurations(**base)}


def label(cfg: Configuration) -> str:
    """A fleet service as shown: project/region/service (names repeat across a fleet)."""
    return "/".join(str(p) for p in (cfg.project or "-", cfg.location or "-", cfg.service))


def _where(err: Any) -> str:
    parts = [str(p) for p in err.get("loc", ())]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "(top level)"


def load_fleet(path: str | Path) -> FleetFile:
    """The fleet file, validated; anything wrong is one UserError naming the file and the key."""
    p = Path(path).expanduser()
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"--fleet {p}: no such file") from None
    except OSError as e:
        raise UserError(f"--fleet {p}: cannot read it ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"--fleet {p}: not valid TOML ({e})") from None
    try:
        fleet = FleetFile.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        if first.get("type") == "missing":
            raise UserError(f"{p}: missing required key '{_where(first)}'") from None
        if first.get("type") == "extra_forbidden":
            raise UserError(f"{p}: unknown key '{_where(first)}'") from None
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise UserError(f"{p}: bad value for '{_where(first)}': {msg}") from None
    if fleet.fleet.round_deadline_s > fleet.fleet.interval:
        raise UserError(
            f"{p}: fleet.deadline is longer than fleet.interval (a round must end before the next)"
        )
    return fleet


# --- running it ---------------------------------------------------------------------------------


class ServiceRun(BaseModel):
    """What became of one service in one round, as this replica saw it."""

    key: str
    service: str
    status: Literal["done", "failed", "elsewhere", "skipped", "lost", "running_elsewhere", "interrupted"]
    holder: str | None = None
    attempts: int = 0
    detail: str = ""
    summary: CycleSummary | None = None


class RoundReport(BaseModel):
    period: int
    holder: str
    services: list[ServiceRun] = Field(default_factory=list)
    missed_periods: int = 0  # rounds that never started: the one before overran its interval
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for s in self.services if s.status == status)

    def line(self) -> str:
        here = self.count("done") + self.count("failed")
        parts = [f"round {self.period}: {here} cycle(s) here"]
        if self.count("failed"):
            parts.append(f"{self.count('failed')} failed")
        if self.count("elsewhere"):
            parts.append(f"{self.count('elsewhere')} by other replicas")
        for status, what in (
            ("skipped", "skipped (not reached before the deadline)"),
            ("running_elsewhere", "still running in another replica at the deadline"),
            ("interrupted", "interrupted (their replica died; taken up next round)"),
            ("lost", "lost their lease mid-cycle (not recorded)"),
        ):
            names = [s.service for s in self.services if s.status == status]
            if names:
                shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
                parts.append(f"{len(names)} {what}: {shown}")
        if self.missed_periods:
            parts.append(f"{self.missed_periods} round(s) missed (the previous one overran)")
        return "; ".join(parts) + f" ({self.seconds:.1f}s)"


class LeasedTrackerStore(TrackerStore):
    """A service's watch state in the lease database. Saving it is fenced by ``lease`` (LeaseLost once
    this holder lost it); in a round (``period``) it settles the period's cycle in the ledger in the
    same transaction. Without a lease it can only be read."""

    def __init__(
        self, leases: LeaseStore, key: str, lease: Lease | None = None, period: int | None = None
    ) -> None:
        super().__init__(Path(STATE_TABLE) / key)
        self.leases = leases
        self.key = key
        self.lease = lease
        self.period = period
        self.saved = False

    def load(self) -> TrackerState:
        raw = self.leases.load_state(self.key)
        if raw is None:
            return TrackerState()
        try:
            return TrackerState.model_validate_json(raw)
        except ValueError as e:
            log.warning("watch state of %s is unreadable (%s); starting afresh", self.key, e)
            return TrackerState()

    def save(self, state: TrackerState) -> None:
        if self.lease is None:
            raise RuntimeError(f"{self.key}: the watch state is saved only under the service's lease")
        if self.saved:  # one cycle, one save
            raise RuntimeError(f"{self.key}: the watch state was already saved for this cycle")
        raw = state.model_dump_json()
        if self.period is None:
            self.leases.save_state(self.lease, raw)
        else:
            self.leases.finish_run(self.lease, self.period, "done", f"cycle {state.cycle}", state=raw)
        self.saved = True


def default_holder() -> str:
    """This replica's name in the lease table: host, process and a random part (a reused pid is
    another holder)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


#: How often a replica looks at the ledger and the leases while a round is open (at most).
POLL_S = 0.25


class FleetWatcher:
    """One replica: rounds of every service's cycle, shared with the other replicas by lease."""

    def __init__(
        self,
        fleet: FleetFile,
        leases: LeaseStore,
        *,
        holder: str | None = None,
        webhook: str | None = None,
        quiet_cycles: int = 2,
        on_event: Callable[[IncidentEvent], None] | None = None,
        on_cycle: Callable[[str, CycleSummary], None] | None = None,
        sender: Callable[..., Any] | None = None,
        **base: Any,
    ) -> None:
        self.fleet = fleet
        self.opts = fleet.fleet
        self.leases = leases
        self.holder = holder or default_holder()
        self.webhook = webhook
        self.quiet_cycles = quiet_cycles
        self.on_event = on_event
        self.on_cycle = on_cycle
        self.sender = sender
        self.configs = fleet.keyed(**base)
        self._last_period: int | None = None
        self.shuffle = True  # replicas starting together contend less for the same leases

    def label(self, key: str) -> str:
        return label(self.configs[key])

    def run(
        self,
        *,
        max_rounds: int | None = None,
        on_round: Callable[[RoundReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Rounds until ``max_rounds`` or ``stop``; each starts at its period's beginning."""
        stop = stop or threading.Event()
        n = 0
        with (
            ThreadPoolExecutor(max_workers=self.opts.workers, thread_name_prefix="fleet") as pool,
            Renewer(self.leases, self.opts.lease) as renewer,
        ):
            # The first cycle pays for imports, the graph's compilation and the checkpoint store's
            # set-up: not out of a round's deadline.
            from graph.runner import compiled_graph

            with compiled_graph():
                pass
            # Joining late in a round (less than half its deadline left): start with the next one.
            now = self.leases.now()
            into = now % self.opts.interval
            if self.opts.round_deadline_s - into < self.opts.round_deadline_s / 2:
                self._wait_until(now - into + self.opts.interval, stop)
            while not stop.is_set() and (max_rounds is None or n < max_rounds):
                report = self.round(pool, renewer, stop)
                n += 1
                if on_round is not None:
                    on_round(report)
                if max_rounds is not None and n >= max_rounds:
                    break
                self._wait_until((report.period + 1) * self.opts.interval, stop)
        return n

    def _wait_until(self, at: float, stop: threading.Event) -> None:
        """Until ``at`` on the database's clock (this host's may run a little apart from it)."""
        while not stop.is_set() and (left := at - self.leases.now()) > 0:
            stop.wait(left + 0.005)

    def round(self, pool: ThreadPoolExecutor, renewer: Renewer, stop: threading.Event) -> RoundReport:
        """This replica's share of the current period's round, until every service is settled or
        the round's deadline passes (then every service nobody reached is recorded as skipped)."""
        t0 = time.monotonic()
        now = self.leases.now()
        period = int(now // self.opts.interval)
        missed = period - self._last_period - 1 if self._last_period is not None else 0
        self._last_period = period
        deadline = time.monotonic() + (period * self.opts.interval + self.opts.round_deadline_s - now)
        running: dict[str, Future[ServiceRun]] = {}
        mine: dict[str, ServiceRun] = {}
        keys = list(self.configs)
        if self.shuffle:
            random.shuffle(keys)
        while True:
            for key, fut in list(running.items()):
                if fut.done():
                    del running[key]
                    res = fut.result()
                    if res.status in ("done", "failed", "lost", "skipped"):
                        mine[key] = res
            runs = self.leases.period_runs(period)
            open_keys = [k for k in keys if k not in mine and not _settled(runs.get(k))]
            if not open_keys or stop.is_set():
                break
            if time.monotonic() >= deadline - CYCLE_DEADLINE_MIN_S:
                if running:  # started in time: let them end (their deadline is the round's)
                    time.sleep(0.05)
                    continue
                break
            held = self.leases.live_leases()
            for key in open_keys:
                if len(running) >= self.opts.workers:
                    break
                if key in running or key in held:
                    continue
                running[key] = pool.submit(self._run_one, key, period, deadline, renewer)
            time.sleep(min(POLL_S, self.opts.lease / 10))
        for key, fut in running.items():  # stopped: wait for what was started
            res = fut.result()
            if res.status in ("done", "failed", "lost", "skipped"):
                mine[key] = res
        return self._report(period, mine, t0, missed, ended=not stop.is_set())

    def _report(
        self, period: int, mine: dict[str, ServiceRun], t0: float, missed: int, *, ended: bool
    ) -> RoundReport:
        """The round as the ledger has it; ``ended`` (not stopped): what nobody ran is recorded skipped."""
        runs = self.leases.period_runs(period)
        held = self.leases.live_leases()
        if ended:
            for key in self.configs:
                if key not in runs:
                    reason = "nobody reached it before the round's deadline"
                    if key in held:
                        reason = f"leased by {held[key]} at the round's deadline"
                    self.leases.skip(key, period, self.holder, reason)
            runs = self.leases.period_runs(period)
        out: list[ServiceRun] = []
        for key in self.configs:
            if key in mine and mine[key].status != "skipped":
                out.append(mine[key])
                continue
            rec = runs.get(key)
            svc = self.label(key)
            if rec is None:  # stopped before the round ended: nothing to say about it yet
                continue
            status: Any = {
                "done": "elsewhere",
                "failed": "elsewhere",
                "skipped": "skipped",
                "interrupted": "interrupted",
                "running": "running_elsewhere" if key in held else "interrupted",
            }[rec.status]
            if rec.holder == self.holder and rec.status in ("done", "failed"):
                status = rec.status
            out.append(
                ServiceRun(
                    key=key,
                    service=svc,
                    status=status,
                    holder=rec.holder,
                    attempts=rec.attempts,
                    detail=rec.detail or "",
                )
            )
        return RoundReport(
            period=period,
            holder=self.holder,
            services=out,
            missed_periods=max(0, missed),
            seconds=round(time.monotonic() - t0, 3),
        )

    def _run_one(self, key: str, period: int, deadline: float, renewer: Renewer) -> ServiceRun:
        cfg = self.configs[key]
        svc = self.label(key)
        try:
            with held(self.leases, renewer, key, self.holder, self.opts.lease) as lease:
                if lease is None:  # another holder (or the database is out of reach): next poll
                    return ServiceRun(key=key, service=svc, status="elsewhere")
                rec = self.leases.claim_run(lease, period)
                if rec is None:  # settled between the look at the ledger and the lease
                    return ServiceRun(key=key, service=svc, status="elsewhere")
                if deadline - time.monotonic() < CYCLE_DEADLINE_MIN_S:
                    late = "reached too late for the round's deadline"
                    self.leases.finish_run(lease, period, "skipped", late)
                    return ServiceRun(key=key, service=svc, status="skipped", holder=self.holder)
                return self._cycle(key, svc, cfg, lease, period, rec, deadline)
        except LeaseLost as e:
            return ServiceRun(key=key, service=svc, status="lost", holder=self.holder, detail=str(e))

    def _event(self, svc: str, e: IncidentEvent) -> None:
        if self.on_event is not None:
            self.on_event(_relabel(svc, e))

    def _cycle(
        self,
        key: str,
        svc: str,
        cfg: Configuration,
        lease: Lease,
        period: int,
        rec: RunRecord,
        deadline: float,
    ) -> ServiceRun:
        store = LeasedTrackerStore(self.leases, key, lease, period)
        watcher = Watcher(
            cfg,
            store=store,
            webhook=self.webhook,
            quiet_cycles=self.quiet_cycles,
            on_event=None if self.on_event is None else lambda e: self._event(svc, e),
            sender=self.sender,
            deadline_at=deadline,  # its read-only run and its planning run both end by the round's
        )
        summary: CycleSummary | None = None
        status: Literal["done", "failed"] = "done"
        try:
            summary = watcher.cycle()  # saving its state settles the period (LeasedTrackerStore)
            detail = f"{summary.status} {summary.thread_id}"
        except LeaseLost:
            raise
        except Exception as e:  # noqa: BLE001 - one service's failure is its own, the round goes on
            detail = short_error(e)
            log.warning("fleet: %s: cycle failed (%s)", svc, detail)
            if not store.saved:
                status = "failed"
                self.leases.finish_run(lease, period, status, detail)
        if summary is not None and self.on_cycle is not None:
            self.on_cycle(svc, summary)
        return ServiceRun(
            key=key,
            service=svc,
            status=status,
            holder=self.holder,
            attempts=rec.attempts,
            detail=detail,
            summary=summary,
        )


def _relabel(svc: str, e: IncidentEvent) -> IncidentEvent:
    """The event as shown: the service named with its project and region (names repeat in a fleet)."""
    return e.model_copy(update={"incident": e.incident.model_copy(update={"service": svc})})


def _settled(rec: RunRecord | None) -> bool:
    return rec is not None and rec.status != "running"


def watch_fleet(
    path: str | Path,
    *,
    max_rounds: int | None = None,
    webhook: str | None = None,
    quiet_cycles: int = 2,
    holder: str | None = None,
    print_line: Callable[[str], None] = print,
    on_event: Callable[[IncidentEvent], None] | None = None,
) -> int:
    """The ``watch --fleet`` command's body: load the file, open the lease store, run rounds."""
    fleet = load_fleet(path)
    s = get_settings()
    with open_leases(s.checkpoint_url, s.state_dir) as leases:

        def on_cycle(svc: str, summary: CycleSummary) -> None:
            print_line(f"{svc}: {status_line(summary)}")

        fw = FleetWatcher(
            fleet,
            leases,
            holder=holder,
            webhook=webhook,
            quiet_cycles=quiet_cycles,
            on_event=on_event,
            on_cycle=on_cycle,
        )
        print_line(
            f"replica {fw.holder}: watching {len(fw.configs)} service(s) every {fleet.fleet.interval:g}s "
            f"with {fleet.fleet.workers} worker(s), lease {fleet.fleet.lease:g}s, "
            f"store {'postgres' if leases.postgres else 'sqlite'}; Ctrl-C stops"
        )
        return fw.run(max_rounds=max_rounds, on_round=lambda r: print_line(r.line()))
