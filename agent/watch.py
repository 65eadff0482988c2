"""Watch mode: the loop, once per interval, reporting incidents once rather than every cycle.

Each cycle is ``graph.runner.run_cycle`` on a new thread, seeded with the end of the previous cycle's
observation window (``since``), so it observes only what is new. Its read-only look writes no
report: an incident's report is its own thread's (the planning run, under the service's policy; under
the read-only policy, the look itself, reported from its own state), so one incident has one report
however many cycles see it. The findings go through
``agent.incidents_tracker``: an ongoing incident is reported once, then as escalated or resolved.

One plan at a time per service: while a thread waits for a person's decision (``gemma-sre approve
THREAD``, the REPL, or the MCP ``approve_remediation`` tool), later cycles still observe and
diagnose, under the read-only policy, so they neither block on the decision nor propose the same
fix again. When the waiting thread has been decided and run to its end, the next cycle records its
outcome on the incident it was for.

What survives a restart: every graph thread is in the checkpointer, and the tracker (incidents,
``since``, the waiting thread) is a JSON file under ``<state_dir>/watch/``, saved after each cycle,
named by project, region and service and the world they live in (``store_key``: a sandbox started
anew starts with a state of its own, never a dead sandbox's cycle count and waiting thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from agent.incidents_tracker import (
    IncidentEvent,
    IncidentTracker,
    TrackedFinding,
    TrackerState,
    TrackerStore,
)
from graph.runner import CycleResult, run_cycle
from mcp_tools.settings import Policy

log = logging.getLogger(__name__)


class CycleSummary(BaseModel):
    cycle: int
    thread_id: str
    status: str  # the graph outcome ("diagnosed" when only observed), or "awaiting_approval"
    summary: str = ""
    category: str | None = None
    healthy: bool | None = None
    findings: int = 0
    events: list[IncidentEvent] = Field(default_factory=list)
    pending_thread: str | None = None  # a thread waiting for a decision after this cycle
    finished_thread: str | None = None  # a waiting thread that was decided since the last cycle
    finished_status: str | None = None
    notified: int = 0  # webhook messages delivered
    seconds: float = 0.0


def parse_interval(text: str | float, what: str = "--interval") -> float:
    """'60s', '5m', '1h' or a number of seconds -> seconds (from one second to a week)."""
    from mcp_tools.errors import UserError
    from mcp_tools.numbers import check_number

    t = str(text).strip().lower()
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, unit = (t[:-1], units[t[-1]]) if t and t[-1] in units else (t, 1.0)
    try:
        value = float(check_number(number, what)) * unit
    except UserError:
        raise UserError(f"{what}: {text!r} is not a duration like 30s, 5m or 1h") from None
    if value < 1:
        raise UserError(f"{what}: {text!r} is shorter than one second")
    if value > 7 * 86_400:
        raise UserError(f"{what}: {text!r} is longer than a week")
    return value


def thread_now(thread_id: str, state_dir: Any = None) -> CycleResult | None:
    """Where a thread stands now (``graph.runner.thread_result``); None: no such thread in the
    checkpoint store (not checkpointed yet, or a state dir of another world). Watch mode and
    ``gemma-sre serve`` both ask this way."""
    from graph.runner import thread_result
    from mcp_tools.errors import UserError

    try:
        return thread_result(thread_id, state_dir=state_dir)
    except UserError:
        return None


def open_thread(state: TrackerState, state_dir: Any = None) -> str | None:
    """``state``'s thread waiting for a decision, while it is still open (None: none, or it ended)."""
    if state.pending_thread:
        res = thread_now(state.pending_thread, state_dir)
        if res is not None and not res.finished:
            return state.pending_thread
    return None


def store_key(cfg: Any, instance: str | None = None) -> str:
    """The watch state's name: project, region and service (what is watched), plus a digest of the
    API endpoint and ``instance`` (a sandbox started anew is a new world with its own state)."""
    import hashlib
    import re

    parts = [cfg.project or "default-project", cfg.location or "default-region", cfg.service]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", "_".join(str(p) for p in parts))
    world = f"{cfg.run_api_endpoint or ''}|{instance or ''}"
    if world != "|":
        name += "-" + hashlib.sha256(world.encode()).hexdigest()[:10]
    return name


