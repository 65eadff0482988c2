"""The sandbox's one ASGI app: Cloud Run Admin v2 + Cloud Logging v2 REST, the per-service vLLM
endpoints, and the ``/_sandbox`` control surface (journal, faults, health, clock).

URL map (one port):

- ``/v2/projects/...``                       Cloud Run Admin API v2 (``sandbox.cloudrun.http``)
- ``/v2/entries:list``                       Cloud Logging API v2
- ``/_run/{project}/{location}/{service}/...`` the service ``uri``: routed, by the service's traffic, to a
  ready revision's simulated vLLM server (``/health``, ``/v1/...``, ``/metrics``)
- ``/_rev/{project}/{location}/{revision}/...`` one revision directly, whatever the traffic says
- ``/_sandbox/healthz``, ``/_sandbox/clock``, ``/_sandbox/journal`` (GET; DELETE clears),
  ``/_sandbox/faults`` (GET lists, POST arms ``{target, kind, status, count, seconds, factor}``, DELETE
  clears; kind ``slow`` makes the next revision to start under the target ``factor`` times slower),
  ``/_sandbox/state`` (services, revisions and their simulated fate, for debugging)

Fault targets: ``run`` (every Cloud Run call), ``logging`` (entries:list), ``endpoint`` (every
served request), a service id, a revision name, or ``*``. API faults answer Google error JSON with
the status asked for, hang until the client gives up (or ``seconds`` pass), or drop the connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from sandbox.clock import rfc3339
from sandbox.cloudlogging import http as logging_http
from sandbox.cloudrun import http as run_http
from sandbox.errors import ApiError, bad_request, status_for_http
from sandbox.faults import Fault, wait_disconnect
from sandbox.journal import APPROVAL_HEADER, JournalEntry

if TYPE_CHECKING:
    from sandbox.server import Sandbox

logger = logging.getLogger(__name__)

_MUTATING = {"POST", "PATCH", "PUT", "DELETE"}


def _error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.http_status)


class _Dropped(ConnectionAbortedError):
    injected_fault = True


class _Send:
    """A wrapped ASGI ``send`` that still exposes the server's transport (``.transport``), which the
    simulated vLLM server uses to act out an injected connection drop."""

    def __init__(self, fn: Any, raw: Any) -> None:
        self._fn = fn
        self.transport = getattr(getattr(raw, "__self__", None), "transport", None)
        self.__self__ = self

    async def __call__(self, message: dict[str, Any]) -> None:
        await self._fn(message)


class SandboxApp:
    """ASGI-3 app. Holds no state of its own: everything lives on the ``Sandbox``."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sb = sandbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope.get("path", "")
        scope["gemma_sre.transport"] = getattr(getattr(send, "__self__", None), "transport", None)
        if path.startswith("/_run/") or path.startswith("/_rev/"):
            await self._serve_guarded(scope, receive, send)
            return
        try:
            request = Request(scope, receive)
            response = await self._dispatch(request)
        except ApiError as e:
            response = _error_response(e)
        except _Dropped:
            return
        except Exception as e:  # never crash on input: a Google-shaped 500 instead
            logger.exception("sandbox: unhandled error on %s %s", scope.get("method"), path)
            response = _error_response(
                ApiError("INTERNAL", f"Internal error in the sandbox: {e.__class__.__name__}")
            )
        await response(scope, receive, send)

    # ------------------------------------------------------------------------------ faults
    async def _fault(self, request: Request, names: tuple[str, ...]) -> Response | None:
        fault: Fault | None = self.sb.faults.take(names)
        if fault is None:
            return None
        if fault.kind == "status":
            status = status_for_http(fault.status)
            err = ApiError(
                status, f"Injected fault: HTTP {fault.status} ({status}) from the gemma-sre sandbox."
            )
            return JSONResponse(err.body(), status_code=fault.status)
        if fault.kind == "hang":
            await wait_disconnect(request, fault.seconds)
            return None
        _drop(request.scope)
        raise _Dropped("injected drop")

    # ------------------------------------------------------------------------------ dispatch
    async def _dispatch(self, request: Request) -> Response:
        path = request.url.path
        method = request.method
        if path.startswith("/_sandbox/"):
            return await self._control(request)
        if path in ("/v2/entries:list", "/v2/entries:list/"):
            fault = await self._fault(request, ("logging", "entries:list", path))
            if fault is not None:
                return fault
            if method != "POST":
                raise ApiError("NOT_FOUND", f"Method {method} is not allowed on {path}; use POST")
            body = await run_http.json_body(request)
            if not isinstance(body, dict):
                raise bad_request("Invalid JSON payload received. Expected an object.")
            self.sb.cloudrun.advance()
            return await logging_http.list_entries(self.sb.logs, body)
        m = run_http.match(path)
        if m is None:
            if path.startswith("/v2/"):
                raise ApiError(
                    "NOT_FOUND", f"The requested URL {path} was not found on this server (gemma-sre sandbox)."
                )
            raise ApiError("NOT_FOUND", f"The requested URL {path} was not found on this server.")
        kind, args, methods = m
        names = ("run", f"run:{kind}", *args)
        creator = "sandbox-user@example.com"
        # every mutating call is journaled, also one refused by an injected fault (with its status)
        journal = method in _MUTATING and kind != "wait"
        status = 200
        body_json: Any = None
        try:
            if journal:
                raw = await request.body()
                try:
                    body_json = json.loads(raw) if raw.strip() else None
                except (json.JSONDecodeError, UnicodeDecodeError):
                    body_json = {"_unparseable": raw[:2000].decode("utf-8", "replace")}
            status = 0  # a dropped connection answers nothing
            fault = await self._fault(request, names)
            status = 200
            if fault is not None:
                status = fault.status_code
                return fault
            if method not in methods.split():
                raise ApiError("NOT_FOUND", f"Method {method} is not supported on {path}.")
            response = await run_http.handle(self.sb.cloudrun, request, kind, args, creator)
            return response
        except ApiError as e:
            status = e.http_status
            raise
        finally:
            if journal:
                resource = path[len("/v2/") :]
                if kind == "services" and request.query_params.get("serviceId"):
                    resource = f"{resource}/{request.query_params['serviceId']}"
                q = {k: v for k, v in request.query_params.items() if k != "$alt"}
                self.sb.journal.record(
                    JournalEntry(
                        method=method,
                        resource=resource,
                        body=body_json if isinstance(body_json, dict) else None,
                        query=q,
                        time=rfc3339(self.sb.clock.now_s()),
                        caller=request.headers.get("user-agent"),
                        client=request.headers.get("x-goog-api-client"),
                        approval=request.headers.get(APPROVAL_HEADER),
                        status=status,
                        validate_only=q.get("validateOnly", "").lower() == "true",
                    )
                )

    # ------------------------------------------------------------------------------ control
    async def _control(self, request: Request) -> Response:
        path = request.url.path.rstrip("/")
        method = request.method
        sb = self.sb
        if path == "/_sandbox/healthz":
            return JSONResponse(
                {
                    "ok": True,
                    "project": sb.project,
                    "location": sb.location,
                    "scenario": sb.scenario_name,
                    "time": rfc3339(sb.clock.now_s()),
                    "time_scale": sb.clock.time_scale,
                }
            )
        if path == "/_sandbox/clock":
            return JSONResponse({"now": rfc3339(sb.clock.now_s()), "time_scale": sb.clock.time_scale})
        if path == "/_sandbox/journal":
            if method == "DELETE":
                sb.journal.clear()
                return JSONResponse({})
            return JSONResponse({"entries": [e.model_dump() for e in sb.journal.entries()]})
        if path == "/_sandbox/faults":
            if method == "GET":
                return JSONResponse({"faults": [f.model_dump() for f in sb.faults.pending()]})
            if method == "DELETE":
                sb.faults.clear(request.query_params.get("target"))
                return JSONResponse({})
            if method == "POST":
                body = await run_http.json_body(request)
                if not isinstance(body, dict):
                    raise bad_request("expected a JSON object {target, kind, status, count, seconds}")
                try:
                    f = sb.faults.inject(
                        str(body.get("target", "*")),
                        body.get("kind", "status"),
                        int(body.get("status", 503)),
                        None if body.get("count", 1) is None else int(body.get("count", 1)),
                        seconds=None if body.get("seconds") is None else float(body["seconds"]),
                        after_tokens=None if body.get("after_tokens") is None else int(body["after_tokens"]),
                        factor=float(body.get("factor", 1.0)),
                    )
                except (TypeError, ValueError) as e:
                    raise bad_request(f"bad fault: {e}") from None
                return JSONResponse(f.model_dump())
        if path == "/_sandbox/state":
            return JSONResponse(sb.state())
        raise ApiError("NOT_FOUND", f"The requested URL {path} was not found on this server.")

    # ------------------------------------------------------------------------------ serving
    async def _serve_guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def _send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        wrapped = _Send(_send, send)
        try:
            await self._serve(scope, receive, wrapped)
        except _Dropped:
            return
        except Exception:
            logger.exception("sandbox: error serving %s", scope.get("path"))
            if not started:
                await _text(send, 500, "Internal Server Error")

    async def _serve(self, scope: Scope, receive: Receive, send: Any) -> None:
        path: str = scope["path"]
        parts = path.split("/", 5)  # '', '_run', project, location, service, rest
        if len(parts) < 5 or not all(parts[2:5]):
            await _text(send, 404, "Not Found: a service URL is /_run/{project}/{location}/{service}/...")
            return
        project, location, name = parts[2], parts[3], parts[4]
        rest = "/" + (parts[5] if len(parts) > 5 else "")
        cr = self.sb.cloudrun
        if parts[1] == "_run":
            rev = await asyncio.to_thread(cr.pick_revision, project, location, name)
            if rev is None:
                if (project, location, name) in cr.services:
                    await _text(send, 503, "Service Unavailable")
                else:
                    await _text(send, 404, "Page not found")
                return
        else:
            rev = await asyncio.to_thread(cr.find_revision, project, location, name)
            if rev is None or rev.state != "ready" or rev.app is None:
                await _text(
                    send,
                    404 if rev is None else 503,
                    "Page not found" if rev is None else "Service Unavailable",
                )
                return
        request = Request(scope, receive)
        fault = await self._fault(request, ("endpoint", rev.service, rev.short))
        if fault is not None:
            await fault(scope, receive, send)
            return
        if rev.app is None:
            await _text(send, 503, "Service Unavailable")
            return
        prefix = "/".join(parts[:5])
        sub = dict(scope)
        sub["path"] = rest
        sub["raw_path"] = rest.encode()
        sub["root_path"] = scope.get("root_path", "") + prefix
        seen = {"status": 500, "size": 0}
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def _send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = int(message["status"])
            elif message["type"] == "http.response.body":
                seen["size"] += len(message.get("body", b""))
            await send(message)

        # the served app finds the raw transport through this bound method's __self__ (injected drops)
        try:
            await rev.app(sub, receive, _Send(_send, send))
        finally:
            elapsed = (loop.time() - t0) * (1.0 if self.sb.zero_latency else 1.0)
            self.sb.record_request(rev, scope, seen["status"], elapsed, seen["size"])


async def _text(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _drop(scope: Scope) -> None:
    """Close the client connection without a response (uvicorn's transport, when reachable)."""
    transport = scope.get("gemma_sre.transport")
    if transport is not None:
        transport.close()
