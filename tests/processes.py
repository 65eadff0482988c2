"""Servers that tests run as separate processes: started, waited for, always stopped."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.mcp_client import ROOT
from tests.scripted_openai import free_port


def stop(p: subprocess.Popen[Any], wait_s: float = 10) -> None:
    """End ``p``: terminate it, and kill it if it has not exited within ``wait_s`` seconds."""
    p.terminate()
    try:
        p.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


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
        stop(p)
        if p.stderr:
            p.stderr.close()


@contextmanager
def announcing(
    cmd: list[str], *, env: dict[str, str], until: str, wait_s: float = 60
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``cmd``, a server that says on stderr where it listens, until the block ends; enter the
    block with the process and what it said up to the line holding ``until``. Its stdout is left
    for the caller to read once the block has stopped it."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in p.stderr or []:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        said: list[str] = []
        while not any(until in x for x in said):
            said.append(lines.get(timeout=wait_s))
        yield p, "".join(said)
    finally:
        stop(p)


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
