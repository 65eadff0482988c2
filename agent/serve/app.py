"""The ``gemma-sre serve`` ASGI app: alert webhooks start or join investigations, Slack buttons decide.

Routes (all behind the bearer token, ``GEMMA_SRE_SERVE_TOKEN``, except the Slack callback, which is
authenticated by Slack's request signature instead):

- ``POST /alerts/cloud-monitoring``: a Cloud Monitoring webhook notification (also accepts HTTP
  Basic with the token as the password: a ``webhook_basicauth`` channel cannot send a bearer header).
- ``POST /alerts/alertmanager``: an Alertmanager ``webhook_config`` receiver (``authorization:
  {type: Bearer, credentials: <token>}``).
- ``POST /slack/interactions``: the Slack app's interactivity request URL.
- ``GET /investigations``: every investigation, its thread, its alerts and where it stands.

An alert for a service is mapped to it by its labels (project, region, service). One investigation
per service and open incident: the first alert starts a thread (``graph.runner.run_cycle``, in a
worker thread: the webhook answers 202 at once), later alerts join it. A ``closed`` alert for a
thread whose outcome is ``fixed`` is recorded as verification evidence, in this ledger and in the
thread's report. An alert naming a service this server does not watch is answered 202 with a note
(``ignored``): the sender would only retry an error, and a retry cannot make the service known.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agent.serve.alerts import AlertEvent, parse_alertmanager, parse_cloud_monitoring
from agent.serve.ledger import AlertRecord, Investigation, Ledger, service_key
from agent.serve.slack_face import SlackFace, parse_interaction
from graph.config import Configuration
from graph.leases import Lease, LeaseStore, Renewer, held
from graph.state import now_iso
from mcp_tools.errors import UserError

if TYPE_CHECKING:
    from agent.fleet import FleetFile
    from graph.runner import CycleResult

log = logging.getLogger(__name__)

SLACK_PATH = "/slack/interactions"
#: A request body larger than this is refused (413): alert groups and Slack payloads are far smaller.
MAX_BODY = 1_000_000


#: An investigation's status while a fleet watcher replica runs a cycle of its service.
WAITING_FOR_LEASE = "waiting for the service's lease"


class Target(BaseModel):
    """What an alert's investigation runs with: its service's configuration, and in a fleet the
    service's lease key (``agent.watch.store_key``), shared with the watcher replicas."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cfg: Configuration
    lease_key: str | None = None


def _base_of(base: Configuration) -> dict[str, Any]:
    """What the server's own configuration gives every fleet service (the state directory)."""
    return {"state_dir": base.state_dir}


class AlertOutcome(BaseModel):
    alert_id: str
    state: str
    service: str | None = None
    thread_id: str | None = None
    action: str  # started, joined, closed, ignored
    note: str = ""
    verification_evidence: bool = False


