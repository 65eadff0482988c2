"""HTTP layer of the emulated extras: the small REST surfaces the official clients speak.

- Cloud Storage JSON API: objects list, object metadata, media download (``/download/storage/v1``).
- Secret Manager v1 REST: secrets get/create, versions add/access.
- Cloud Quotas v1 REST: quotaInfos list/get.
- Vertex AI v1 REST: models list.

Errors are answered in Google's JSON error format so the clients raise their usual exceptions.
``create_extras_app(state)`` returns a Starlette app the main sandbox can mount as is.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sandbox.extras.state import ApiError, ExtrasState, StoredObject, md5_b64

_REASONS = {400: "invalid", 401: "required", 403: "forbidden", 404: "notFound", 409: "conflict"}


def error_response(code: int, status: str, message: str) -> JSONResponse:
    body = {
        "error": {
            "code": code,
            "message": message,
            "status": status,
            "errors": [
                {"message": message, "domain": "global", "reason": _REASONS.get(code, "backendError")}
            ],
        }
    }
    return JSONResponse(body, status_code=code)


def _object_resource(bucket: str, name: str, obj: StoredObject) -> dict[str, Any]:
    size = obj.size if obj.size is not None else len(obj.data)
    return {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/1",
        "name": name,
        "bucket": bucket,
        "generation": "1",
        "metageneration": "1",
        "contentType": obj.content_type,
        "size": str(size),
        "md5Hash": md5_b64(obj.data),
        "updated": obj.updated,
        "timeCreated": obj.updated,
        "storageClass": "STANDARD",
    }


def _page_args(request: Request, size_key: str, default: int, cap: int) -> tuple[int, int]:
    try:
        size = int(request.query_params.get(size_key) or default)
        start = int(request.query_params.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "INVALID_ARGUMENT", "Invalid page size or page token.") from None
    if size <= 0:
        size = default
    return start, min(size, cap)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
    return body


# ---------------------------------------------------------------- Cloud Storage


def _storage_handlers(state: ExtrasState) -> list[Route]:
    async def list_objects(request: Request) -> Response:
        bucket = request.path_params["bucket"]
        start, size = _page_args(request, "maxResults", 1000, 1000)
        prefix = request.query_params.get("prefix") or ""
        delimiter = request.query_params.get("delimiter") or None
        items, prefixes, nxt = state.list_objects(bucket, prefix, delimiter, start, size)
        body: dict[str, Any] = {"kind": "storage#objects"}
        if items:
            body["items"] = [_object_resource(bucket, n, o) for n, o in items]
        if prefixes:
            body["prefixes"] = prefixes
        if nxt is not None:
            body["nextPageToken"] = str(nxt)
        return JSONResponse(body)

    def _media(obj: StoredObject, request: Request) -> Response:
        data = obj.data
        rng = request.headers.get("range")
        if rng:
            m = re.match(r"^bytes=(\d+)-(\d*)$", rng)
            if not m:
                raise ApiError(416, "OUT_OF_RANGE", "Requested range not satisfiable.")
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else len(data) - 1
            last = min(last, len(data) - 1)
            if first > last:
                raise ApiError(416, "OUT_OF_RANGE", "Requested range not satisfiable.")
            part = data[first : last + 1]
            return Response(
                part,
                status_code=206,
                media_type=obj.content_type,
                headers={"content-range": f"bytes {first}-{last}/{len(data)}"},
            )
        return Response(data, media_type=obj.content_type, headers={"x-goog-hash": f"md5={md5_b64(data)}"})

    async def get_object(request: Request) -> Response:
        bucket, name = request.path_params["bucket"], request.path_params["name"]
        obj = state.get_object(bucket, name)
        if request.query_params.get("alt") == "media":
            return _media(obj, request)
        return JSONResponse(_object_resource(bucket, name, obj))

    async def download(request: Request) -> Response:
        obj = state.get_object(request.path_params["bucket"], request.path_params["name"])
        return _media(obj, request)

    return [
        Route("/storage/v1/b/{bucket}/o", list_objects, methods=["GET"]),
        Route("/storage/v1/b/{bucket}/o/{name:path}", get_object, methods=["GET"]),
        Route("/download/storage/v1/b/{bucket}/o/{name:path}", download, methods=["GET"]),
    ]


# ---------------------------------------------------------------- GAPIC REST (/v1/...)

Handler = Callable[[Request, ExtrasState, re.Match[str]], Awaitable[Response]]


def _secret_resource(rec: Any) -> dict[str, Any]:
    return {
        "name": rec.name,
        "replication": {"automatic": {}},
        "createTime": rec.create_time,
        "labels": rec.labels,
        "etag": f'"{len(rec.versions)}"',
    }


async def _get_secret(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    return JSONResponse(_secret_resource(state.get_secret(f"projects/{m['p']}/secrets/{m['s']}")))


async def _create_secret(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    secret_id = request.query_params.get("secretId") or ""
    if not re.match(r"^[A-Za-z0-9_-]{1,255}$", secret_id):
        raise ApiError(400, "INVALID_ARGUMENT", "Secret ID must match [a-zA-Z0-9_-]{1,255}.")
    body = await _json_body(request)
    if "replication" not in body:
        raise ApiError(400, "INVALID_ARGUMENT", "Secret.replication is required.")
    rec = state.create_secret(m["p"], secret_id, body.get("labels") or {})
    return JSONResponse(_secret_resource(rec))


async def _add_version(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    import google_crc32c

    body = await _json_body(request)
    payload = body.get("payload") or {}
    try:
        data = base64.b64decode(payload.get("data") or "", validate=True)
    except ValueError:
        raise ApiError(400, "INVALID_ARGUMENT", "Invalid base64 in payload.data.") from None
    if "dataCrc32c" in payload and int(payload["dataCrc32c"]) != int(
        google_crc32c.Checksum(data).hexdigest(), 16
    ):
        raise ApiError(400, "INVALID_ARGUMENT", "Checksum mismatch: the payload was corrupted in transit.")
    name = f"projects/{m['p']}/secrets/{m['s']}"
    n = state.add_version(name, data)
    return JSONResponse({"name": f"{name}/versions/{n}", "state": "ENABLED", "createTime": state_now()})


async def _access_version(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    import google_crc32c

    name = f"projects/{m['p']}/secrets/{m['s']}"
    n, data = state.access_version(name, m["v"])
    return JSONResponse(
        {
            "name": f"{name}/versions/{n}",
            "payload": {
                "data": base64.b64encode(data).decode(),
                "dataCrc32c": str(int(google_crc32c.Checksum(data).hexdigest(), 16)),
            },
        }
    )


def _page(request: Request, key: str, items: list[dict[str, Any]], default: int) -> Response:
    """One page of a Google list answer (``pageSize`` / ``pageToken``, at most 100 a page)."""
    start, size = _page_args(request, "pageSize", default, 100)
    body: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        body["nextPageToken"] = str(start + size)
    return JSONResponse(body)


async def _list_quota_infos(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    return _page(request, "quotaInfos", state.list_quota_infos(m["p"], m["svc"]), 50)


async def _get_quota_info(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    for info in state.list_quota_infos(m["p"], m["svc"]):
        if info.get("quotaId") == m["q"]:
            return JSONResponse(info)
    raise ApiError(404, "NOT_FOUND", f"QuotaInfo {m['q']} not found.")


async def _list_models(request: Request, state: ExtrasState, m: re.Match[str]) -> Response:
    return _page(request, "models", state.list_vertex_models(m["p"], m["l"]), 100)


def state_now() -> str:
    from sandbox.extras.state import _now

    return _now()


_SEG = r"[^/:]+"
_GAPIC_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    ("GET", re.compile(rf"^projects/(?P<p>{_SEG})/secrets/(?P<s>{_SEG})$"), _get_secret),
    ("POST", re.compile(rf"^projects/(?P<p>{_SEG})/secrets$"), _create_secret),
    ("POST", re.compile(rf"^projects/(?P<p>{_SEG})/secrets/(?P<s>{_SEG}):addVersion$"), _add_version),
    (
        "GET",
        re.compile(rf"^projects/(?P<p>{_SEG})/secrets/(?P<s>{_SEG})/versions/(?P<v>{_SEG}):access$"),
        _access_version,
    ),
    (
        "GET",
        re.compile(rf"^projects/(?P<p>{_SEG})/locations/global/services/(?P<svc>{_SEG})/quotaInfos$"),
        _list_quota_infos,
    ),
    (
        "GET",
        re.compile(
            rf"^projects/(?P<p>{_SEG})/locations/global/services/(?P<svc>{_SEG})/quotaInfos/(?P<q>{_SEG})$"
        ),
        _get_quota_info,
    ),
    ("GET", re.compile(rf"^projects/(?P<p>{_SEG})/locations/(?P<l>{_SEG})/models$"), _list_models),
]


def _gapic_handler(state: ExtrasState) -> Route:
    async def dispatch(request: Request) -> Response:
        path = request.path_params["rest"]
        for method, pattern, handler in _GAPIC_ROUTES:
            m = pattern.match(path)
            if m and request.method == method:
                return await handler(request, state, m)
        raise ApiError(404, "NOT_FOUND", f"Method or resource not found: {request.method} /v1/{path}")

    return Route("/v1/{rest:path}", dispatch, methods=["GET", "POST"])


class _RecordAndFault:
    """ASGI middleware: record every request; answer it with an injected fault when one matches."""

    def __init__(self, app: ASGIApp, state: ExtrasState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        self.state.requests.append((scope["method"], path))
        fault = self.state.take_fault(path)
        if fault is not None:
            await error_response(fault.code, fault.status, "Injected fault.")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_extras_app(state: ExtrasState | None = None) -> Starlette:
    """The emulated extras as one Starlette app; ``app.state.extras`` is its ``ExtrasState``."""
    state = state or ExtrasState()

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.code, exc.status, exc.message)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_response(404, "NOT_FOUND", f"Not found: {request.method} {request.url.path}")

    app = Starlette(
        routes=[*_storage_handlers(state), _gapic_handler(state)],
        exception_handlers={ApiError: api_error, 404: not_found},
        middleware=[Middleware(_RecordAndFault, state=state)],
    )
    app.state.extras = state
    return app
