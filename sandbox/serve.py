"""Serve an ASGI app with uvicorn on a loopback port in a background thread (tests, the sandbox, bench).

``start_in_thread`` binds the socket itself before starting uvicorn, so the port is known (and
listening) when it returns, with no race on port 0. ``stop`` asks uvicorn to exit, waits at most a
few seconds for in-flight requests (hung ones are cut), and joins the thread.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class _DropFilter(logging.Filter):
    """Hide uvicorn's traceback for connections the sandbox cuts on purpose (an injected 'drop')."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and getattr(exc, "injected_fault", False))


_filter_installed = False


def _install_filter() -> None:
    global _filter_installed
    if not _filter_installed:
        logging.getLogger("uvicorn.error").addFilter(_DropFilter())
        _filter_installed = True


def start_in_thread(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log_level: str = "warning",
    graceful_timeout_s: int = 2,
    startup_timeout_s: float = 10.0,
    uvicorn_options: dict[str, Any] | None = None,
) -> tuple[str, Callable[[], None]]:
    """Run ``app`` under uvicorn in a daemon thread; return ``(base_url, stop)``.

    ``port=0`` picks a free port. ``stop()`` is idempotent and safe to call from any thread.
    """
    import uvicorn

    _install_filter()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]

    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=max(1, round(graceful_timeout_s)),
        backlog=2048,
        **(uvicorn_options or {}),
    )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def _run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as e:  # reported to the caller by the startup wait below
            failure.append(e)
        finally:
            sock.close()

    thread = threading.Thread(target=_run, name=f"uvicorn-{bound_port}", daemon=True)
    thread.start()
    deadline = threading.Event()
    waited = 0.0
    while not server.started and thread.is_alive() and waited < startup_timeout_s:
        deadline.wait(0.01)
        waited += 0.01
    if not server.started:
        server.should_exit = True
        thread.join(timeout=2)
        why = f": {failure[0]!r}" if failure else ""
        raise RuntimeError(f"uvicorn did not start on {host}:{bound_port}{why}")

    stopped = threading.Lock()

    def stop() -> None:
        if not stopped.acquire(blocking=False):
            return
        server.should_exit = True
        thread.join(timeout=graceful_timeout_s + 3)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=3)
        if thread.is_alive():
            logger.warning("uvicorn thread on port %d did not stop", bound_port)

    url_host = f"[{host}]" if family == socket.AF_INET6 else host
    return f"http://{url_host}:{bound_port}", stop
