"""The read-only readouts both the REPL and the one-shot commands show: one mechanism, two faces.

Each readout is a function that returns a pydantic model (what ``--json`` prints) and a renderer
that turns it into rich renderables (what a terminal shows). ``/status`` and ``gemma-sre status``,
``/logs`` and ``gemma-sre logs``, ``/metrics`` and ``gemma-sre metrics`` call the same function;
``threads`` and ``incidents`` list what the checkpoint store and the reports directory hold, with
the ids the other commands take.

Nothing here prints. Every renderable is built from ``Text`` (never markup), so a log line or a
condition message with ``[brackets]`` is shown as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from mcp_tools.errors import UserError

log = logging.getLogger(__name__)

#: How many log records ``logs`` shows unless told (``--limit``), and the most it will fetch.
LOGS_DEFAULT_LIMIT = 50
LOGS_MAX_LIMIT = 1000


def note(msg: str, style: str = "dim") -> Text:
    return Text(msg, style=style)


def ago(when: str | None, *, now: datetime | None = None) -> str:
    """``when`` (RFC 3339) as an age in words: ``3 min ago``, ``2 h ago``, ``5 d ago``."""
    if not when:
        return "-"
    try:
        t = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    except ValueError:
        return str(when)
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    s = max(0.0, ((now or datetime.now(UTC)) - t).total_seconds())
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 90 * 60:
        return f"{s / 60:.0f} min ago"
    if s < 36 * 3600:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} d ago"


# -- status -----------------------------------------------------------------------------------------


class ServiceStatus(BaseModel):
    service: str
    url: str | None = None
    ready: bool = False
    latest_ready_revision: str | None = None
    latest_created_revision: str | None = None
    serving_revision: str | None = None
    gpu: str = "-"
    vllm_args: list[str] = Field(default_factory=list)  # redacted
    health: str = "not read"  # up | down | not read | unreachable (...)
    problems: list[str] = Field(default_factory=list)  # conditions that did not succeed, redacted
    source: str = "Cloud Run Admin API, vLLM /health"


def service_status(world: Any, name: str) -> ServiceStatus:
    """The service as Cloud Run describes it, and whether its endpoint answers ``/health``."""
    from mcp_tools.redact import redact, redact_args

    info = world.get_service(name)
    spec = info.spec
    health = "not read (no URL)"
    if info.uri:
        try:
            health = "up" if world.endpoint(str(info.uri)).health() else "down"
        except Exception as e:
            health = f"unreachable ({e.__class__.__name__})"
    conds = list(info.conditions)
    for r in info.revisions[:3]:
        conds += [c.model_copy(update={"type": f"{r.name}: {c.type}"}) for c in r.conditions]
    bad = [c for c in conds if c.state not in ("CONDITION_SUCCEEDED", "")]
    # One line per distinct message (Cloud Run repeats one failure on the service's and each
    # revision's conditions), its first paragraph: the rest is a console link and boilerplate.
    grouped: dict[str, list[str]] = {}
    for c in bad:
        text = (c.message or c.reason or "").strip().split("\n\n")[0].strip()
        grouped.setdefault(text, []).append(f"{c.type} {c.state.removeprefix('CONDITION_').lower()}")
    return ServiceStatus(
        service=name,
        url=str(info.uri) if info.uri else None,
        ready=bool(info.ready),
        latest_ready_revision=info.latest_ready_revision,
        latest_created_revision=info.latest_created_revision,
        serving_revision=info.serving_revision,
        gpu=f"{spec.gpu_count} x {spec.gpu_type}" if spec.gpu_type else "none",
        vllm_args=list(redact_args(spec.args)),  # e.g. --api-key VALUE
        health=health,
        problems=[
            redact(f"{', '.join(types)}: {text}".rstrip(": ")) for text, types in list(grouped.items())[:8]
        ],
    )


def render_status(st: ServiceStatus) -> list[RenderableType]:
    t = Table(title=f"Cloud Run service {st.service}", show_header=False)
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("URL", Text(st.url or "-"))
    t.add_row("ready", "yes" if st.ready else "no")
    t.add_row("latest ready", Text(st.latest_ready_revision or "-"))
    t.add_row("latest created", Text(st.latest_created_revision or "-"))
    t.add_row("serving", Text(st.serving_revision or "-"))
    t.add_row("GPU", Text(st.gpu))
    t.add_row("vLLM args", Text(" ".join(st.vllm_args) or "-"))
    t.add_row("/health", Text(st.health))
    out: list[RenderableType] = [t]
    out += [note(p, "yellow") for p in st.problems]
    out.append(note(f"source: {st.source}"))
    return out


# -- logs -------------------------------------------------------------------------------------------


class LogRecord(BaseModel):
    timestamp: str | None = None
    severity: str = "DEFAULT"
    text: str  # the whole record (a structured payload as compact JSON), redacted
    revision: str | None = None


class LogsReadout(BaseModel):
    service: str
    since: str
    filter: str | None = None
    limit: int
    more: bool = False  # the window holds more records than ``limit``
    records: list[LogRecord] = Field(default_factory=list)
    source: str = "Cloud Logging"


def service_logs(
    world: Any,
    name: str,
    *,
    text_filter: str | None = None,
    since: str = "24h",
    limit: int = LOGS_DEFAULT_LIMIT,
) -> LogsReadout:
    """The newest ``limit`` records of ``name`` since ``since`` (containing ``text_filter``), redacted."""
    from graph.observation import redacted
    from mcp_tools.cloudlogging import CloudLogging

    if not 1 <= limit <= LOGS_MAX_LIMIT:
        raise UserError(f"--limit {limit}: must be from 1 to {LOGS_MAX_LIMIT}")
    api = CloudLogging(world.settings)
    lines = redacted(list(api.list_entries(name, since=since, text_filter=text_filter, limit=limit + 1)))
    more = len(lines) > limit
    records = [
        LogRecord(
            timestamp=ln.timestamp,
            severity=(ln.severity or "DEFAULT").upper(),
            text=ln.record_text.rstrip(),
            revision=ln.revision,
        )
        for ln in lines[-limit:]
    ]
    return LogsReadout(service=name, since=since, filter=text_filter, limit=limit, more=more, records=records)


_SEVERITY_STYLE = {"ERROR": "red", "CRITICAL": "red", "ALERT": "red", "EMERGENCY": "red", "WARNING": "yellow"}


def render_logs(view: LogsReadout) -> list[RenderableType]:
    if not view.records:
        from mcp_tools.redact import redact

        what = f" containing {redact(view.filter)!r}" if view.filter else ""
        return [note(f"no log records{what} since {view.since}")]
    out = Text()
    for r in view.records:
        out.append(f"{(r.timestamp or '')[:19]} {r.severity:<8} ", style="dim")
        out.append(r.text + "\n", style=_SEVERITY_STYLE.get(r.severity, ""))
    more = f"; the newest {view.limit}, there are more (--limit, --since)" if view.more else ""
    return [out, note(f"source: {view.source}, service {view.service}, since {view.since}{more}")]


# -- metrics ----------------------------------------------------------------------------------------


def endpoint_url(world: Any, service: str, vllm_base_url: str | None, *, info: Any = None) -> tuple[str, str]:
    """(base URL, where it came from): the service's URL, else VLLM_BASE_URL. ``info``: the service as
    already read (``world.get_service``), so it is not fetched again."""
    if service:
        info = info if info is not None else world.get_service(service)
        if info.uri:
            return str(info.uri), f"Cloud Run service {service}"
    if vllm_base_url:
        return str(vllm_base_url), "VLLM_BASE_URL"
    raise UserError("no endpoint: the service has no URL and VLLM_BASE_URL is not set")


class ServiceFigures(BaseModel):
    """What the service is configured to carry (Cloud Run Admin API)."""

    serving_revision: str | None = None
    min_instances: int = 0
    max_instances: int | None = None
    concurrency: int | None = None
    gpu: str = "-"


class MetricsReadout(BaseModel):
    """The figures ``metrics`` shows. Other sources (Cloud Monitoring series) extend this model."""

    service: str | None = None
    url: str
    where: str
    vllm: Any = None  # mcp_tools.metrics.VllmMetrics (the /metrics scrape); None: not read
    figures: ServiceFigures | None = None
    sources: list[str] = Field(default_factory=list)
    unread: list[str] = Field(default_factory=list)  # what could not be read, and why


def service_metrics(world: Any, service: str, vllm_base_url: str | None) -> MetricsReadout:
    """vLLM's ``/metrics`` scraped now, and the service's own figures (when there is a service).
    An endpoint that does not answer is recorded in ``unread``; the service's figures still show."""
    from mcp_tools.errors import ExternalError
    from mcp_tools.metrics import parse_vllm_metrics

    info = world.get_service(service) if service else None  # read once: the URL and the figures
    url, where = endpoint_url(world, service, vllm_base_url, info=info)
    m = None
    unread: list[str] = []
    sources: list[str] = []
    try:
        m = parse_vllm_metrics(world.endpoint(url).metrics_text())
        sources.append(f"{url}/metrics ({m.metric_names} vllm: metric families)")
    except (ExternalError, OSError) as e:
        unread.append(f"vLLM /metrics: {e}")
    figures = None
    if info is not None:
        spec = info.spec
        figures = ServiceFigures(
            serving_revision=info.serving_revision,
            min_instances=spec.min_instances,
            max_instances=spec.max_instances,
            concurrency=spec.concurrency,
            gpu=f"{spec.gpu_count} x {spec.gpu_type}" if spec.gpu_type else "none",
        )
        sources.append("Cloud Run Admin API")
    return MetricsReadout(
        service=service or None,
        url=url,
        where=where,
        vllm=m,
        figures=figures,
        sources=sources,
        unread=unread,
    )