class Serve:
    """The server's work, apart from HTTP: investigations, cycles in worker threads, Slack decisions."""

    def __init__(
        self,
        base: Configuration,
        *,
        services: list[str] | None = None,
        slack: SlackFace | None = None,
        workers: int = 2,
        fleet: FleetFile | None = None,
        leases: LeaseStore | None = None,
    ) -> None:
        """``fleet`` (with ``leases``, the watcher replicas' lease store): alerts are for the file's
        services, each investigated with its own configuration under the service's lease."""
        self.base = base
        self.services = set(services or [])
        self.slack = slack
        self.ledger = Ledger(base.state_path)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemma-sre-serve")
        self._lock = threading.Lock()  # one alert at a time decides start-or-join
        self._futures = threading.Lock()
        self._running: list[Future[Any]] = []
        self.fleet: dict[str, Target] = {}  # by the ledger's service key
        self.leases = leases
        self._renewer: Renewer | None = None
        if fleet is not None:
            if leases is None:
                raise ValueError("a fleet needs the lease store its watchers share")
            from agent.fleet import default_holder

            self.holder = f"serve-{default_holder()}"
            self.lease_s = fleet.fleet.lease
            # A watcher's cycle ends by its round's deadline: an investigation waits at most that.
            self.lease_wait_s = fleet.fleet.interval + fleet.fleet.lease
            for key, cfg in fleet.keyed(**_base_of(base)).items():
                self.fleet[service_key(cfg.project, cfg.location, cfg.service)] = Target(
                    cfg=cfg, lease_key=key
                )
            self._renewer = Renewer(leases, self.lease_s).__enter__()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._renewer is not None:
            self._renewer.__exit__(None, None, None)
        self.ledger.close()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        fut = self._pool.submit(fn, *args)
        with self._futures:
            self._running = [f for f in self._running if not f.done()] + [fut]

    def idle(self) -> bool:
        with self._futures:
            return all(f.done() for f in self._running)

    # --- alerts -----------------------------------------------------------------------------------

    def _target(self, ev: AlertEvent) -> Target | str:
        """The service the alert is about and how to investigate it, or why this server does not."""
        from mcp_tools.names import validate_service_name

        if not ev.service:
            return "the alert names no Cloud Run service (no service_name label on a cloud_run resource)"
        try:
            validate_service_name(ev.service)
        except UserError as e:
            return str(e)
        if self.fleet:
            found = [
                t
                for t in self.fleet.values()
                if t.cfg.service == ev.service
                and not (ev.project and t.cfg.project and ev.project != t.cfg.project)
                and not (ev.location and t.cfg.location and ev.location != t.cfg.location)
            ]
            where = "/".join(p or "-" for p in (ev.project, ev.location, ev.service))
            if not found:
                return f"service {where} is not in the fleet file"
            if len(found) > 1:
                return f"service {where} matches {len(found)} services of the fleet file (name its region)"
            return found[0]
        if self.base.project and ev.project and ev.project != self.base.project:
            return f"project {ev.project} is not the watched project {self.base.project}"
        if self.base.location and ev.location and ev.location != self.base.location:
            return f"region {ev.location} is not the watched region {self.base.location}"
        if self.services and ev.service not in self.services:
            watched = ", ".join(sorted(self.services))
            return f"service {ev.service} is not one of the watched services ({watched})"
        return Target(cfg=self.base.model_copy(update={"service": ev.service}))

    def alerts(self, events: list[AlertEvent]) -> list[AlertOutcome]:
        with self._lock:
            return [self._one(ev) for ev in events]

    def _one(self, ev: AlertEvent) -> AlertOutcome:
        target = self._target(ev)
        if isinstance(target, str):
            log.warning("alert %s (%s) ignored: %s", ev.alert_id, ev.source, target)
            return AlertOutcome(
                alert_id=ev.alert_id, state=ev.state, service=ev.service, action="ignored", note=target
            )
        project, location, service = target.cfg.project, target.cfg.location, target.cfg.service
        key = service_key(project, location, service)
        from mcp_tools.redact import redact

        rec = AlertRecord(
            thread_id="",
            source=ev.source,
            alert_id=ev.alert_id,
            state=ev.state,
            policy=redact(ev.policy)[:500],
            summary=redact(ev.summary)[:2000],
            received_at=now_iso(),
        )
        if ev.state == "closed":
            return self._closed(ev, key, rec)
        current = self.ledger.open_for(key)
        if current is not None and current.status.startswith("error"):
            # Its cycle could not run (the API was down, say): this alert tries again, on a new thread.
            self.ledger.close_investigation(current.thread_id)
        elif current is not None and not self.ledger.open_alert_ids(current.thread_id):
            from agent.watch import thread_now

            now = thread_now(current.thread_id, self.base.state_path)  # None: not checkpointed yet
            if now is not None and now.finished:  # its alerts all closed, its thread ended: a new incident
                self.ledger.close_investigation(current.thread_id)
        from graph.runner import new_thread_id

        # A fleet watcher's thread already waiting for a decision on this service: the alert joins it.
        watched = self._watchers_thread(target) if self.ledger.open_for(key) is None else None
        inv, started = self.ledger.join_or_start(
            Investigation(
                thread_id=watched or new_thread_id(service),
                service_key=key,
                project=project,
                location=location,
                service=service,
                opened_at=now_iso(),
            )
        )
        self.ledger.add_alert(rec.model_copy(update={"thread_id": inv.thread_id}))
        if started:
            self.submit(self._investigate, inv, target)
        return AlertOutcome(
            alert_id=ev.alert_id,
            state=ev.state,
            service=service,
            thread_id=inv.thread_id,
            action="started" if started and not watched else "joined",
            note="the fleet watcher's thread, waiting for a decision" if watched else "",
        )

    def _watchers_thread(self, target: Target) -> str | None:
        """The thread the fleet watchers opened for the service, while it waits for a decision."""
        if target.lease_key is None or self.leases is None:
            return None
        from agent.fleet import LeasedTrackerStore
        from agent.watch import open_thread

        state = LeasedTrackerStore(self.leases, target.lease_key).load()
        return open_thread(state, target.cfg.state_path)

    def _closed(self, ev: AlertEvent, key: str, rec: AlertRecord) -> AlertOutcome:
        thread = self.ledger.thread_of_alert(key, ev.source, ev.alert_id)
        if thread is None:
            return AlertOutcome(
                alert_id=ev.alert_id,
                state=ev.state,
                service=ev.service,
                action="ignored",
                note="a closed alert that opened no investigation here",
            )
        from agent.watch import thread_now

        res = thread_now(thread, self.base.state_path)
        finished, status = (res.finished, res.status) if res is not None else (False, None)
        applied_at = str(((res.values if res is not None else {}).get("applied") or {}).get("at") or "")
        evidence = status == "fixed"
        note = (
            "closed after the fix: recorded as verification evidence"
            if evidence
            else f"closed while the thread is {status or 'not finished'}: not evidence of a fix"
        )
        if evidence and ev.ended_at and applied_at and _before(ev.ended_at, applied_at):
            evidence = False
            note = f"closed at {ev.ended_at}, before the fix was applied ({applied_at}): not evidence of it"
        self.ledger.add_alert(
            rec.model_copy(update={"thread_id": thread, "evidence": evidence, "note": note})
        )
        if evidence and res is not None:
            _record_evidence(thread, ev, res.report)
        if finished and not self.ledger.open_alert_ids(thread):
            self.ledger.close_investigation(thread)
        return AlertOutcome(
            alert_id=ev.alert_id,
            state=ev.state,
            service=ev.service,
            thread_id=thread,
            action="closed",
            note=note,
            verification_evidence=evidence,
        )

    def _investigate(self, inv: Investigation, target: Target) -> None:
        from graph.runner import run_cycle

        try:
            if target.lease_key is None:
                self.ledger.set_status(inv.thread_id, "running")
                res = run_cycle(target.cfg, thread_id=inv.thread_id)
            else:
                res = self._leased_cycle(inv, target)
        except Exception as e:  # noqa: BLE001 - recorded on the investigation, never lost
            from mcp_tools.errors import short_error

            log.warning("investigation %s: %s", inv.thread_id, short_error(e))
            self.ledger.set_status(inv.thread_id, f"error: {short_error(e)}"[:300])
            return
        self.ledger.set_status(res.thread_id, res.status)
        if res.waiting and res.pending is not None and self.slack is not None:
            if self.ledger.message(res.thread_id) is not None:
                return  # already asked (the thread's first alert)
            try:
                posted = self.slack.post(res.pending)
                if posted is not None:
                    self.ledger.set_message(res.thread_id, *posted)
            except Exception as e:  # noqa: BLE001 - the thread waits either way (CLI, MCP)
                log.warning(
                    "investigation %s: the Slack message was not posted: %s", inv.thread_id, type(e).__name__
                )

    @contextmanager
    def _service_lease(self, target: Target | None, what: str) -> Iterator[Lease | None]:
        """The fleet service's lease for the block (the one its watcher replicas take for a cycle);
        None outside a fleet. UserError: the watchers kept it longer than a round."""
        if target is None or target.lease_key is None or self.leases is None or self._renewer is None:
            yield None
            return
        with held(
            self.leases, self._renewer, target.lease_key, self.holder, self.lease_s, wait_s=self.lease_wait_s
        ) as lease:
            if lease is None:
                who = self.leases.live_leases().get(target.lease_key, "nobody")
                raise UserError(f"{what}: the service's lease stayed with {who} for {self.lease_wait_s:g}s")
            yield lease

    def _leased_cycle(self, inv: Investigation, target: Target) -> CycleResult:
        """The alert's cycle under the service's lease, so it never runs beside a watcher replica's
        cycle of the same service; a thread a watcher opened for it meanwhile is joined instead."""
        from agent.fleet import LeasedTrackerStore
        from agent.watch import Watcher
        from graph.leases import LeaseLost
        from graph.runner import thread_result

        assert self.leases is not None and target.lease_key is not None
        self.ledger.set_status(inv.thread_id, WAITING_FOR_LEASE)
        with self._service_lease(target, "not investigated") as lease:
            watcher = Watcher(target.cfg, store=LeasedTrackerStore(self.leases, target.lease_key, lease))
            waiting = watcher.waiting_thread()
            if waiting is not None:  # the watchers' thread for this incident: one incident, one thread
                if waiting != inv.thread_id:
                    self.ledger.retarget(inv.thread_id, waiting)
                return thread_result(waiting, state_dir=target.cfg.state_path)
            self.ledger.set_status(inv.thread_id, "running")
            try:
                watcher.cycle(thread_id=inv.thread_id)
            except LeaseLost as e:  # the thread ran; the watchers may not know it is the incident's
                log.warning("investigation %s: %s", inv.thread_id, e)
        return thread_result(inv.thread_id, state_dir=target.cfg.state_path)

    # --- Slack ------------------------------------------------------------------------------------

    def decide(self, thread: str, decision: str, option: int | None, user_id: str, user_name: str) -> None:
        """Decide ``thread`` through ``graph.runner.resume_cycle`` (the single-decision path), as the
        Slack user, and say what happened in Slack."""
        from graph.runner import resume_cycle, thread_result

        msg = self.ledger.message(thread)
        inv = self.ledger.get(thread)
        target = self.fleet.get(inv.service_key) if inv is not None else None
        try:
            shown = thread_result(thread, state_dir=self.base.state_path).pending
            with self._service_lease(target, "not decided"):  # applying is the service's cycle too
                res = resume_cycle(
                    thread,
                    decision=decision,
                    approver=f"slack:{user_id}",
                    note=user_name,
                    reason="rejected in Slack" if decision == "reject" else None,
                    option=option,
                )
            self.ledger.set_status(thread, res.status)
            outcome = f"{res.status}: {res.summary}"
            if res.status != "already_decided":
                verb = "approved" if decision == "approve" else "rejected"
                which = f" (option {option})" if option else ""
                outcome = f"{verb}{which} by <@{user_id}>. {outcome}"
        except UserError as e:
            shown, outcome = None, str(e) if str(e).startswith("not decided") else f"not decided: {e}"
        except Exception as e:  # noqa: BLE001
            from mcp_tools.errors import short_error

            shown, outcome = None, f"not decided: {short_error(e)}"
        log.info("thread %s: %s", thread, outcome)
        if self.slack is None or msg is None:
            return
        channel, ts = msg
        try:
            if shown is not None:
                self.slack.decided(channel, ts, shown, outcome)
            else:
                self.slack.say(channel, ts, outcome)
        except Exception as e:  # noqa: BLE001
            log.warning("thread %s: Slack was not told the outcome: %s", thread, type(e).__name__)


