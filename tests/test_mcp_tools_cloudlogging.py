"""Cloud Logging layer: filters from validated, quoted values; explicit time bounds; entry conversion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.cloud.logging_v2.entries import StructEntry, TextEntry

from mcp_tools.cloudlogging import CloudLogging, build_filter, entry_to_logline, parse_time, quote
from mcp_tools.errors import UserError
from mcp_tools.settings import Settings

T0 = datetime(2026, 5, 29, 19, 0, 0, tzinfo=UTC)


def test_filter_has_resource_service_and_explicit_timestamp() -> None:
    f = build_filter("gemma-12b", since=T0, location="region-a")
    lines = f.splitlines()
    assert 'resource.type="cloud_run_revision"' in lines
    assert 'resource.labels.service_name="gemma-12b"' in lines
    assert 'resource.labels.location="region-a"' in lines
    assert 'timestamp>="2026-05-29T19:00:00.000000Z"' in lines
    assert not any(line.startswith("timestamp<=") for line in lines)


def test_filter_with_every_option() -> None:
    f = build_filter(
        "gemma-12b",
        since=T0,
        until=T0 + timedelta(hours=1),
        severity="warn",
        text_filter="CUDA out of memory",
        revision="gemma-12b-00002-abc",
    )
    assert 'timestamp<="2026-05-29T20:00:00.000000Z"' in f
    assert "severity>=WARNING" in f
    assert 'resource.labels.revision_name="gemma-12b-00002-abc"' in f
    q = '"CUDA out of memory"'
    assert (
        f"(textPayload:{q} OR jsonPayload:{q} OR httpRequest.requestMethod:{q} OR httpRequest.requestUrl:{q})"
        in f
    )


def test_text_is_escaped_so_it_cannot_break_out_of_the_string() -> None:
    nasty = 'x" OR logName:"projects/other\\'
    q = quote(nasty)
    assert q == '"x\\" OR logName:\\"projects/other\\\\"'
    f = build_filter("gemma", since=T0, text_filter=nasty)
    # the only unescaped quotes are the ones that delimit our own literals
    assert f.count('OR logName:\\"') == f.count(q) == 4  # text, JSON, request method and URL
    assert "\n" not in quote("a\nb")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"service": 'gemma" OR "1'}, "invalid Cloud Run service name"),
        ({"service": "gemma", "revision": "Rev/1"}, "invalid Cloud Run revision name"),
        ({"service": "gemma", "severity": "LOUD"}, "unknown severity"),
        ({"service": "gemma", "text_filter": "x" * 201}, "longer than 200"),
        ({"service": "gemma", "until": T0 - timedelta(seconds=1)}, "later than 'since'"),
    ],
)
def test_bad_filter_values_are_refused(kwargs: dict, message: str) -> None:
    service = kwargs.pop("service")
    with pytest.raises(UserError, match=message):
        build_filter(service, since=T0, **kwargs)


def test_parse_time_forms() -> None:
    now = T0
    assert parse_time("15m", now=now) == now - timedelta(minutes=15)
    assert parse_time("2h", now=now) == now - timedelta(hours=2)
    assert parse_time(timedelta(days=1), now=now) == now - timedelta(days=1)
    assert parse_time("2026-05-29T18:00:00Z", now=now) == T0 - timedelta(hours=1)
    assert parse_time(datetime(2026, 5, 29, 18, 0), now=now).tzinfo is UTC
    with pytest.raises(UserError, match="bad 'since' value"):
        parse_time("yesterday-ish", now=now)


def test_bounds_on_count_and_window() -> None:
    cl = CloudLogging(Settings(project="proj"))
    with pytest.raises(UserError, match="limit must be"):
        cl.list_entries("gemma", since="1h", limit=0)
    with pytest.raises(UserError, match="limit must be"):
        cl.list_entries("gemma", since="1h", limit=50_000)
    with pytest.raises(UserError, match="longer than 30 days"):
        cl.list_entries("gemma", since="40d")


def test_entry_conversion() -> None:
    t = TextEntry(payload="CUDA out of memory", severity="ERROR", timestamp=T0)
    line = entry_to_logline(t)
    assert line.text == "CUDA out of memory" and line.severity == "ERROR"
    assert line.timestamp == "2026-05-29T19:00:00.000000Z"
    s = StructEntry(payload={"message": "Started server process"}, severity="INFO", timestamp=T0)
    assert entry_to_logline(s).message == "Started server process"
    odd = TextEntry(payload="x", severity="NOT-A-LEVEL", timestamp=None)
    assert entry_to_logline(odd).severity == "DEFAULT"


# --- against the sandbox (the official client over REST) ----------------------------------------------

from sandbox.server import start_sandbox  # noqa: E402
from sandbox.testing import TEST_TIME_SCALE  # noqa: E402


def test_list_entries_from_the_sandbox() -> None:
    with start_sandbox(scenario="reference-weights-oom", time_scale=TEST_TIME_SCALE, zero_latency=True) as sb:
        _check_entries(sb)


def _check_entries(sb: object) -> None:
    s = Settings(**sb.settings_fields())
    cl = CloudLogging(s)
    lines = cl.list_entries("gemma-4-12b", since="3h", limit=5000)
    assert lines and any("CUDA out of memory" in ln.message for ln in lines)
    stamps = [ln.timestamp for ln in lines]
    assert stamps == sorted(stamps)  # oldest first
    errors = cl.list_entries("gemma-4-12b", since="3h", severity="ERROR", limit=5000)
    assert errors and all(ln.severity in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY") for ln in errors)
    assert len(errors) < len(lines)
    oom = cl.list_entries("gemma-4-12b", since="3h", text_filter="out of memory", limit=5000)
    assert oom and all("out of memory" in ln.message.lower() for ln in oom)
    few = cl.list_entries("gemma-4-12b", since="3h", limit=3)
    assert len(few) == 3 and few[-1].timestamp == lines[-1].timestamp  # the newest three
    assert cl.list_entries("other-service", since="3h") == []


def test_a_status_or_latency_is_searched_as_a_request_log_shows_it() -> None:
    from mcp_tools.cloudlogging import text_restriction

    assert "httpRequest.status=(503)" in text_restriction("503")
    assert "httpRequest.status=(150 OR 250 OR 350 OR 450 OR 500 OR" in text_restriction("50")
    assert "httpRequest.latency:*" in text_restriction("0.25s")  # a duration: named by presence only
    plain = text_restriction("CUDA out of memory")
    assert "httpRequest.status" not in plain and "httpRequest.latency" not in plain
