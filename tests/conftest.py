"""Shared fixtures. Tests run the real code paths; only what cannot run here is replaced, at the wire."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    from mcp_tools.settings import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
