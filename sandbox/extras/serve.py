"""Run a Starlette app with uvicorn in a background thread on a free loopback port.

A minimal stand-in for ``sandbox/serve.py: start_in_thread`` (branch ``vllmsim``); same signature,
so callers can switch to that one once it is merged.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from starlette.applications import Starlette


def start_in_thread(app: Starlette, host: str = "127.0.0.1", port: int = 0) -> tuple[str, Callable[[], None]]:
    """Serve ``app``; return (base URL, stop). ``port=0`` picks a free port."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the extras server did not start")
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()

    return f"http://{host}:{bound_port}", stop
