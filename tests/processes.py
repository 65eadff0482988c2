"""Servers that tests run as separate processes: started, waited for, always stopped."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks._support import stop
from tests.conftest import CliResult
from tests.mcp_client import ROOT
from tests.scripted_openai import free_port
from tests.waiting import wait_until


class CliWorker:
    """A ``python -m tests.cli_worker`` process: ``start(*args, env=...)`` hands it a ``gemma-sre``
    command and the environment a new process would get, ``result()`` waits for its answer. Several
    of them race as separate processes, round after round, without a new interpreter's imports per
    round (the ``cli_workers`` fixture: two for the session)."""

    def __init__(self) -> None:
        self._spawn()

    def _spawn(self) -> None:
        self._p = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_worker"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self._p, self._answers), daemon=True).start()

    @staticmethod
    def _pump(p: subprocess.Popen[str], answers: queue.Queue[str]) -> None:
        for line in p.stdout or []:  # this process's answers, into this process's queue only
            answers.put(line)

    def start(self, *args: str, env: dict[str, str]) -> None:
        assert self._p.stdin is not None
        self._p.stdin.write(json.dumps({"argv": list(args), "env": env}) + "\n")
        self._p.stdin.flush()

    def result(self, timeout_s: float = 180) -> CliResult:
        try:
            doc = json.loads(self._answers.get(timeout=timeout_s))
        except queue.Empty:
            code = self._p.poll()
            # Its late answer must not become the next test's: the next command gets a new process.
            stop(self._p)
            self._spawn()
            raise AssertionError(f"the CLI worker did not answer in {timeout_s:g} s (exit {code})") from None
        return CliResult(doc["code"], doc["stdout"], doc["stderr"])

    def close(self) -> None:
        if self._p.stdin is not None:
            self._p.stdin.close()  # the worker's loop ends
        try:
            self._p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop(self._p)


@contextmanager
def serving(
    cmd: list[str], port: int, *, env: dict[str, str] | None = None, wait_s: float = 30
) -> Iterator[None]:
    """Run ``cmd`` until the block ends; enter the block once something accepts on ``port``."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def listening_or_ended() -> bool:
        with socket.socket() as sock:
            return p.poll() is not None or sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening_or_ended, f"nothing listened on port {port}", timeout_s=wait_s)
        if p.poll() is not None:
            err = p.stderr.read().decode() if p.stderr else ""
            raise RuntimeError(f"{' '.join(cmd[:4])} exited: {err}")
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
