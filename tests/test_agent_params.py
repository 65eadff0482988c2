"""Bad input on the command line and in the environment: one clear line on stderr and exit 2, never a
traceback nor an "unexpected" error (issue 12, sections 4 and 5). In-process through the ``cli`` fixture."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tools.errors import UserError
from mcp_tools.numbers import check_number

ROOT = Path(__file__).resolve().parent.parent
INCIDENT = str(sorted((ROOT / "evals" / "incidents").rglob("*.yaml"))[0])
PLAN = ("plan", "google/gemma-4-12B-it", "--gpu", "nvidia-l4")


def one_clear_line(r: object) -> None:
    code, err = r.returncode, r.stderr  # type: ignore[attr-defined]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "unexpected" not in err, err


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The files the bad inputs name, written once for the module (one is 50 MB); none is written to."""
    tmp_path = tmp_path_factory.mktemp("bad-input")
    bomb = tmp_path / "bomb.yaml"
    from test_mcp_tools_incident import BOMB

    bomb.write_text(BOMB)
    neg = tmp_path / "neg.yaml"
    neg.write_text("id: n\ntitle: t\nservice: {gpu_count: -3}\nlogs: []\n")
    long = tmp_path / "long.yaml"
    long.write_text("id: n\ntitle: t\nlogs:\n  - text: " + "x" * 50_000_000)
    heads = tmp_path / "config.json"
    heads.write_text(
        json.dumps(
            {
                "architectures": ["Gemma3ForCausalLM"],
                "hidden_size": 2048,
                "num_hidden_layers": 4,
                "num_attention_heads": 0,
                "num_key_value_heads": 0,
                "vocab_size": 1000,
            }
        )
    )
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not an SQLite database" * 100)
    return {
        "bomb": str(bomb),
        "neg": str(neg),
        "long": str(long),
        "heads": str(heads),
        "afile": str(afile),
    } | {"corrupt": str(corrupt)}


# (environment, argv); {name} is replaced by a file of bad_files.
BAD: list[tuple[dict[str, str], tuple[str, ...]]] = [
    ({}, ("eval", "--repeat", "1e20")),
    ({}, ("eval", "--repeat", "100000000000000000000")),
    ({}, ("eval", "--repeat", "0")),
    ({}, ("bench", "--sandbox", "-c", "100000")),
    ({}, ("bench", "--sandbox", "--rate", "nan")),
    ({}, ("bench", "--sandbox", "--rate", "inf")),
    ({}, ("bench", "--sandbox", "-n", "nan")),
    ({}, ("bench", "--sandbox", "-n", "0")),
    ({}, ("bench", "--sandbox", "--sandbox-time-scale", "0")),
    ({}, ("bench", "--sandbox", "--sandbox-time-scale", "nan")),
    ({}, ("bench", "--sandbox", "--timeout", "-1")),
    ({}, ("watch", "--sandbox", "--interval", "1e20h")),
    ({}, ("watch", "--sandbox", "--interval", "nan")),
    ({}, ("watch", "--sandbox", "--interval", "infs")),
    ({}, ("sandbox", "--time-scale", "nan")),
    ({}, ("sandbox", "--time-scale", "0")),
    ({}, ("sandbox", "--port", "99999")),
    ({}, (*PLAN, "--gpu-memory-gib", "nan")),
    ({}, ("plan", "google/gemma-4-12B-it", "--gpu-memory-gib", "inf")),
    ({}, ("plan", "google/gemma-4-12B-it", "--gpu-memory-gib", "-1")),
    ({}, (*PLAN, "--gpu-count", "-3")),
    ({}, (*PLAN, "--gpu-memory-utilization", "nan")),
    ({}, (*PLAN, "--max-model-len", "1e400")),
    ({}, (*PLAN, "--max-model-len", "9e999.5")),
    ({}, ("plan", "{heads}", "--gpu", "nvidia-l4")),
    ({"GEMMA_SRE_POLICY": "yolo"}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_AUTO_KINDS": '["delete_service"]'}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_AUTO_KINDS": "delete_service"}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_AUTO_KINDS": '["escalate"]'}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_MCP_CONFIRM_TTL_S": "nan"}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_MCP_CONFIRM_TTL_S": "-5"}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_MCP_TOKEN": "   "}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_MODEL_URL": "ftp://x"}, ("diagnose", "--incident", INCIDENT)),
    ({"GEMMA_SRE_MODEL_TIMEOUT_S": "inf"}, ("diagnose", "--incident", INCIDENT)),
    ({}, ("diagnose", "--incident", INCIDENT, "--model-url", "ftp://x")),
    ({}, ("run", "--sandbox", "--no-model", "--model-url", "ftp://x")),
    ({}, ("run", "--sandbox", "--scenario", "no-such-scenario")),
    ({}, ("diagnose", "--incident", "/dev/zero")),
    ({}, ("diagnose", "--incident", "{bomb}")),
    ({}, ("diagnose", "--incident", "{long}")),
    ({}, ("diagnose", "--incident", "{neg}")),
    ({"GEMMA_SRE_STATE_DIR": "{afile}"}, ("run", "--sandbox", "--no-model", "--policy", "suggest")),
    ({"GEMMA_SRE_CHECKPOINT_URL": "{corrupt}"}, ("run", "--sandbox", "--no-model", "--policy", "suggest")),
    (
        {"GEMMA_SRE_CHECKPOINT_URL": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"},
        ("run", "--sandbox", "--no-model", "--policy", "suggest"),
    ),
]