def status_line(s: CycleSummary) -> str:
    """One cycle in one line, consistent with the thread's real state: what the cycle found, then
    what happens next (nothing, a decision awaited, an outcome)."""
    health = {True: " (/health answers)", False: " (/health failing)", None: " (health unknown)"}
    said = health[s.healthy]
    if s.category == "healthy":
        found = "healthy"
    elif s.category in (None, "unknown"):
        found = "no diagnosis" + said
    else:
        found = f"{s.category}, {s.findings} finding(s)" + said
    nxt = {
        "healthy": "nothing to do",
        "awaiting_approval": f"a plan waits for a decision on thread {s.pending_thread or s.thread_id}",
        "diagnosed": "observed",
        "suggested": "a plan was suggested (policy suggest: never applied)",
        "no_action": "no plan can be applied: a person must act",
        "rejected": "the plan was rejected",
        "fixed": "fixed and verified",
        "rolled_back": "the fix did not verify; rolled back",
        "failed": "the fix did not verify and could not be rolled back",
        "undetermined": "the fix could not be verified (service unread); not rolled back: a person checks",
    }.get(s.status, s.status)
    if s.status == "diagnosed" and s.pending_thread:
        nxt = f"a plan already waits for a decision on thread {s.pending_thread}"
    return f"cycle {s.cycle}: {found}; {nxt} ({s.seconds:.1f}s, thread {s.thread_id})"


def tracked_findings(values: dict[str, Any], service: str) -> list[TrackedFinding]:
    """The cycle's findings for the tracker (the analyzers', else the diagnosis itself), each counted
    over the cycle's log lines."""
    from mcp_tools.incident import LogLine

    logs = (values.get("observation") or {}).get("logs") or []
    messages = [LogLine.model_validate(ln).message for ln in logs]
    found = [
        TrackedFinding.from_finding(f, service, messages)
        for f in (values.get("diagnosis") or {}).get("findings") or []
    ]
    if not found:
        diag = values.get("diagnosis") or {}
        if diag.get("category") not in (None, "healthy", "unknown"):
            found = [TrackedFinding.from_finding(diag, service, messages)]
    return found


