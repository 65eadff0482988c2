"""The loop on a sandbox, for the tests that run it: one configuration, and what the sandbox shows.

``config_for(sb)`` is the loop's ``Configuration`` pointed at a sandbox, without a model, with short
polls and back-offs, and with a canary that measures a few short requests per step and holds no step:
the steps and their judgement are tested, not the production wait (``canary_hold_s`` 30 s per step).
A test about the hold passes its own ``canary_hold_s``.

``loop_on(scenario)`` (a fixture) starts a sandbox running ``scenario`` and gives the configuration the
CLI's ``--sandbox`` builds for it (every service of its project), as ``(sandbox, configuration)``::

    from sandbox.testing import sandbox_factory  # noqa: F401  (fixture, which loop_on uses)
    from tests.loop_support import LoopOn, loop_on  # noqa: F401  (fixture)

    def test_x(loop_on: LoopOn) -> None:  # noqa: F811
        sb, cfg = loop_on("reference-weights-oom")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graph import audit
from graph.config import Configuration
from mcp_tools.settings import get_settings
from tests.waiting import wait_until

#: Short canary measurements (a few requests of a few tokens) and no hold between steps.
FAST_CANARY: dict[str, Any] = dict(
    canary_requests=6, canary_concurrency=3, canary_output_tokens=4, canary_hold_s=0.0
)


LoopOn = Callable[..., tuple[Any, Configuration]]


@pytest.fixture
def loop_on(sandbox_factory: Callable[..., Any]) -> LoopOn:
    def start(scenario: str, **sandbox: Any) -> tuple[Any, Configuration]:
        from agent.commands.repl import sandbox_configuration

        sb = sandbox_factory(scenario=scenario, **sandbox)
        return sb, sandbox_configuration(sb, service=None)

    return start


#: The canary on zero-latency servers: only errors are judged (latencies of ~0 ms are a busy CPU's noise:
#: 5 ms against 65 ms is no regression). ``config_for`` applies it to a zero-latency sandbox.
ERRORS_ONLY: dict[str, Any] = dict(canary_max_ratio=None, slo_ttft_p95_ms=60_000.0, slo_itl_p95_ms=60_000.0)


def service_of(sb: Any) -> str:
    """The name of the sandbox's (first) service."""
    return str(next(iter(sb.state()["services"])).rsplit("/", 1)[1])


def config_for(sb: Any, service: str | None = None, **overrides: Any) -> Configuration:
    base: dict[str, Any] = dict(
        service=service or service_of(sb),
        **sb.settings_fields(),
        use_model=False,
        verify_deadline_s=30.0,
        verify_poll_s=0.05,
        retry_base_s=0.05,
        **FAST_CANARY,
    )
    if getattr(sb, "zero_latency", False):
        base.update(ERRORS_ONLY)
    base.update(overrides)
    return Configuration.from_settings(**base)


def metrics_when(
    sb: Any,
    until: Callable[[dict[str, float]], bool],
    what: str,
    service: str | None = None,
    timeout_s: float = 60,
) -> dict[str, float]:
    """The service's vLLM ``/metrics`` (each family's first sample) once ``until`` holds, polled: a
    scenario's load builds its state at its own pace, slower on a busy machine. Fails naming ``what``."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from mcp_tools.endpoint import tls_context  # a poll's client would load the CA bundle each time
    from sandbox.testing import run_clients

    services, _ = run_clients(sb)
    uri = services.get_service(name=sb.service_name(service or service_of(sb))).uri
    seen: dict[str, float] = {}

    def read() -> dict[str, float] | None:
        nonlocal seen
        try:  # an overloaded server (what some scenarios make) may answer late: that is "not yet"
            text = httpx.get(f"{uri}/metrics", timeout=10, verify=tls_context()).text
        except httpx.TimeoutException:
            return None
        seen = {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}
        return seen if until(seen) else None

    return wait_until(
        read, lambda: f"{what}: not seen; last /metrics: {seen}", timeout_s=timeout_s, every_s=0.3
    )


def queue_filled(sb: Any) -> None:
    """Until the overload scenario's steady load has filled the queue (what its diagnosis reads)."""
    metrics_when(sb, lambda m: m.get("vllm:num_requests_waiting", 0) >= 16, "a full queue")


def serving(sb: Any) -> list[str]:
    """The revisions that receive traffic, as the sandbox routes it."""
    return [name for s in sb.state()["services"].values() for name, pct in s["serving"] if pct > 0]


def mutations(sb: Any) -> list[Any]:
    return [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


def approval_header(entry: Any) -> str | None:
    d = entry.model_dump()
    return d.get("approval") or d.get("approval_id") or (d.get("headers") or {}).get("x-gemma-sre-approval")


def assert_every_mutation_approved(sb: Any) -> None:
    granted = audit.approved_ids(get_settings().state_dir)
    for m in mutations(sb):
        assert approval_header(m) in granted, f"{m.method} {m.resource} without a recorded approval"
