"""mcp_tools.google_api: one retry policy, one error map and a timeout on every call, through the
official clients against the sandbox over REST."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from graph.config import Configuration
from graph.world import World
from mcp_tools.cloudlogging import CloudLogging
from mcp_tools.cloudrun import CloudRun
from mcp_tools.errors import ExternalError, NotFoundError, UserError
from mcp_tools.google_api import READ
from mcp_tools.settings import Settings
from sandbox.server import Sandbox, start_sandbox
from sandbox.testing import TEST_TIME_SCALE

FAST = READ.with_(attempts=3, base_delay_s=0.01, max_delay_s=0.02, timeout_s=5.0)
SERVICE = "gemma-4-12b"


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    sandbox = start_sandbox(
        scenario="weights-oom-with-good-revision", time_scale=TEST_TIME_SCALE, zero_latency=True
    )
    try:
        yield sandbox
    finally:
        sandbox.stop()


@pytest.fixture(autouse=True)
def _no_faults_left(sb: Sandbox) -> Iterator[None]:
    yield
    sb.faults.clear()


def _settings(sb: Sandbox) -> Settings:
    return Settings(**sb.settings_fields())


def _read_logs(sb: Sandbox, **policy: float) -> list[object]:
    return list(
        CloudLogging(_settings(sb), policy=FAST.with_(**policy)).list_entries(SERVICE, since="1h", limit=10)
    )


# --- retries ------------------------------------------------------------------------------------------


def test_a_transient_failure_is_retried_and_the_call_succeeds(sb: Sandbox) -> None:
    fault = sb.faults.inject("run:service", status=503, count=1)
    info = CloudRun(_settings(sb), policy=FAST).get_service(SERVICE, with_revisions=False)
    assert info.name == SERVICE
    assert fault.fired == 1


def test_a_log_read_is_tried_as_often_as_the_policy_says_not_attempts_squared(sb: Sandbox) -> None:
    """The loop's observe reads logs through World: cfg.retries attempts in all (was 3 x 3)."""
    fault = sb.faults.inject("entries:list", status=503, count=None)
    cfg = Configuration(service=SERVICE, retries=3, retry_base_s=0.01, **sb.settings_fields())
    now = datetime.now(UTC)
    with pytest.raises(ExternalError, match="unavailable after 3 attempts"):
        World(cfg).list_entries(SERVICE, since=now - timedelta(hours=1), until=now, limit=10)
    assert fault.fired == 3


def test_a_rejected_request_is_not_retried(sb: Sandbox) -> None:
    fault = sb.faults.inject("entries:list", status=400, count=None)
    with pytest.raises(UserError, match="rejected as invalid") as info:
        _read_logs(sb)
    assert not isinstance(info.value, NotFoundError)
    assert fault.fired == 1


def test_a_mutation_is_retried_only_on_failures_that_prove_it_was_not_applied() -> None:
    from google.api_core import exceptions as gexc

    from mcp_tools.google_api import MUTATION, call

    for exc, tries in ((gexc.InternalServerError("boom"), 1), (gexc.ServiceUnavailable("busy"), 3)):
        seen: list[int] = []

        def send(exc: Exception = exc, seen: list[int] = seen) -> None:
            seen.append(1)
            raise exc

        with pytest.raises(ExternalError):
            call("update", send, policy=MUTATION.with_(base_delay_s=0.01, max_delay_s=0.01))
        assert len(seen) == tries, exc


# --- the error map ------------------------------------------------------------------------------------


def test_a_missing_service_is_not_found_from_cloud_run(sb: Sandbox) -> None:
    with pytest.raises(NotFoundError, match="not found in project"):
        CloudRun(_settings(sb), policy=FAST).get_service("no-such-service")


def test_a_404_is_not_found_from_cloud_logging(sb: Sandbox) -> None:
    sb.faults.inject("entries:list", status=404, count=1)
    with pytest.raises(NotFoundError):
        _read_logs(sb)


def test_permission_denied_is_an_auth_error(sb: Sandbox) -> None:
    from mcp_tools.errors import AuthError

    sb.faults.inject("run:service", status=403, count=1)
    with pytest.raises(AuthError, match="permission denied"):
        CloudRun(_settings(sb), policy=FAST).get_service(SERVICE, with_revisions=False)


# --- timeouts -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["cloudrun", "cloudlogging"])
def test_a_timeout_ends_the_call(sb: Sandbox, client: str) -> None:
    target = "run:service" if client == "cloudrun" else "entries:list"
    fault = sb.faults.inject(target, kind="hang", count=None, seconds=30)
    started = time.monotonic()
    with pytest.raises(ExternalError, match="unavailable after 2 attempts"):
        if client == "cloudrun":
            CloudRun(_settings(sb), policy=FAST.with_(attempts=2, timeout_s=0.5)).get_service(SERVICE)
        else:
            _read_logs(sb, attempts=2, timeout_s=0.5)
    assert time.monotonic() - started < 10  # two 0.5 s attempts, not the hang's 30 s
    assert fault.fired == 2


@pytest.mark.parametrize("client", ["cloudrun", "cloudlogging"])
def test_a_deadline_bounds_every_attempt_and_the_backoff(sb: Sandbox, client: str) -> None:
    """Three attempts of 20 s each would take 60 s; a 4 s deadline ends the call at 4 s, named.

    4 s, not less: the deadline starts before the client is built and connects, which a busy machine can
    stretch past a second; the first attempt must still be sent."""
    from mcp_tools.google_api import Deadline, DeadlineExceeded

    target = "run:service" if client == "cloudrun" else "entries:list"
    fault = sb.faults.inject(target, kind="hang", count=None, seconds=30)
    policy = FAST.with_(attempts=3, timeout_s=20.0, deadline=Deadline(total_s=4.0))
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="deadline of 4 s ran out"):
        if client == "cloudrun":
            CloudRun(_settings(sb), policy=policy).get_service(SERVICE)
        else:
            CloudLogging(_settings(sb), policy=policy).list_entries(SERVICE, since="1h", limit=10)
    # The sandbox counts what was sent: the first attempt, cut at the deadline, and no second. The
    # clock only has to tell 4 s from one whole 20 s attempt (a busy machine adds to the 4).
    assert fault.fired == 1
    assert time.monotonic() - started < 15.0
    with pytest.raises(DeadlineExceeded, match="not tried"):  # nothing left: no request is sent
        CloudRun(_settings(sb), policy=policy).get_service(SERVICE)


def test_the_cycle_deadline_is_validated() -> None:
    from pydantic import ValidationError

    for bad in (float("nan"), float("inf"), 0.0, -5.0, 1e9):
        with pytest.raises(ValidationError, match="cycle_deadline_s"):
            Configuration(cycle_deadline_s=bad)
        with pytest.raises(ValidationError, match="cycle_deadline_s"):
            Settings(cycle_deadline_s=bad)
    assert Configuration().cycle_deadline_s == 180.0