def _before(a: str, b: str) -> bool:
    """RFC 3339 time ``a`` is earlier than ``b`` at ``a``'s own precision (False when either cannot be
    read): Cloud Monitoring says when an incident ended in whole seconds, so an alert that ended in the
    second the fix was applied is not "before" it."""
    from datetime import datetime

    try:
        ta = datetime.fromisoformat(a.replace("Z", "+00:00"))
        tb = datetime.fromisoformat(b.replace("Z", "+00:00"))
        if ta.microsecond == 0:
            tb = tb.replace(microsecond=0)
        return ta < tb
    except (ValueError, TypeError):
        return False


def _record_evidence(thread_id: str, ev: AlertEvent, report: dict[str, str]) -> None:
    """A closed alert after the fix, added to the thread's report (JSON ``alert_verification``, and a
    Markdown section): ``report`` is the thread's, as its result says."""
    from mcp_tools.redact import redact

    entry = {
        "source": ev.source,
        "alert_id": ev.alert_id,
        "policy": ev.policy,
        "ended_at": ev.ended_at,
        "received_at": now_iso(),
        "summary": redact(ev.summary)[:500],
    }
    jp, mp = report.get("json"), report.get("markdown")
    try:
        if jp and Path(jp).exists():
            doc = json.loads(Path(jp).read_text(encoding="utf-8"))
            seen = doc.setdefault("alert_verification", [])
            if not any(e.get("alert_id") == ev.alert_id and e.get("source") == ev.source for e in seen):
                seen.append(entry)
                Path(jp).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
                if mp and Path(mp).exists():
                    with Path(mp).open("a", encoding="utf-8") as f:
                        f.write(
                            f"\n## Alert closed after the fix\n\n- {ev.source} alert `{ev.alert_id}` "
                            f"({ev.policy or 'no policy name'}) closed"
                            f"{' at ' + ev.ended_at if ev.ended_at else ''}: verification evidence.\n"
                        )
    except (OSError, ValueError) as e:
        log.warning("thread %s: the report could not be updated: %s", thread_id, type(e).__name__)


