"""Shared fixtures. Tests run the real code paths; only what cannot run here is replaced, at the wire."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# mcp's stdio client reads ``sys.stderr`` once, as a default argument, when it is imported: imported
# first inside a test that captures with ``capsys`` (the in-process ``cli``), every later stdio server
# of that worker would write to that test's buffer, which has no file descriptor ("fileno"), and a
# user's MCP server would not start. Imported here, it keeps the process's stderr.
import mcp.client.stdio  # noqa: E402,F401

# A shell that starts the suite in the background (CI runners, ``make test &``) leaves SIGINT ignored,
# and an ignored signal stays ignored across exec: the Ctrl-C tests' children would never see it. A
# handled signal is reset to the default at exec, so the children start with Python's usual handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that hold a ``slow`` test first, then the others, most tests first.

    ``make test`` hands whole modules (and classes) to its workers in this order (``--dist loadscope
    --no-loadscope-reorder``): the long end-to-end tests start while the short ones fill the gaps,
    instead of starting last (xdist's own order, most tests first, puts the one-test classes of the
    races at the very end) and leaving one worker busy after the others are done. A module's tests
    stay together and in their order."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(tests: list[pytest.Item]) -> tuple[int, int]:
        slow = any(t.get_closest_marker("slow") for t in tests)
        return (0, 0) if slow else (1, -len(tests))

    items[:] = [t for tests in sorted(modules.values(), key=key) for t in tests]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reads the developer's real project, endpoint or state directory."""
    for name in list(os.environ):
        if name.startswith("GEMMA_SRE_") or name in (
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "VLLM_BASE_URL",
            "MODEL_NAME",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMMA_SRE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))  # no developer's gemma-sre.toml
    import mcp_tools.settings
    from mcp_tools.settings import get_settings

    monkeypatch.setattr(mcp_tools.settings, "_selected_profile", None)  # --profile of an earlier test

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``cli("run", "--sandbox", ...)``: the ``gemma-sre`` entry point run in this process.

    The same ``main()`` the console script calls (its exit-code and one-line-error mapping included),
    without a new interpreter's second of imports. Tests about the process boundary itself (the exit
    status reaching a shell, stdout carrying nothing else, signals) start a real process instead."""
    from agent.cli import main
    from mcp_tools.settings import get_settings

    def run(*args: str) -> CliResult:
        capsys.readouterr()  # drop what the test printed before
        monkeypatch.setattr(sys, "argv", ["gemma-sre", *args])
        get_settings.cache_clear()  # the environment the test set, as a new process would read it
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture
def cli_on(cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``cli_on(sb, "approve", thread)``: ``cli`` with the environment ``sandbox_env(sb)`` gives a
    ``gemma-sre`` process pointed at the sandbox ``sb``."""
    from sandbox.testing import sandbox_env

    def run(sb: Any, *args: str) -> CliResult:
        for name, value in sandbox_env(sb).items():
            monkeypatch.setenv(name, value)
        return cli(*args)

    return run


@pytest.fixture(scope="session")
def cli_workers() -> Iterator[list[Any]]:
    """Two ``gemma-sre`` worker processes for the session (``tests.processes.CliWorker``): tests that
    race processes hand them commands, each with the environment of the test that gives it."""
    from tests.processes import CliWorker

    workers = [CliWorker() for _ in range(2)]
    yield workers
    for w in workers:
        w.close()
