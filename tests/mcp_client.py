"""One official-MCP-client session per test module, kept in a background thread with its own loop.

anyio transports must be entered and left in the same task, so the session lives in one task of a
dedicated event loop; tests call into it synchronously. Spawns ``gemma-sre mcp`` (stdio), talks to
an already running streamable-HTTP server, or serves a server built in the test's process over
memory streams (``in_memory``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.types import CallToolResult

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The raw JSON-RPC ``initialize`` request, for tests that speak the protocol below the official client.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def server_env(extra: dict[str, str], state_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The test process's environment without any GEMMA_SRE_* / Google settings, plus ``extra``;
    the server's state (benchmark runs, ...) goes to ``state_dir``."""
    drop = ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "VLLM_BASE_URL", "MODEL_NAME")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_") and k not in drop}
    env["GEMMA_SRE_STATE_DIR"] = str(state_dir)
    env.update(extra)
    return env


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "agent.cli", "mcp"], env=env, cwd=ROOT)


def in_memory(server: Any) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """A ``SessionThread`` opener: ``server`` (a FastMCP) served in the session's own loop over memory
    streams, as the SDK's ``create_connected_server_and_client_session`` serves it."""

    @asynccontextmanager
    async def opener() -> Any:
        import anyio
        from mcp.shared.memory import create_client_server_memory_streams

        low = server._mcp_server  # what the SDK's own in-memory helper serves
        async with (
            create_client_server_memory_streams() as (client, (read, write)),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(lambda: low.run(read, write, low.create_initialization_options()))
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()

    return opener


def session_here() -> SessionThread:
    """A session with the server ``gemma-sre mcp`` serves, built in this process from the settings
    the environment gives (as that process would read them), over memory streams."""
    from agent.commands.mcp import build
    from mcp_tools.settings import get_settings

    get_settings.cache_clear()
    return SessionThread(in_memory(build(get_settings())))


class SessionThread:
    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Any]], *, start_timeout: float = 60):
        self._opener = opener
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.session: ClientSession | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout):
            raise TimeoutError("MCP session did not start")
        if self._error is not None:
            raise RuntimeError(f"MCP session failed to start: {self._error!r}") from self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as e:  # surfaced to the test through _error
            self._error = self._error or e
            self._ready.set()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        async with self._opener() as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                self.session = session
                self._ready.set()
                await self._stop.wait()

    def run(self, fn: Callable[[ClientSession], Awaitable[Any]], timeout: float = 120) -> Any:
        assert self.session is not None
        return asyncio.run_coroutine_threadsafe(fn(self.session), self._loop).result(timeout)

    def call(self, name: str, args: dict[str, Any] | None = None, timeout: float = 120) -> CallToolResult:
        return self.run(lambda s: s.call_tool(name, args or {}), timeout)

    def tool_names(self) -> set[str]:
        res = self.run(lambda s: s.list_tools())
        return {t.name for t in res.tools}

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=20)


def text_of(r: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in r.content)
