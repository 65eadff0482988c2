"""Servers that tests run as separate processes: started, waited for, always stopped."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.mcp_client import ROOT
from tests.scripted_openai import free_port


@contextmanager
def serving(
    cmd: list[str], port: int, *, env: dict[str, str] | None = None, wait_s: float = 30
) -> Iterator[None]:
    """Run ``cmd`` until the block ends; enter the block once something accepts on ``port``."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if p.poll() is not None:
                err = p.stderr.read().decode() if p.stderr else ""
                raise RuntimeError(f"{' '.join(cmd[:4])} exited: {err}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listened on port {port} within {wait_s} s")
            time.sleep(0.05)
        yield
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p.stderr:
            p.stderr.close()


@contextmanager
def mcp_http_server(env: dict[str, str]) -> Iterator[str]:
    """``gemma-sre mcp --transport http`` on a free loopback port; yields its /mcp URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "agent.cli", "mcp", "--transport", "http", "--port", str(port)]
    with serving(cmd, port, env=env):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def sim_process(**flags: Any) -> Iterator[str]:
    """The simulated vLLM endpoint in its own process (``ttft_base_s=0.2`` -> ``--ttft-base-s 0.2``).

    A server in a thread of the test's process shares the GIL with the client: each hand-off can wait
    for Python's switch interval (5 ms), an artifact of the test, not latency a client would see."""
    port = free_port()
    cmd = [sys.executable, "-m", "sandbox.vllm_sim", "--port", str(port)]
    for key, value in flags.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    with serving(cmd, port):
        yield f"http://127.0.0.1:{port}"