class _Reply(BaseModel):
    accepted: list[AlertOutcome] = Field(default_factory=list)
    ignored: list[AlertOutcome] = Field(default_factory=list)


def build_app(serve: Serve, token: str) -> Any:
    """The ASGI app, behind ``mcp_tools.server.http.BearerAuth`` (Slack's path excepted)."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from mcp_tools.server.http import BearerAuth

    def too_large() -> Response:
        return JSONResponse({"error": f"request body over {MAX_BODY} bytes"}, status_code=413)

    async def body_of(request: Request) -> bytes | None:
        """The body, read no further than ``MAX_BODY`` bytes (None: it is larger)."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def alerts_route(parse: Callable[[Any], list[AlertEvent]]) -> Callable[[Request], Any]:
        async def handle(request: Request) -> Response:
            raw = await body_of(request)
            if raw is None:
                return too_large()
            try:
                try:
                    doc = json.loads(raw)
                except ValueError:
                    raise UserError("the body is not JSON") from None
                events = parse(doc)
            except UserError as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            outcomes = await anyio.to_thread.run_sync(serve.alerts, events)
            reply = _Reply(
                accepted=[o for o in outcomes if o.action != "ignored"],
                ignored=[o for o in outcomes if o.action == "ignored"],
            )
            return JSONResponse(reply.model_dump(mode="json"), status_code=202)

        return handle

    async def slack(request: Request) -> Response:
        if serve.slack is None:
            return JSONResponse({"error": "Slack is not configured on this server"}, status_code=404)
        raw = await body_of(request)
        if raw is None:
            return too_large()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if not serve.slack.verified(raw, headers):
            log.warning("Slack callback refused: bad signature or a timestamp outside five minutes")
            return JSONResponse({"error": "invalid Slack signature or stale timestamp"}, status_code=401)
        if not serve.ledger.first_sight(headers.get("x-slack-signature", "")):
            log.warning("Slack callback refused: a replay of a request already handled")
            return JSONResponse({"error": "replayed Slack request"}, status_code=409)
        try:
            inter = parse_interaction(raw)
            button = inter.button()
        except UserError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        # Slack wants an answer within three seconds; applying and verifying takes longer.
        serve.submit(
            serve.decide, button.thread, button.decision, button.option, inter.user.id, inter.user.display
        )
        return Response(status_code=200)

    async def investigations(request: Request) -> Response:
        views = await anyio.to_thread.run_sync(serve.ledger.all)
        return JSONResponse(
            {"investigations": [v.model_dump(mode="json") for v in views], "idle": serve.idle()}
        )

    app = Starlette(
        routes=[
            Route("/alerts/cloud-monitoring", alerts_route(parse_cloud_monitoring), methods=["POST"]),
            Route("/alerts/alertmanager", alerts_route(parse_alertmanager), methods=["POST"]),
            Route(SLACK_PATH, slack, methods=["POST"]),
            Route("/investigations", investigations, methods=["GET"]),
        ]
    )
    return BearerAuth(app, token, env="GEMMA_SRE_SERVE_TOKEN", basic=True, open_paths=(SLACK_PATH,))