def metrics_json(r: MetricsReadout) -> dict[str, Any]:
    doc = r.model_dump(mode="json", exclude={"vllm"})
    doc["vllm"] = r.vllm.model_dump(mode="json") if r.vllm is not None else None
    return doc


def render_metrics(r: MetricsReadout) -> list[RenderableType]:
    t = Text(f"vLLM metrics ({r.where})\n", style="bold")
    for line in (r.vllm.summary() if r.vllm is not None else "not read (below)").splitlines():
        t.append("  " + line + "\n")
    out: list[RenderableType] = [t]
    if r.figures is not None:
        f = r.figures
        most = "no limit" if f.max_instances is None else str(f.max_instances)
        conc = "default" if f.concurrency is None else str(f.concurrency)
        out.append(
            Text(
                f"service: serving {f.serving_revision or '-'}; instances {f.min_instances} to {most}; "
                f"concurrency {conc} per instance; GPU {f.gpu}"
            )
        )
    out += [note(f"not read: {u}", "yellow") for u in r.unread]
    out += [note(f"source: {src}") for src in r.sources]
    return out


# -- threads (pending approvals) ---------------------------------------------------------------------


class PendingThread(BaseModel):
    thread_id: str
    service: str
    project: str | None = None
    category: str | None = None
    headline: str  # the plan in one line
    waiting_since: str | None = None  # RFC 3339
    age: str = "-"


