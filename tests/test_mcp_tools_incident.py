"""The incident loader's limits, its streaming of YAML and JSON Lines, and a property-based suite."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tools import incident as inc_mod
from mcp_tools.errors import UserError
from mcp_tools.incident import _load_yaml_whole, load_incident
from sandbox.testing import sandbox_env, sandbox_factory  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parent.parent

HEAD = "id: t\ntitle: a test\n"

# The 596-byte bomb of issue 12: nine levels of nine aliases under a structured payload.
BOMB = (
    HEAD
    + "logs:\n  - severity: ERROR\n    json:\n"
    + '      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"      {chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
)


def _write(tmp_path: Path, text: str, name: str = "inc.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _refused(p: Path, needle: str) -> str:
    with pytest.raises(UserError) as e:
        load_incident(p)
    msg = str(e.value)
    assert str(p) in msg and needle in msg and "\n" not in msg
    return msg


def test_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    p = _write(tmp_path, BOMB)
    t0 = time.perf_counter()
    _refused(p, "alias")
    assert time.perf_counter() - t0 < 2


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path: Path) -> None:
    _refused(_write(tmp_path, HEAD + "logs:\n  - json: &a {x: *a}\n"), "recursive")
    deep = HEAD + "logs:\n  - json: {x: " + "[" * 500 + "]" * 500 + "}\n"
    _refused(_write(tmp_path, deep, "deep.yaml"), "nested")


def test_the_nesting_limit_is_the_same_with_and_without_an_alias_in_the_text(tmp_path: Path) -> None:
    # A document with no ``*`` has no alias, and only its depth is walked; one with a ``*`` anywhere (here
    # in a comment) takes the full alias check. Both draw the line at the same level: the log chunk's
    # sequence, its entry, ``json`` and 97 lists are 100 levels.
    for comment in ("", "# a * in a comment\n"):
        for n, fits in ((97, True), (98, False)):
            p = _write(tmp_path, HEAD + comment + "logs:\n  - json: {x: " + "[" * n + "]" * n + "}\n")
            if fits:
                assert len(load_incident(p).logs) == 1
            else:
                _refused(p, "nested deeper than the limit of 100 levels")


def test_a_few_aliases_still_load(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD + "common: &c {severity: ERROR, text: boom}\nlogs:\n  - *c\n  - *c\n")
    assert [ln.message for ln in load_incident(p).logs] == ["boom", "boom"]


def test_dev_zero_fifo_and_directory_are_refused(tmp_path: Path) -> None:
    _refused(Path("/dev/zero"), "not a regular file")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    _refused(fifo, "not a regular file")  # and does not block opening it
    _refused(tmp_path, "cannot read")


def test_a_50_mb_single_line_is_refused_without_reading_it(tmp_path: Path) -> None:
    p = tmp_path / "long.yaml"
    with p.open("w") as f:
        f.write(HEAD + "logs:\n  - text: ")
        f.write("x" * 50_000_000)
    t0 = time.perf_counter()
    _refused(p, "longer than the limit of 4 MiB")
    assert time.perf_counter() - t0 < 5


def test_file_size_entries_and_entry_text_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path, HEAD + "logs:\n" + "  - {text: hello}\n" * 20)
    monkeypatch.setattr(inc_mod, "MAX_FILE_BYTES", 100)
    _refused(p, "larger than the limit")
    monkeypatch.setattr(inc_mod, "MAX_FILE_BYTES", 2**20)
    monkeypatch.setattr(inc_mod, "MAX_LOG_ENTRIES", 10)
    _refused(p, "more than the limit of 10 log entries")
    j = _write(tmp_path, '{"id": "t", "title": "x"}\n' + '{"text": "a"}\n' * 11, "inc.jsonl")
    _refused(j, "more than the limit of 10 log entries")
    monkeypatch.setattr(inc_mod, "MAX_ENTRY_CHARS", 8)
    _refused(_write(tmp_path, HEAD + "logs:\n  - {text: abcdefghij}\n", "t.yaml"), "characters")
    _refused(_write(tmp_path, HEAD + "logs:\n  - json: {message: '123456789'}\n", "j.yaml"), "characters")


def test_jsonl_incident_loads_like_its_yaml(tmp_path: Path) -> None:
    src = ROOT / "evals" / "incidents"
    yml = sorted(src.rglob("*.yaml"))[0]
    a = load_incident(yml)
    doc = a.model_dump(by_alias=True, exclude={"path"}, exclude_none=True)
    logs = doc.pop("logs")
    j = tmp_path / "same.jsonl"
    j.write_text("\n".join(json.dumps(x) for x in [doc, *logs]) + "\n", encoding="utf-8")
    b = load_incident(j)
    assert b.model_dump(exclude={"path"}) == a.model_dump(exclude={"path"})


def test_jsonl_errors_are_one_line(tmp_path: Path) -> None:
    _refused(_write(tmp_path, '{"id": "t", "title": "x", "logs": []}\n', "a.jsonl"), "no 'logs'")
    _refused(_write(tmp_path, '{"id": "t", "title": "x"}\n{"text": \n', "b.jsonl"), "line 2 is not a JSON")
    _refused(
        _write(tmp_path, '{"id": "t", "title": "x"}\n{"severity": "LOUD"}\n', "c.jsonl"), "logs.0.severity"
    )
    _refused(_write(tmp_path, "", "d.jsonl"), "empty")


def test_streamed_yaml_equals_the_whole_document_on_the_library() -> None:
    files = sorted((ROOT / "evals").rglob("*.yaml"))
    assert len(files) > 100
    for f in files:
        assert load_incident(f).model_dump() == _load_yaml_whole(f).model_dump(), f


def test_service_counts_may_not_be_negative(tmp_path: Path) -> None:
    _refused(_write(tmp_path, HEAD + "service: {gpu_count: -3}\nlogs: []\n"), "service.gpu_count")


# Property-based: whatever the bytes, the loader answers an Incident or one UserError, quickly.

_LOG = st.fixed_dictionaries(
    {},
    optional={
        "severity": st.sampled_from(["INFO", "ERROR", "warn", "LOUD", 3, None]),
        "text": st.one_of(st.text(max_size=200), st.integers(), st.none()),
        "json": st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=3),
        "timestamp": st.text(max_size=30),
    },
)


@settings(
    max_examples=150,
    deadline=None,  # a verdict on wall-clock time fails on a busy machine
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=st.binary(max_size=2000))
def test_any_bytes_load_or_fail_in_one_line(tmp_path: Path, raw: bytes) -> None:
    for name in ("h.yaml", "h.jsonl"):
        p = tmp_path / name
        p.write_bytes(raw)
        try:
            load_incident(p)
        except UserError as e:
            assert "\n" not in str(e) and str(p) in str(e)


@settings(
    max_examples=100,
    deadline=None,  # a verdict on wall-clock time fails on a busy machine
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(logs=st.lists(_LOG, max_size=30), style=st.sampled_from([False, None]), indent=st.integers(2, 6))
def test_streamed_and_whole_yaml_agree(
    tmp_path: Path, logs: list[dict], style: bool | None, indent: int
) -> None:
    text = yaml.safe_dump(
        {"id": "p", "title": "t", "logs": logs, "metrics": "m 1"},
        default_flow_style=style,
        indent=indent,
        sort_keys=False,
    )
    p = _write(tmp_path, text)
    try:
        whole = _load_yaml_whole(p).model_dump()
    except UserError as e:
        with pytest.raises(UserError) as got:
            load_incident(p)
        assert str(got.value) == str(e)
        return
    assert load_incident(p).model_dump() == whole


# -- a structured payload's record text -------------------------------------------------------------


def test_a_json_payload_is_found_and_printed_whatever_its_key_order(
    sandbox_factory: Any,  # noqa: F811
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``LogLine.record_text`` of a structured payload is the text ``gemma-sre logs`` prints and the
    text its ``--filter`` is matched against (``CloudLogging.list_entries``): one text per payload, so
    the order its keys came in (the writer's, the API's) changes neither what is found nor what is shown,
    a redacted payload included."""
    from mcp_tools.incident import LogLine

    sb = sandbox_factory(scenario="healthy")
    for k, v in sandbox_env(sb).items():
        monkeypatch.setenv(k, v)
    service = "gemma-4-12b"
    monkeypatch.setenv("GEMMA_SRE_SERVICE", service)
    secret = "hf_" + "Q7xK2mP9vL4nR8sT1wY6zB3cD5fG0hJ"
    payloads = [
        {"zid": "a", "message": "kv pool drained", "level": "warning"},  # keys against their order
        {"level": "warning", "message": "kv pool drained", "zid": "b"},  # keys in their order
        {"zid": "c", "token": secret, "message": "kv pool drained", "level": "warning"},  # redacted
        {"zid": "d", "message": "kv pool drained at the café", "level": "warning"},  # words, not escapes
    ]
    now = sb.clock.now_s()
    for i, payload in enumerate(payloads):
        sb.write_log(service, timestamp=now - 1 + i * 0.01, severity="WARNING", json_payload=payload)
    first = payloads[0]
    assert LogLine(json=first).record_text == LogLine(json=dict(reversed(first.items()))).record_text

    def records(text: str) -> list[str]:
        r = cli("logs", "--since", "1h", "--filter", text, "--json")
        assert r.returncode == 0, r.stderr
        return [rec["text"] for rec in json.loads(r.stdout)["records"]]

    across = '"level": "warning", "message": "kv pool drained"'  # two fields, as the record shows them
    found = records(across)
    assert [json.loads(t)["zid"] for t in found] == ["a", "b", "c"], found
    assert all(across in t for t in found)  # what was matched is what is printed
    assert found[:2] == [LogLine(json=p).record_text for p in payloads[:2]]
    assert secret not in found[2] and records(secret[:12]) == []
    assert [json.loads(t)["zid"] for t in records("café")] == ["d"]  # not matched as caf\\u00e9
