"""``gemma-sre mcp``: serve the MCP tool server over stdio (default) or streamable HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer
    from mcp.server.fastmcp import FastMCP

    from mcp_tools.settings import Settings


def register(app: typer.Typer) -> None:
    import typer

    from agent.params import bounded

    @app.command()
    def mcp(
        transport: str = typer.Option("stdio", "--transport", help="stdio or http (streamable HTTP)."),
        host: str = typer.Option(
            "127.0.0.1", "--host", help="HTTP bind address (non-loopback needs a token)."
        ),
        port: int = typer.Option(8765, "--port", parser=bounded(int, 1, 65_535), help="HTTP port."),
    ) -> None:
        """Serve the gemma-sre MCP tools (for Antigravity CLI, Gemini CLI, or any MCP client).

        Over HTTP it prints where it listens (stderr); binding anything but loopback requires
        GEMMA_SRE_MCP_TOKEN, and clients then send 'Authorization: Bearer <token>'.
        GEMMA_SRE_POLICY=read-only hides the mutating tools.
        """
        serve(transport, host, port)


def build(settings: Settings, host: str = "127.0.0.1", port: int = 8765) -> FastMCP:
    """The server ``gemma-sre mcp`` serves: the tool server with the agent's tools and faces."""
    from agent.mcp_agent_faces import register_agent_faces
    from agent.mcp_agent_tools import register_agent_tools
    from mcp_tools.server import build_server

    return build_server(
        settings, extra_registrars=[register_agent_tools, register_agent_faces], host=host, port=port
    )


def serve(transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765) -> None:
    """Build the tool server and serve it until the client leaves (stdio) or the process stops."""
    from mcp_tools.errors import UserError

    if transport not in ("stdio", "http"):
        raise UserError(f"--transport must be 'stdio' or 'http', not {transport!r}")
    if not 0 < port < 65536:
        raise UserError(f"--port must be from 1 to 65535, not {port}")
    import gc

    import anyio

    from mcp_tools.settings import get_settings

    # Start-up allocates a few hundred thousand long-lived objects (the SDK's and our pydantic models,
    # the tools' schemas): the cyclic collector would scan them again and again while they are built.
    # It is paused for the build, and what the build made is frozen (never scanned again: it lives as
    # long as the server does) before it runs again, so serving starts without one large collection.
    gc.disable()
    try:
        settings = get_settings()
        token = settings.mcp_token.get_secret_value() if settings.mcp_token else None
        if transport == "http":
            from mcp_tools.server.http import check_http_binding

            check_http_binding(host, token)
        server = build(settings, host=host, port=port)
    finally:
        gc.freeze()
        gc.enable()
    if transport == "stdio":
        # stdout carries the protocol only; our logs go to stderr (configured by the CLI root).
        lines = _Lines()
        try:
            anyio.run(_serve_stdio, server, lines)
        except BaseExceptionGroup as eg:
            # What the SDK raises when the client's input was not JSON-RPC (bytes that are not UTF-8,
            # or its notice about a bad line still pending when the client closed stdin): bad input.
            _bad, rest = eg.split((UnicodeDecodeError, anyio.ClosedResourceError, anyio.BrokenResourceError))
            if rest is not None:
                raise
            lines.bad += 1
        if lines.bad and not lines.good:
            raise UserError(
                "MCP stdio: the session ended on input that is not JSON-RPC (one UTF-8 JSON object a line)"
            )
    else:
        import sys

        from mcp_tools.server.http import listening_text, serve_http

        def ready() -> None:  # stderr: stdout stays free for whatever runs this
            print(listening_text(server, host, port, token), file=sys.stderr, flush=True)

        anyio.run(serve_http, server, host, port, token, ready)


@dataclass
class _Lines:
    """How many of the client's lines the SDK's stdio reader parsed as JSON-RPC, and how many it could not."""

    good: int = 0
    bad: int = 0


async def _serve_stdio(server: FastMCP, lines: _Lines) -> None:
    """``FastMCP.run_stdio_async``, counting the lines read on the way to the server.

    The SDK's reader decodes stdin with ``errors="replace"`` and hands every line it cannot parse to the
    session as an exception, which the session logs and drops: a client that sent only garbage would
    otherwise end in exit 0, or in an error, depending on which of the SDK's tasks finished first.
    ``lines`` is the caller's, so the counts outlive an error the task group raises.
    """
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    low = server._mcp_server  # what run_stdio_async serves; FastMCP has no public name for it
    async with stdio_server() as (read_stream, write_stream):
        to_server, from_reader = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def count() -> None:
            async with to_server, read_stream:
                async for item in read_stream:
                    if isinstance(item, SessionMessage):
                        lines.good += 1
                    else:
                        lines.bad += 1
                    await to_server.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(count)
            await low.run(from_reader, write_stream, low.create_initialization_options())
