"""``gemma-sre mcp``'s start-up: the cyclic collector is paused for the build and back on to serve."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from agent.commands import mcp as mcp_command


class _Built(Exception):
    """Raised by the stand-in build: stops serve() before it would serve."""


def test_the_build_runs_without_the_collector_and_serving_runs_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}
    frozen_before = gc.get_freeze_count()

    def build(settings: Any, host: str, port: int) -> Any:
        seen["enabled during build"] = gc.isenabled()
        raise _Built

    monkeypatch.setattr(mcp_command, "build", build)
    try:
        with pytest.raises(_Built):
            mcp_command.serve("stdio")
        assert seen["enabled during build"] is False
        assert gc.isenabled(), "a failed build must not leave the collector off"
        assert gc.get_freeze_count() > frozen_before, "what the build made is frozen"
    finally:
        gc.unfreeze()
        gc.enable()