@pytest.mark.parametrize(("env", "argv"), BAD, ids=[" ".join(a)[:60] + str(sorted(e)) for e, a in BAD])
def test_bad_input_is_one_clear_line_and_exit_2(
    cli: Callable[..., object],
    monkeypatch: pytest.MonkeyPatch,
    bad_files: dict[str, str],
    env: dict[str, str],
    argv: tuple[str, ...],
) -> None:
    files = bad_files
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(**files))
    one_clear_line(cli(*(a.format(**files) if a.startswith("{") else a for a in argv)))


def test_check_number_refuses_nan_inf_and_range() -> None:
    for bad in ("nan", "inf", "-inf", "1e999", "x", "", float("nan"), True):
        with pytest.raises(UserError):
            check_number(bad, "--x", lo=0, hi=10)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="out of range"):
        check_number(11, "--x", lo=0, hi=10)
    with pytest.raises(UserError, match="out of range"):
        check_number(0, "--x", lo=0, lo_open=True)
    assert check_number("2.0", "--n", integer=True) == 2


_NUMBERISH = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", "0x10", "", " ", "1_0", "½", "1e20h", "--"]),
    st.text(max_size=12),
)


@settings(
    max_examples=80,
    deadline=None,  # a verdict on wall-clock time fails on a busy machine
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    flag=st.sampled_from(["--gpu-memory-gib", "--gpu-count", "--gpu-memory-utilization", "--max-model-len"]),
    value=_NUMBERISH,
)
def test_plan_numbers_property(cli: Callable[..., object], flag: str, value: str) -> None:
    """Whatever the number, ``plan`` answers (exit 0) or refuses it in one line (exit 2)."""
    if value.startswith("-") and flag != "--max-model-len":
        value = value  # typer reads "-x" as an option: still one line
    r = cli(*PLAN, f"{flag}={value}")
    if r.returncode != 0:  # type: ignore[attr-defined]
        one_clear_line(r)
    else:
        v = value.strip()
        assert not (v.lower() in ("nan", "inf", "-inf") or (v and _is_non_finite(v)))


def _is_non_finite(v: str) -> bool:
    try:
        return not math.isfinite(float(v))
    except ValueError:
        return False


@settings(
    max_examples=40,
    deadline=None,  # a verdict on wall-clock time fails on a busy machine
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    argv=st.lists(
        # not "-n": a valid one after the guard ("-n 0 ... -n 80") would win and start a real benchmark
        st.one_of(st.sampled_from(["--repeat", "--interval", "-c", "--rate"]), _NUMBERISH),
        max_size=4,
    )
)
def test_watch_and_bench_options_property(cli: Callable[..., object], argv: list[str]) -> None:
    """Random option soup to commands that would otherwise start work: a bad value is one line."""
    for cmd in (("watch", "--sandbox", "--max-cycles", "0"), ("bench", "--sandbox", "-n", "0")):
        one_clear_line(cli(*cmd, *argv))


async def test_mcp_tool_numbers_are_bounded_by_cloud_run(tmp_path: Path) -> None:
    """``update_vllm_scaling max_instances=1000000000`` is refused before any API call, NaN too."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server
    from mcp_tools.settings import Policy, Settings

    settings = Settings(state_dir=tmp_path, policy=Policy.APPROVE, service="vllm")
    async with create_connected_server_and_client_session(build_server(settings)) as session:
        for args in (
            {"min_instances": 0, "max_instances": 1_000_000_000},
            {"min_instances": -1, "max_instances": 2},
            {"min_instances": 0, "max_instances": 2, "concurrency": 100_000},
            {"min_instances": 0, "max_instances": float("nan")},
        ):
            r = await session.call_tool("update_vllm_scaling", args)
            text = "\n".join(getattr(c, "text", "") for c in r.content)
            assert r.isError and (
                "less than or equal" in text or "greater than" in text or "integer" in text
            ), text


def _mcp_stdio(tmp_path: Path, data: bytes) -> tuple[int, str, str]:
    """``gemma-sre mcp`` fed ``data`` on stdin, then EOF: (exit code, stdout, stderr)."""
    import subprocess
    import sys

    from mcp_client import server_env

    r = subprocess.run(
        [sys.executable, "-m", "agent.cli", "mcp"],
        input=data,
        capture_output=True,
        env=server_env({}, tmp_path),
        cwd=ROOT,
        timeout=120,
    )
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def test_a_client_that_spoke_json_rpc_then_sent_a_stray_line_ends_normally(tmp_path: Path) -> None:
    """Bad input is an error only when it was all the session had: a client that initialized and then
    sent one line the SDK could not parse (the SDK logs and drops it) leaves with exit 0."""
    from mcp_client import INITIALIZE

    code, out, err = _mcp_stdio(tmp_path, (json.dumps(INITIALIZE) + "\nnot json-rpc\n").encode())
    assert code == 0, err[-2000:]
    assert json.loads(out.splitlines()[0])["id"] == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "junk",
    [
        pytest.param(random.Random(0).randbytes(4000), id="random-bytes"),
        pytest.param(b"GET / HTTP/1.1\nHost: localhost\n\n{not json}\n[1, 2]\n", id="utf8-not-json-rpc"),
    ],
)
def test_junk_on_mcp_stdio_ends_in_one_clear_line(tmp_path: Path, junk: bytes) -> None:
    """A client that sent only lines the SDK could not parse gets exit 2 and one line, whichever of the
    SDK's tasks ends first (its reader reports each bad line and the session drops it)."""
    code, _out, err = _mcp_stdio(tmp_path, junk)
    assert code == 2, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("error: MCP stdio:")
    assert "Traceback" not in err
