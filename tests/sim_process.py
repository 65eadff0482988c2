"""The simulated vLLM endpoint in its own process, for tests that measure latency from the client.

A server in a thread of the test's process shares the GIL with the client: each hand-off between the
two can wait for Python's switch interval (5 ms), which is the test's own artifact, not latency a
real client would see. Measuring tests therefore talk to a separate process, as benchmarks do.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def sim_process(**flags: object) -> Iterator[str]:
    """``python -m sandbox.vllm_sim`` with ``flags`` (``ttft_base_s=0.2`` -> ``--ttft-base-s 0.2``);
    yields its base URL once ``/health`` answers; stops it on exit."""
    port = _free_port()
    cmd = [sys.executable, "-m", "sandbox.vllm_sim", "--port", str(port)]
    for key, value in flags.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the simulator exited: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            try:
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the simulator did not answer /health within 20 s")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
