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

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = b""
            for k, v in scope.get("headers", []):
                if k.lower() == b"authorization":
                    got = v
                    break
            if not hmac.compare_digest(got, self._expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <GEMMA_SRE_MCP_TOKEN>"}'
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
    import anyio
    import uvicorn

    check_http_binding(host, token)
    config = uvicorn.Config(http_app(server, token), host=host, port=port, log_level="warning", lifespan="on")
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
        raise UserError(f"the MCP HTTP server could not listen on {host}:{port} (in use? see above)")
