"""Cloud Run Admin API v2 over REST: the paths, query parameters and bodies the official
``google-cloud-run`` REST transport sends (see ``run_v2/services/*/transports/rest_base.py``):

- ``POST   /v2/projects/{p}/locations/{l}/services?serviceId=&validateOnly=``        CreateService
- ``GET    /v2/projects/{p}/locations/{l}/services?pageSize=&pageToken=``            ListServices
- ``GET    /v2/projects/{p}/locations/{l}/services/{s}``                             GetService
- ``PATCH  /v2/projects/{p}/locations/{l}/services/{s}?updateMask=&validateOnly=&allowMissing=``
- ``DELETE /v2/projects/{p}/locations/{l}/services/{s}?etag=&validateOnly=``
- ``GET    /v2/projects/{p}/locations/{l}/services/{s}/revisions``                   ListRevisions
- ``GET|DELETE /v2/projects/{p}/locations/{l}/services/{s}/revisions/{r}``
- ``GET    /v2/projects/{p}/locations/{l}/operations[/{o}]``, ``DELETE .../operations/{o}``,
  ``POST .../operations/{o}:wait``

Every answer is wire JSON; every error is Google's error JSON (``sandbox.errors``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from sandbox.clock import duration_s
from sandbox.cloudrun.model import CloudRunBackend, DeleteOptions
from sandbox.errors import ApiError, bad_request, not_found

_SEG = r"([^/:]+)"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("services", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/services$"), "GET POST"),
    ("service", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/services/{_SEG}$"), "GET PATCH DELETE"),
    ("revisions", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/services/{_SEG}/revisions$"), "GET"),
    (
        "revision",
        re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/services/{_SEG}/revisions/{_SEG}$"),
        "GET DELETE",
    ),
    ("operations", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/operations$"), "GET"),
    ("operation", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/operations/{_SEG}$"), "GET DELETE"),
    ("wait", re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/operations/{_SEG}:wait$"), "POST"),
]

MAX_PAGE = 1000


def match(path: str) -> tuple[str, tuple[str, ...], str] | None:
    for kind, rx, methods in ROUTES:
        m = rx.match(path)
        if m:
            return kind, m.groups(), methods
    return None


def _bool(q: dict[str, str], name: str) -> bool:
    v = q.get(name)
    if v is None:
        return False
    if v.lower() in ("true", "1"):
        return True
    if v.lower() in ("false", "0", ""):
        return False
    raise bad_request(f"Invalid value at '{name}' (TYPE_BOOL), \"{v}\"", name)


def _page(items: list[dict[str, Any]], q: dict[str, str], key: str) -> dict[str, Any]:
    try:
        size = int(q.get("pageSize") or 0)
    except ValueError:
        raise bad_request(
            f"Invalid value at 'page_size' (TYPE_INT32), \"{q.get('pageSize')}\"", "page_size"
        ) from None
    if size < 0:
        raise bad_request("page_size must not be negative", "page_size")
    size = min(size or 100, MAX_PAGE)
    start = 0
    token = q.get("pageToken")
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
        except (ValueError, UnicodeDecodeError):
            raise bad_request("Invalid page token", "page_token") from None
    chunk = items[start : start + size]
    out: dict[str, Any] = {key: chunk} if chunk else {}
    if start + size < len(items):
        out["nextPageToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode().rstrip("=")
    return out


def _delete_options(q: dict[str, str]) -> DeleteOptions:
    """A delete's query parameters (services.delete, revisions.delete): ``etag``, ``validateOnly``."""
    return DeleteOptions(etag=q.get("etag"), validate_only=_bool(q, "validateOnly"))


async def json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad_request(f"Invalid JSON payload received. {e.__class__.__name__}: {e}") from None


async def handle(
    backend: CloudRunBackend, request: Request, kind: str, args: tuple[str, ...], creator: str
) -> JSONResponse:
    q = dict(request.query_params)
    method = request.method
    if kind == "services":
        project, location = args
        if method == "GET":
            return JSONResponse(_page(backend.list_services(project, location), q, "services"))
        body = await json_body(request)
        op = await asyncio.to_thread(
            backend.create_service,
            project,
            location,
            q.get("serviceId", ""),
            body,
            validate_only=_bool(q, "validateOnly"),
            creator=creator,
        )
        return JSONResponse(op)
    # args: the resource's path, (project, location, service[, revision]), as the backend takes it
    if kind == "service":
        if method == "GET":
            return JSONResponse(backend.get_service(*args))
        if method == "PATCH":
            project, location, service = args
            body = await json_body(request)
            op = await asyncio.to_thread(
                backend.update_service,
                project,
                location,
                service,
                body,
                update_mask=q.get("updateMask"),
                validate_only=_bool(q, "validateOnly"),
                allow_missing=_bool(q, "allowMissing"),
                creator=creator,
            )
            return JSONResponse(op)
        return JSONResponse(backend.delete_service(*args, options=_delete_options(q)))
    if kind == "revisions":
        return JSONResponse(_page(backend.list_revisions(*args), q, "revisions"))
    if kind == "revision":
        if method == "GET":
            return JSONResponse(backend.get_revision(*args))
        return JSONResponse(backend.delete_revision(*args, options=_delete_options(q)))
    if kind == "operations":
        project, location = args
        return JSONResponse(_page(backend.list_operations(project, location), q, "operations"))
    if kind == "operation":
        project, location, op_id = args
        if method == "GET":
            return JSONResponse(backend.get_operation(project, location, op_id))
        backend.delete_operation(project, location, op_id)
        return JSONResponse({})
    if kind == "wait":
        project, location, op_id = args
        body = await json_body(request)
        timeout = 60.0
        if isinstance(body, dict) and body.get("timeout"):
            try:
                timeout = duration_s(str(body["timeout"]))
            except ValueError:
                raise bad_request(f"Invalid value at 'timeout': {body['timeout']!r}", "timeout") from None
        deadline = asyncio.get_running_loop().time() + min(timeout, 60.0)
        while True:
            op = backend.get_operation(project, location, op_id)
            if op.get("done") or asyncio.get_running_loop().time() >= deadline:
                return JSONResponse(op)
            await asyncio.sleep(0.02)
    raise not_found(f"no such resource: {request.url.path}")  # pragma: no cover


__all__ = ["ApiError", "handle", "match"]
