"""Serving over streamable HTTP: loopback by default, bearer-token auth for anything else."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from mcp.server.fastmcp import FastMCP

from mcp_tools.endpoint import is_loopback
from mcp_tools.errors import UserError


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>`` (else 401)."""

    def __init__(
        self,
        app: Any,
        token: str,
        *,
        env: str = "GEMMA_SRE_MCP_TOKEN",
        basic: bool = False,
        open_paths: tuple[str, ...] = (),
    ) -> None:
        """``basic``: also accept HTTP Basic with the token as the password (senders that cannot set a
        bearer header, such as Cloud Monitoring's webhook_basicauth channel); ``open_paths``: paths that
        authenticate otherwise (checked by the app itself, e.g. Slack's request signature)."""
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._basic = basic
        self._token = token.encode()
        self._open = open_paths
        self._refusal = f'{{"error": "unauthorized: send Authorization: Bearer <{env}>"}}'.encode()

    def _ok(self, got: bytes) -> bool:
        if hmac.compare_digest(got, self._expected):
            return True
        if self._basic and got[:6].lower() == b"basic ":
            import base64
            import binascii

            try:
                _user, _, password = base64.b64decode(got[6:].strip(), validate=True).partition(b":")
            except (ValueError, binascii.Error):
                return False
            return hmac.compare_digest(password, self._token)
        return False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in self._open:
            got = b""
            for k, v in scope.get("headers", []):
                if k.lower() == b"authorization":
                    got = v
                    break
            if not self._ok(got):
                body = self._refusal
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="gemma-sre"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: FastMCP, token: str | None) -> Any:
    """The streamable-HTTP ASGI app, behind bearer-token auth when a token is given."""
    app = server.streamable_http_app()
    return BearerAuth(app, token) if token else app


def check_http_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UserError(
            f"binding the MCP HTTP server to {host} (not loopback) requires GEMMA_SRE_MCP_TOKEN; "
            "clients then send 'Authorization: Bearer <token>'"
        )


def listening_text(server: FastMCP, host: str, port: int, token: str | None) -> str:
    """Where the server listens and how a client authenticates (never the token itself)."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{server.settings.streamable_http_path}"
    if token:
        auth = (
            "every request needs the header 'Authorization: Bearer <token>', the token being "
            "GEMMA_SRE_MCP_TOKEN as set in this server's environment"
        )
    else:
        auth = "none (loopback only); set GEMMA_SRE_MCP_TOKEN to require 'Authorization: Bearer <token>'"
    return f"gemma-sre MCP server (streamable HTTP) listening on {url}\nauthentication: {auth}"


async def serve_http(
    server: FastMCP, host: str, port: int, token: str | None, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve until stopped; ``on_ready`` is called once the socket accepts connections."""
    check_http_binding(host, token)
    await serve_asgi(http_app(server, token), host, port, on_ready, what="the MCP HTTP server")


async def serve_asgi(
    app: Any, host: str, port: int, on_ready: Callable[[], None] | None = None, *, what: str
) -> None:
    """Serve an ASGI app with uvicorn until stopped; ``on_ready`` once the socket accepts; a port that
    cannot be bound is one ``UserError`` naming ``what``."""
    import anyio
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    srv = uvicorn.Server(config)

    async def announce() -> None:
        while not srv.started and not srv.should_exit:
            await anyio.sleep(0.05)
        if srv.started and on_ready is not None:
            on_ready()

    failed = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        try:
            await srv.serve()
        except SystemExit:  # uvicorn's way of saying it could not start (it logged why: stderr)
            failed = True
        tg.cancel_scope.cancel()
    if failed:
        raise UserError(f"{what} could not listen on {host}:{port} (in use? see above)")