class Watcher:
    """The watch loop for one service: ``cycle()`` once, or ``run()`` until stopped."""

    def __init__(
        self,
        cfg: Any,
        *,
        store: TrackerStore | None = None,
        webhook: str | None = None,
        quiet_cycles: int = 2,
        on_event: Callable[[IncidentEvent], None] | None = None,
        sender: Callable[..., Any] | None = None,
        instance: str | None = None,
        deadline_at: float | None = None,
    ) -> None:
        """``deadline_at`` (``time.monotonic()``): both runs of a cycle end by then (a fleet's round);
        default: each run gets the configured cycle deadline."""
        if not cfg.service:
            from mcp_tools.errors import UserError

            raise UserError("watch needs a service: pass --service NAME or set GEMMA_SRE_SERVICE")
        self.cfg = cfg
        self.store = store or TrackerStore(cfg.state_path / "watch" / f"{store_key(cfg, instance)}.json")
        self.tracker = IncidentTracker(self.store.load(), quiet_cycles=quiet_cycles)
        self.webhook = webhook
        self.on_event = on_event
        if sender is None:
            from agent.notify import send_webhook

            sender = send_webhook
        self.sender = sender
        self.deadline_at = deadline_at

    def _run_cfg(self, **update: Any) -> Any:
        """The configuration of one run: ``update``, and the cycle deadline cut to ``deadline_at``."""
        if self.deadline_at is not None:
            from graph.config import CYCLE_DEADLINE_MIN_S

            left = max(CYCLE_DEADLINE_MIN_S, self.deadline_at - time.monotonic())
            update["cycle_deadline_s"] = min(self.cfg.cycle_deadline_s, left)
        return self.cfg.model_copy(update=update) if update else self.cfg

    @property
    def state(self) -> Any:
        return self.tracker.state

    def waiting_thread(self) -> str | None:
        """The thread of this service waiting for a decision (or being carried out now), if any."""
        return open_thread(self.tracker.state, self.cfg.state_path)

    def cycle(self, *, thread_id: str | None = None) -> CycleSummary:
        """Observe and diagnose (read-only, no report: the incident's thread reports it); on a new or
        escalated incident, and with no plan already waiting, run the loop again under the configured
        policy to plan (and, by policy, apply) on a thread of the incident's. Under the read-only
        policy there is nothing to plan: the look is the incident's thread, its report written from
        the look's state.

        ``thread_id`` (an alert's investigation, ``agent.serve``): no read-only look first; the loop runs
        at once under the configured policy on that thread, and it becomes the thread of the service's
        open incidents."""
        started = time.monotonic()
        st = self.tracker.state
        finished: tuple[str, str | None] | None = None
        if st.pending_thread:
            pending = thread_now(st.pending_thread, self.cfg.state_path)
            # Still open: waiting for a decision, or an approval being applied and verified right now.
            if pending is None or pending.finished:
                status = pending.status if pending is not None else None
                finished = (st.pending_thread, status)
                if status is not None:
                    self.tracker.set_outcome(st.pending_thread, status)
                st.pending_thread = None
        since = st.since
        # Under the read-only policy the look is the whole cycle: a second run would only repeat it.
        read_only = thread_id is None and self.cfg.policy is Policy.READ_ONLY
        if thread_id is None:
            res = run_cycle(self._run_cfg(policy=Policy.READ_ONLY, write_report=False), since=since)
        else:
            res = run_cycle(self._run_cfg(), since=since, thread_id=thread_id)
        values = res.values
        obs = values.get("observation_summary") or {}
        health = obs.get("health")
        # The analyzers judge the current state only (a superseded revision's lines and conditions
        # are history), so every finding here is about now.
        found = tracked_findings(values, self.cfg.service)
        specific = [f for f in found if f.specific]
        generic = [f for f in found if not f.specific]
        open_now = [i.fingerprint for i in st.open_incidents(self.cfg.service)]
        touch: list[str] = []
        if generic:
            if open_now:
                touch = open_now  # a generic symptom (a probe gave up) of what is open
            else:
                specific += generic  # nothing open: the symptom is all there is to go on
        events = self.tracker.update(
            specific,
            service=self.cfg.service,
            healthy=bool(health) if health is not None else None,
            touch=touch,
        )
        planned = [e.incident.fingerprint for e in events if e.kind in ("new", "escalated")]
        full = None
        if thread_id is not None:
            full = res
            planned = [i.fingerprint for i in st.open_incidents(self.cfg.service)]
        elif planned and st.pending_thread is None:
            full = self._report_look(res) if read_only else run_cycle(self._run_cfg(), since=since)
        if full is not None:
            res = full
            if full.status == "awaiting_approval":
                st.pending_thread = full.thread_id
                self.tracker.attach_thread(planned, full.thread_id)
            else:
                self.tracker.attach_thread(planned, full.thread_id, outcome=full.status)
        for e in events:  # events carry the thread attached above and the outcome known so far
            current = st.incidents.get(e.incident.fingerprint)
            if current is not None:
                e.incident.thread_id = current.thread_id
                e.incident.outcome = current.outcome
        st.since = values.get("since") or st.since
        self.store.save(st)
        notified = self._notify(events)
        return CycleSummary(
            cycle=st.cycle,
            thread_id=res.thread_id,
            status=res.status,
            summary=res.summary,
            category=(values.get("diagnosis") or {}).get("category"),
            healthy=health,
            findings=len(found),
            events=events,
            pending_thread=st.pending_thread,
            finished_thread=finished[0] if finished else None,
            finished_status=finished[1] if finished else None,
            notified=notified,
            seconds=round(time.monotonic() - started, 3),
        )

    def _report_look(self, res: CycleResult) -> CycleResult:
        """The read-only look ``res`` as its incident's thread: its report written from its own state
        (the look ran with ``write_report=False``, not knowing yet that the incident is new)."""
        from graph.nodes.report import write_report
        from graph.runner import record_report
        from graph.state import Outcome

        cfg = self._run_cfg()
        outcome = Outcome.model_validate(res.values.get("outcome") or {})
        res.report = write_report(res.values, outcome, cfg, res.thread_id)  # type: ignore[arg-type]
        record_report(res.thread_id, res.report, state_dir=cfg.state_dir)  # the thread's own record
        return res

    def _notify(self, events: list[IncidentEvent]) -> int:
        delivered = 0
        for e in events:
            if self.on_event is not None:
                self.on_event(e)
            if self.webhook:
                from agent.notify import slack_payload

                hint = None
                if (
                    e.kind == "new"
                    and e.incident.thread_id
                    and e.incident.thread_id == self.state.pending_thread
                ):
                    hint = f"approve: gemma-sre approve {e.incident.thread_id}"
                res = self.sender(self.webhook, slack_payload(e, approve_hint=hint))
                delivered += 1 if getattr(res, "ok", False) else 0
        return delivered

    def run(
        self,
        *,
        interval_s: float,
        max_cycles: int | None = None,
        on_cycle: Callable[[CycleSummary], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> int:
        """Cycle every ``interval_s`` (measured start to start) until ``max_cycles`` or Ctrl-C.

        A cycle that fails (an unexpected error) is logged and the loop goes on. KeyboardInterrupt
        propagates to the caller after the last finished cycle's state is on disk.
        """
        n = 0
        while max_cycles is None or n < max_cycles:
            t0 = time.monotonic()
            try:
                summary = self.cycle()
            except KeyboardInterrupt:
                raise
            except Exception as e:
                from mcp_tools.errors import UserError

                if isinstance(e, UserError):
                    raise
                log.warning(
                    "watch cycle failed (%s: %s); next cycle in %.0fs", type(e).__name__, e, interval_s
                )
                summary = None
            n += 1
            if summary is not None and on_cycle is not None:
                on_cycle(summary)
            if max_cycles is not None and n >= max_cycles:
                break
            sleep(max(0.0, interval_s - (time.monotonic() - t0)))
        return n
