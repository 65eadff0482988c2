"""observe: the service spec and revision conditions, the logs since the last cycle, Cloud Monitoring's
time series over the last ``series_window_s``, /health, /metrics.

Every read can fail. Each is tried a bounded number of times with backoff (Google reads by their
client, the endpoint's through ``World.retrying``), all inside the cycle's deadline
(``Configuration.cycle_deadline_s``: each attempt's timeout is what is left of it). What still cannot
be read is recorded, with why, in the observation (``Observation.unread``, typed) and in its summary
(``unread``, one line each), and the loop goes on with what it has: a degraded observation, never a
crash and never a wait past the deadline. The diagnose step lowers what it concludes accordingly.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import ObservationSummary, SREState, event
from graph.world import World
from mcp_tools.errors import UserError, short_error
from mcp_tools.google_api import DeadlineExceeded
from mcp_tools.incident import LogLine

if TYPE_CHECKING:
    from graph.observation import Observation, Source, Unread, UnreadReason

log = logging.getLogger(__name__)


def _parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _unread(source: Source, e: BaseException, started: float) -> Unread:
    """The record of a failed read: what, why, and whether it failed, timed out or ran out of time."""
    from graph.observation import Unread

    why = short_error(e)
    reason: UnreadReason
    if isinstance(e, DeadlineExceeded):
        reason = "deadline"
        why = str(e)
    elif "timeout" in why.lower() or "did not answer within" in why:
        reason = "timeout"
    else:
        reason = "error"
    return Unread(source=source, reason=reason, why=why, seconds=round(time.monotonic() - started, 2))


def observe_service(
    cfg: Configuration, *, since: datetime, until: datetime
) -> tuple[Observation, ObservationSummary]:
    """The one way to observe a live service: spec and revisions, logs in [since, until], /health and
    /metrics, each read with bounded retries inside the cycle's deadline; what could not be read is
    in the observation's ``unread`` (and the summary's). Used by this node and by the MCP agent tools."""
    from graph.observation import Observation, Unread

    world = World(cfg, deadline=cfg.deadline())
    name = cfg.service
    unread: list[Unread] = []

    info: Any = None
    t = time.monotonic()
    try:
        info = world.get_service(name)
    except UserError:
        raise  # an unknown service or a bad name is the caller's mistake, not a degraded read
    except Exception as e:
        unread.append(_unread("service", e, t))

    logs: list[LogLine] = []
    t = time.monotonic()
    try:
        logs = world.list_entries(name, since=since, until=until, limit=cfg.log_limit)
    except Exception as e:
        unread.append(_unread("logs", e, t))

    series = None
    if cfg.monitoring_wanted:
        t = time.monotonic()
        try:
            series = world.read_series(
                name, window_s=cfg.series_window_s, period_s=cfg.series_period_s, end=until
            )
        except Exception as e:  # unreadable (down, denied, no project): a blind spot, never a guess
            unread.append(_unread("monitoring", e, t))

    base_url = (info.uri if info is not None else None) or cfg.vllm_base_url
    health: bool | None = None
    metrics: str | None = None
    probe = None
    if base_url:
        ep = world.endpoint(base_url)
        t = time.monotonic()
        try:
            health = bool(world.retrying(ep.health, "vLLM /health"))
        except Exception as e:
            miss = _unread("health", e, t)
            # Unreachable is itself a sign the server is down; out of time is not a sign of anything.
            health = None if miss.reason == "deadline" else False
            unread.append(miss)
        if health:
            t = time.monotonic()
            try:
                metrics = world.retrying(ep.metrics_text, "vLLM /metrics")
            except Exception as e:
                unread.append(_unread("metrics", e, t))
            probe = _probe(world, ep, cfg, metrics)
    else:
        why = "the service has no URL" if info is not None else "the service's URL is unknown (spec unread)"
        unread += [Unread(source="health", reason="no_url", why=why)]

    obs = Observation.from_cloud_run(
        name,
        info,
        logs,
        metrics=metrics,
        health=health,
        unread=unread,
        window=(_iso(since), _iso(until)),
        series=series,
        probe=probe,
        slo=cfg.slo,
    )
    summary = ObservationSummary(
        service=name,
        uri=base_url,
        latest_ready_revision=info.latest_ready_revision if info is not None else None,
        latest_created_revision=info.latest_created_revision if info is not None else None,
        conditions=obs.conditions,
        log_lines=len(logs),
        logs_truncated=len(logs) >= cfg.log_limit,
        since=_iso(since),
        until=_iso(until),
        health=health,
        metrics_read=metrics is not None,
        series_read=series is not None,
        series_points=series.points_read if series is not None else 0,
        unread=[u.line for u in unread],
        blind=[u.model_dump(mode="json") for u in unread],
        spec_etag=info.etag if info is not None else None,
    )
    for u in unread:
        log.warning("observe %s: %s", name, u.line)
    return obs, summary


def _probe(world: World, ep: Any, cfg: Configuration, metrics: str | None) -> Any:
    """A 1-token completion while /health answers, bounded by ``cfg.probe_timeout_s`` and what is
    left of the cycle (None: probes are off). Not sent behind a standing queue: there a slow answer
    is the queue's, and saying so is the overload analyzer's job."""
    from graph.progress import Probe, probe

    if cfg.probe_timeout_s <= 0:
        return None
    waiting = _waiting(metrics)
    if waiting is not None and waiting >= 5:
        return Probe(ok=False, skipped=f"{waiting:g} requests already waiting")
    try:
        left = world.policy.attempt_timeout("vLLM probe")
    except DeadlineExceeded:
        left = 0.0
    if left < 1.0:
        return Probe(ok=False, skipped="no time left in the cycle")
    return probe(ep, min(cfg.probe_timeout_s, left))


def _waiting(metrics: str | None) -> float | None:
    """vLLM's ``num_requests_waiting`` (summed over engines), read by the project's one /metrics parser
    (None: not read, absent, or not Prometheus text)."""
    if not metrics:
        return None
    from mcp_tools.metrics import parse_vllm_metrics

    try:
        return parse_vllm_metrics(metrics).num_requests_waiting
    except UserError:
        return None


def observe(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    until = datetime.now(UTC)
    since = _parse_ts(state.get("since")) or until - timedelta(seconds=cfg.log_window_s)
    obs, summary = observe_service(cfg, since=since, until=until)
    health = summary.health
    msg = (
        f"{summary.log_lines} log lines since {summary.since}; /health "
        f"{'ok' if health else 'failing' if health is False else 'not read'}; "
        f"latest ready revision {summary.latest_ready_revision or 'none'}"
    )
    if summary.series_read:
        msg += f"; {summary.series_points} Cloud Monitoring points"
    if summary.unread:
        msg += f"; could not read: {'; '.join(summary.unread)}"
    return {
        "cycle": int(state.get("cycle") or 0) + 1,
        "since": _iso(until),
        "observation": obs.model_dump(mode="json", by_alias=True),
        "observation_summary": summary.model_dump(mode="json"),
        "timeline": event("observe", msg),
    }