def plan_headline(req: Any) -> str:
    """An approval request's plan in one line: ``set_vllm_args --quantization=fp8; ...``."""
    return "; ".join(s.describe() for s in req.plan.steps) or "(no steps)"


def pending_threads(state_dir: Path | None = None, *, limit: int = 500) -> list[PendingThread]:
    """Threads waiting for a decision (the approve node's interrupt), oldest request first."""
    from graph.checkpoint import recent_thread_ids
    from graph.runner import compiled_graph
    from graph.state import ApprovalRequest

    out: list[PendingThread] = []
    with compiled_graph(state_dir) as g:
        for tid in recent_thread_ids(g.checkpointer, limit):
            snap = g.get_state({"configurable": {"thread_id": tid}})
            if not snap.interrupts:
                continue
            try:
                req = ApprovalRequest.model_validate(snap.interrupts[0].value)
            except ValueError:
                continue
            cfg = ((snap.values or {}).get("meta") or {}).get("config") or {}
            out.append(
                PendingThread(
                    thread_id=tid,
                    service=req.service,
                    project=cfg.get("project"),
                    category=req.category,
                    headline=plan_headline(req),
                    waiting_since=snap.created_at,
                    age=ago(snap.created_at),
                )
            )
    out.sort(key=lambda p: p.waiting_since or "")
    return out


