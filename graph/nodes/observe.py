"""observe: the service spec and revision conditions, the logs since the last cycle, /health, /metrics.

Every read can fail. Each is tried a bounded number of times with backoff (Google reads by their
client, the endpoint's through ``World.retrying``); what still cannot be read
is named in the observation summary (``unread``) and the loop goes on with what it has: a degraded
observation, never a crash.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import ObservationSummary, SREState, event
from graph.world import World
from mcp_tools.errors import UserError, short_error
from mcp_tools.incident import LogLine

if TYPE_CHECKING:
    from graph.observation import Observation

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


def observe_service(
    cfg: Configuration, *, since: datetime, until: datetime
) -> tuple[Observation, ObservationSummary]:
    """The one way to observe a live service: spec and revisions, logs in [since, until], /health and
    /metrics, each read with bounded retries; what could not be read is in the summary's ``unread``.
    Used by this node and by the MCP agent tools."""
    from graph.observation import Observation

    world = World(cfg)
    name = cfg.service
    unread: list[str] = []

    info: Any = None
    try:
        info = world.get_service(name)
    except UserError:
        raise  # an unknown service or a bad name is the caller's mistake, not a degraded read
    except Exception as e:
        unread.append(f"service spec and revisions: {short_error(e)}")

    logs: list[LogLine] = []
    try:
        logs = world.list_entries(name, since=since, until=until, limit=cfg.log_limit)
    except Exception as e:
        unread.append(f"logs: {short_error(e)}")

    base_url = (info.uri if info is not None else None) or cfg.vllm_base_url
    health: bool | None = None
    metrics: str | None = None
    if base_url:
        ep = world.endpoint(base_url)
        try:
            health = bool(world.retrying(ep.health, "vLLM /health"))
        except Exception as e:
            health = False
            unread.append(f"/health: {short_error(e)}")
        if health:
            try:
                metrics = world.retrying(ep.metrics_text, "vLLM /metrics")
            except Exception as e:
                unread.append(f"/metrics: {short_error(e)}")
    else:
        unread.append("/health and /metrics: the service has no URL")

    obs = Observation.from_cloud_run(name, info, logs, metrics=metrics, health=health)
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
        unread=unread,
        spec_etag=info.etag if info is not None else None,
    )
    for u in unread:
        log.warning("observe %s: %s", name, u)
    return obs, summary


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
    if summary.unread:
        msg += f"; could not read: {'; '.join(summary.unread)}"
    return {
        "cycle": int(state.get("cycle") or 0) + 1,
        "since": _iso(until),
        "observation": obs.model_dump(mode="json", by_alias=True),
        "observation_summary": summary.model_dump(mode="json"),
        "timeline": event("observe", msg),
    }
