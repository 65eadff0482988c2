"""Pytest helpers for any branch: a started sandbox and the OFFICIAL clients pointed at it.

    from sandbox.testing import sandbox, run_clients, logging_client   # noqa: F401  (fixtures)

    def test_x(sandbox):
        services, revisions = run_clients(sandbox)
        svc = services.get_service(name=sandbox.service_name("gemma-4-12b"))

The ``sandbox`` fixture starts an empty sandbox at time-scale 1000 (a three-minute start takes
0.2 s); ``sandbox_factory(scenario=..., incident=..., ...)`` starts one per call and stops it at
teardown. ``sandbox_env(sb)`` gives the environment variables that point gemma-sre's settings at a
sandbox (``GEMMA_SRE_RUN_API_ENDPOINT`` ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandbox.server import Sandbox, start_sandbox

TEST_TIME_SCALE = 1000.0


def _settings(sb: Sandbox) -> Any:
    from mcp_tools.settings import Settings

    return Settings(**sb.settings_fields())


def run_clients(sb: Sandbox) -> tuple[Any, Any]:
    """(ServicesClient, RevisionsClient) of ``google-cloud-run`` over REST with anonymous credentials."""
    from google.cloud import run_v2

    from mcp_tools.google_api import build_client

    settings = _settings(sb)
    return (
        build_client(run_v2.ServicesClient, settings, endpoint=sb.url),
        build_client(run_v2.RevisionsClient, settings, endpoint=sb.url),
    )


def logging_client(sb: Sandbox) -> Any:
    """A ``google.cloud.logging.Client`` (JSON/REST API) pointed at the sandbox."""
    from google.cloud import logging as gcl

    from mcp_tools.google_api import build_client

    return build_client(
        gcl.Client, _settings(sb), endpoint=sb.url, handwritten=True, project=sb.project, _use_grpc=False
    )


def monitoring_client(sb: Sandbox) -> Any:
    """A ``google-cloud-monitoring`` ``MetricServiceClient`` (gRPC: its only transport) on the sandbox."""
    from google.cloud import monitoring_v3

    from mcp_tools.google_api import build_client

    return build_client(
        monitoring_v3.MetricServiceClient, _settings(sb), endpoint=sb.monitoring_url, transport="grpc"
    )


def sandbox_env(sb: Sandbox) -> dict[str, str]:
    """The environment that points gemma-sre's ``Settings`` at this sandbox."""
    return {
        "GEMMA_SRE_RUN_API_ENDPOINT": sb.url,
        "GEMMA_SRE_LOGGING_API_ENDPOINT": sb.url,
        "GEMMA_SRE_MONITORING_API_ENDPOINT": sb.monitoring_url,
        "GEMMA_SRE_ANONYMOUS_CREDENTIALS": "1",
        "GOOGLE_CLOUD_PROJECT": sb.project,
        "GOOGLE_CLOUD_LOCATION": sb.location,
    }


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """An empty sandbox (no services) at time-scale 1000, zero-latency endpoints."""
    sb = start_sandbox(time_scale=TEST_TIME_SCALE, zero_latency=True)
    try:
        yield sb
    finally:
        sb.stop()


@pytest.fixture
def sandbox_factory() -> Iterator[Callable[..., Sandbox]]:
    """``sandbox_factory(scenario="healthy")`` -> a started sandbox, stopped at teardown."""
    started: list[Sandbox] = []

    def make(**kw: Any) -> Sandbox:
        kw.setdefault("time_scale", TEST_TIME_SCALE)
        kw.setdefault("zero_latency", True)
        sb = start_sandbox(**kw)
        started.append(sb)
        return sb

    try:
        yield make
    finally:
        for sb in started:
            sb.stop()