def _thread_table(
    title: str,
    when: str,
    last: str,
    rows: Sequence[tuple[str, str, str | None, str | None]],
    **last_column: Any,
) -> Table:
    """A list of threads as ``threads`` and ``incidents`` show it: thread id, when, category, and one
    more column (``last``, its cells the rows' last items)."""
    t = Table(title=title, title_justify="left")
    t.add_column("thread", no_wrap=True, style="bold")
    t.add_column(when, no_wrap=True)
    t.add_column("category", no_wrap=True)
    t.add_column(last, **last_column)
    for thread_id, at, category, cell in rows:
        t.add_row(Text(thread_id), at, Text(category or "-"), Text(cell or "-"))
    return t


def render_threads(rows: list[PendingThread]) -> list[RenderableType]:
    if not rows:
        return [note("no thread is waiting for a decision")]
    cells = [(p.thread_id, p.age, p.category, p.headline) for p in rows]
    t = _thread_table("Waiting for a decision", "waiting", "plan", cells, overflow="fold")
    return [
        t,
        note("decide: gemma-sre approve THREAD  |  gemma-sre reject THREAD --reason '...'"),
    ]


# -- incidents (past reports) ----------------------------------------------------------------------------


class PastIncident(BaseModel):
    thread_id: str
    service: str | None = None
    cycle: int | None = None
    category: str | None = None
    outcome: str | None = None
    summary: str | None = None
    at: str | None = None  # when the report was written (RFC 3339)
    report: str  # the Markdown report's path
    json_report: str


def past_incidents(state_dir: Path, *, service: str | None = None, limit: int = 50) -> list[PastIncident]:
    """The reports under ``<state_dir>/reports`` (one per incident a cycle found), newest first."""
    directory = Path(state_dir) / "reports"
    if not directory.is_dir():
        return []
    paths = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    out: list[PastIncident] = []
    for p in paths:
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("%s: not a readable report (%s), skipped", p, e.__class__.__name__)
            continue
        if not isinstance(doc, dict) or not doc.get("thread_id"):
            continue
        if service and doc.get("service") != service:
            continue
        outcome = doc.get("outcome") or {}
        diag = doc.get("diagnosis") or {}
        at = datetime.fromtimestamp(p.stat().st_mtime, UTC).isoformat(timespec="seconds")
        out.append(
            PastIncident(
                thread_id=str(doc["thread_id"]),
                service=doc.get("service"),
                cycle=doc.get("cycle") if isinstance(doc.get("cycle"), int) else None,
                category=diag.get("category"),
                outcome=outcome.get("status"),
                summary=outcome.get("summary"),
                at=at,
                report=str(p.with_suffix(".md")),
                json_report=str(p),
            )
        )
        if len(out) >= limit:
            break
    return out


def render_incidents(rows: list[PastIncident]) -> list[RenderableType]:
    if not rows:
        return [note("no incident reports yet")]
    cells = [(r.thread_id, ago(r.at), r.category, r.outcome) for r in rows]
    t = _thread_table("Past incidents (newest first)", "when", "outcome", cells, no_wrap=True)
    out: list[RenderableType] = [t]
    out.append(note("reports:"))
    out += [Text(f"  {r.report}", no_wrap=True, overflow="ignore") for r in rows]
    return out
