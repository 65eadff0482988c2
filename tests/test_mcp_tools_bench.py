"""The benchmark engine against the simulated vLLM endpoint (real HTTP, real server, injected faults)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mcp_tools.bench import BenchConfig, compare_runs, parse_slo, run_benchmark
from mcp_tools.bench.config import parse_int_list
from mcp_tools.bench.prompts import PromptFactory
from mcp_tools.bench.stats import Sample, dist, summarize
from mcp_tools.endpoint import tls_context
from mcp_tools.errors import UserError
from sandbox.faults import FaultInjector
from sandbox.serve import start_in_thread
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from sandbox.vllm_sim.app import VllmSim
from sandbox.vllm_sim.config import SimConfig
from sandbox.vllm_sim.tokenizer import tokenize

MODEL = "google/gemma-4-12B-it"


@pytest.fixture(scope="module")
def instant() -> Iterator[tuple[str, FaultInjector]]:
    """A zero-latency sim (answers at once) with a fault injector."""
    faults = FaultInjector()
    sim = VllmSim(
        SimConfig(served_model_name=MODEL, max_model_len=4096, kv_cache_tokens=1_000_000, zero_latency=True),
        faults,
    )
    url, stop = start_in_thread(sim.app)
    try:
        yield url, faults
    finally:
        stop()


def _cfg(url: str, **kw: object) -> BenchConfig:
    base: dict[str, object] = {
        "url": url,
        "context_lengths": [32],
        "output_tokens": 8,
        "requests_per_point": 10,
        "warmup_requests": 0,
        "write_output": False,
        "seed": 7,
    }
    base.update(kw)
    return BenchConfig(**base)  # type: ignore[arg-type]


def test_measured_ttft_itl_tpot_and_e2e_are_the_injected_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """TTFT 200 ms and 20 ms per token, on a simulated clock: the benchmark must measure exactly them.

    The server streams one token per chunk over real HTTP and moves the simulated clock on only after
    the client stamped the previous piece, so the truth is known and the machine's load cannot move
    it (a wall-clock version of this test failed about one run in three on a busy machine)."""
    import mcp_tools.bench.client as bench_client
    from tests.scripted_openai import ScriptedOpenAI, SimClock

    clock = SimClock()
    monkeypatch.setattr(bench_client, "perf_counter", clock)
    reply = {"content": " ".join(f"t{i}" for i in range(8))}  # 8 tokens
    with ScriptedOpenAI([reply], model=MODEL, tokens_per_chunk=1, ttft_s=0.2, gap_s=0.02, clock=clock) as srv:
        cfg = _cfg(srv.root, concurrencies=[1], requests_per_point=6, warmup_requests=1, endpoint="chat")
        result = asyncio.run(run_benchmark(cfg))
    (p,) = result.points
    assert p.ok == 6 and p.mean_output_tokens == 8
    assert p.ttft.p50 == pytest.approx(0.2) and p.ttft.max == pytest.approx(0.2), p.ttft
    assert p.itl.mean == pytest.approx(0.02) and p.itl.max == pytest.approx(0.02), p.itl
    assert p.tpot.mean == pytest.approx(0.02), p.tpot
    assert p.e2e.mean == pytest.approx(0.2 + 7 * 0.02), p.e2e


def test_prompts_are_unique_and_exact(instant: tuple[str, FaultInjector]) -> None:
    url, _ = instant

    async def build(shared: bool, chat: bool) -> list:
        async with httpx.AsyncClient(base_url=url, verify=tls_context()) as c:
            f = PromptFactory(
                c, model=MODEL, chat=chat, shared_prefix=shared, exact=True, rng=random.Random(1)
            )
            return await f.make_many(48, 150)

    prompts = asyncio.run(build(False, True))
    assert all(p.exact and p.tokens == 48 for p in prompts)
    # no two prompts share even their first token (the tag), so nothing is cacheable across requests
    firsts = [tokenize(p.text)[:1] for p in prompts]
    assert len({tuple(x) for x in firsts}) == len(prompts)
    # the server agrees on the length, chat template included
    counts = {
        httpx.post(
            f"{url}/tokenize", json={"messages": [{"role": "user", "content": p.text}]}, verify=tls_context()
        ).json()["count"]
        for p in prompts[:10]
    }
    assert counts == {48}
    shared = asyncio.run(build(True, False))
    assert all(p.tokens == 48 for p in shared)
    assert len({p.text for p in shared}) == len(shared)
    assert len({tuple(tokenize(p.text)[:20]) for p in shared}) == 1  # a common cacheable prefix


def test_usage_prompt_tokens_match_the_asked_context(instant: tuple[str, FaultInjector]) -> None:
    url, _ = instant
    result = asyncio.run(
        run_benchmark(_cfg(url, endpoint="completions", context_lengths=[8, 300], concurrencies=[2, 4]))
    )
    assert [(p.context_tokens, p.level) for p in result.points] == [
        (8, 2),
        (8, 4),
        (300, 2),
        (300, 4),
    ] or all("saturated" in s for s in result.stopped)
    for s in result.samples:
        assert s.ok and s.prompt_tokens == s.context_tokens and s.output_tokens == 8


def test_errors_are_counted_by_type(instant: tuple[str, FaultInjector]) -> None:
    url, faults = instant
    path = "/v1/chat/completions"
    faults.inject(path, "status", 503, count=3)
    faults.inject(path, "drop", count=2, after_tokens=2)
    faults.inject(path, "hang", count=1)
    try:
        result = asyncio.run(
            run_benchmark(
                _cfg(
                    url,
                    concurrencies=[1],
                    requests_per_point=10,
                    request_timeout_s=0.5,
                    error_budget=1.0,
                )
            )
        )
    finally:
        faults.clear()
    assert result.errors == {"http_503": 3, "connection_dropped": 2, "timeout": 1}
    (p,) = result.points
    assert p.requests == 10 and p.ok == 4 and p.success_rate == pytest.approx(0.4)
    bad = [s for s in result.samples if s.error == "http_503"]
    assert all(s.status == 503 and "Injected fault" in (s.error_detail or "") for s in bad)


def test_error_budget_stops_the_sweep(instant: tuple[str, FaultInjector]) -> None:
    url, faults = instant
    faults.inject("/v1/chat/completions", "status", 500, count=None)
    try:
        result = asyncio.run(run_benchmark(_cfg(url, concurrencies=[1, 2, 4], requests_per_point=4)))
    finally:
        faults.clear()
    assert [p.level for p in result.points] == [1]
    assert result.errors == {"http_500": 4}
    assert result.stopped and "error budget" in result.stopped[0]


def test_rate_mode_spreads_arrivals(instant: tuple[str, FaultInjector]) -> None:
    url, _ = instant
    result = asyncio.run(run_benchmark(_cfg(url, mode="rate", rates=[40.0], requests_per_point=20)))
    starts = sorted(s.start_s for s in result.samples)
    assert len(starts) == 20 and all(s.ok for s in result.samples)
    assert 0.2 < starts[-1] < 2.0  # 19 gaps at 40 req/s average 0.475 s


def test_goodput_and_percentiles_by_hand() -> None:
    def s(ttft: float, tpot: float, ok: bool = True) -> Sample:
        return Sample(
            point=0, context_tokens=8, level=1, start_s=0, ok=ok, ttft_s=ttft, tpot_s=tpot,
            e2e_s=ttft + tpot * 9, prompt_tokens=8, output_tokens=10, error=None if ok else "http_503",
        )  # fmt: skip

    samples = [s(0.4, 0.04), s(0.6, 0.04), s(0.3, 0.06), s(0.1, 0.01, ok=False)]
    slo = parse_slo("ttft=500ms,tpot=50ms")
    assert slo.ttft_s == 0.5 and slo.tpot_s == 0.05
    p = summarize(samples, point=0, context_tokens=8, mode="concurrency", level=1, slo=slo, duration_s=2.0)
    assert p.goodput == pytest.approx(0.5)  # only the first request met both SLOs: 1 / 2 s
    assert p.goodput_fraction == pytest.approx(0.25)
    assert p.request_throughput == pytest.approx(1.5)
    assert p.output_token_throughput == pytest.approx(15.0)
    assert p.errors == {"http_503": 1}
    d = dist([1.0, 2.0, 3.0, 4.0])
    assert (d.mean, d.p50, d.p90, d.p99, d.max) == pytest.approx((2.5, 2.5, 3.7, 3.97, 4.0))
    with pytest.raises(UserError):
        parse_slo("ttft=fast")
    assert parse_int_list("1..16,3", "--concurrency") == [1, 2, 3, 4, 8, 16]


def test_run_folder_written_never_overwritten_and_compare(
    tmp_path: Path, instant: tuple[str, FaultInjector]
) -> None:
    url, _ = instant
    cfg = _cfg(
        url,
        concurrencies=[1, 2],
        write_output=True,
        output_dir=tmp_path,
        label="same",
        slo=parse_slo("ttft=1s"),
    )
    first = asyncio.run(run_benchmark(cfg))
    second = asyncio.run(run_benchmark(cfg))
    assert first.run_dir and second.run_dir and first.run_dir != second.run_dir
    for run_dir in (first.run_dir, second.run_dir):
        d = Path(run_dir)
        for name in ("run.json", "samples.csv", "points.csv", "summary.md", "throughput.png", "latency.png"):
            assert (d / name).stat().st_size > 0, name
        assert (d / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        doc = json.loads((d / "run.json").read_text())
        assert len(doc["samples"]) == sum(p["requests"] for p in doc["points"]) == 20
        assert doc["metadata"]["model"] == MODEL and doc["metadata"]["client"]["httpx"]
        assert doc["metadata"]["config"]["concurrencies"] == [1, 2]
        summary = (d / "summary.md").read_text()
        assert "| 32 | 1 |" in summary and "- 32-token prompts: peak" in summary and "best goodput" in summary
    first_json = (Path(first.run_dir) / "run.json").read_text()
    assert json.loads(first_json)["metadata"]["started_at"] == first.metadata.started_at  # untouched

    cmp = compare_runs(first.run_dir, second.run_dir, output_dir=tmp_path)
    assert {(r.context_tokens, r.level) for r in cmp.rows} == {(32, 1.0), (32, 2.0)}
    assert any(r.metric == "req/s" and r.a and r.b for r in cmp.rows)
    assert cmp.output_dir and (Path(cmp.output_dir) / "compare.png").stat().st_size > 0

    from agent.cli import app

    out = CliRunner().invoke(
        app, ["bench", "compare", first.run_dir, second.run_dir, "--output-dir", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    assert "TTFT p50 ms" in out.output and "comparison chart" in out.output
    bad = CliRunner().invoke(app, ["bench", "compare", str(tmp_path / "nope"), second.run_dir])
    assert isinstance(bad.exception, UserError)


def test_cli_sandbox_run(tmp_path: Path) -> None:
    from agent.cli import app

    args = [
        "bench",
        "--sandbox",
        "--sandbox-zero-latency",
        "-c",
        "1,2",
        "--context",
        "16",
        "--output-tokens",
        "4",
    ]
    args += ["-n", "4", "--warmup", "0", "--output-dir", str(tmp_path), "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["run_dir"] and (Path(doc["run_dir"]) / "run.json").exists()
    assert [p["level"] for p in doc["points"]] == [1, 2] or doc["stopped"]
    bad = CliRunner().invoke(app, ["bench", "--sandbox", "--slo", "ttft=soon"])
    assert isinstance(bad.exception, UserError)


def test_client_over_tls_and_after_keepalive_timeout(tmp_path: Path) -> None:
    """The timed client speaks TLS (Cloud Run is https) and survives the server closing idle
    keep-alive connections between requests."""
    import shutil
    import ssl
    import subprocess
    import time

    from yarl import URL

    from mcp_tools.bench.client import make_session, send_streaming

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    cfg = SimConfig(served_model_name=MODEL, max_model_len=512, kv_cache_tokens=10_000, zero_latency=True)
    url, stop = start_in_thread(
        VllmSim(cfg).app,
        uvicorn_options={"ssl_certfile": str(cert), "ssl_keyfile": str(key), "timeout_keep_alive": 1},
    )
    https = url.replace("http://127.0.0.1", "https://localhost") + "/v1/completions"
    ctx = ssl.create_default_context(cafile=str(cert))
    body = json.dumps(
        {
            "model": MODEL,
            "prompt": "hello",
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()

    async def main() -> list[Sample]:
        out = []
        async with make_session(https, 4, 5.0, ssl_context=ctx) as session:
            for pause in (0.0, 0.0, 1.6):  # the last request follows the server's 1 s keep-alive timeout
                await asyncio.sleep(pause)
                out.append(
                    await send_streaming(
                        session,
                        URL(https),
                        body,
                        {"content-type": "application/json"},
                        chat=False,
                        point=0,
                        context_tokens=2,
                        level=1,
                        t_point=time.perf_counter(),
                    )  # fmt: skip
                )
        return out

    try:
        samples = asyncio.run(main())
    finally:
        stop()
    assert [s.ok for s in samples] == [True, True, True], [s.error_detail for s in samples]
    assert all(s.output_tokens == 3 and s.chunks == 3 for s in samples)


@pytest.mark.slow
def test_sweep_stops_at_saturation() -> None:
    """max_num_seqs=2: throughput stops growing past concurrency 2, so the sweep stops after 4.

    Steps of 60 ms, not 5 or 20: a busy machine's scheduling delays (tens of ms with the load average at
    8 on two cores) made concurrency 4 look faster than 2 at 20 ms; at 60 ms they are noise."""
    cfg = SimConfig(
        served_model_name=MODEL, max_model_len=512, max_num_seqs=2, kv_cache_tokens=10_000, ttft_base_s=0.12,
        itl_s=0.06,
    )  # fmt: skip
    url, stop = start_in_thread(VllmSim(cfg).app)
    try:
        result = asyncio.run(run_benchmark(_cfg(url, concurrencies=[1, 2, 4, 8, 16], requests_per_point=8)))
    finally:
        stop()
    assert [p.level for p in result.points] == [1, 2, 4]
    assert len(result.stopped) == 1 and "saturated" in result.stopped[0]
    one, two, four = result.points
    assert two.output_token_throughput > 1.6 * one.output_token_throughput
    assert (
        four.ttft.p50 is not None and two.ttft.p50 is not None and four.ttft.p50 > 2 * two.ttft.p50
    )  # queueing


def test_wire_faults_the_sim_cannot_make() -> None:
    """Connection resets (before and mid-stream), an error event in the stream, a bad status line and
    ``\\r\\n`` SSE framing split across pieces, from a raw socket server."""
    import socket
    import struct
    import time

    from yarl import URL

    from mcp_tools.bench.client import make_session, send_streaming

    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    tok = b'data: {"choices":[{"index":0,"text":"a"}]}\n\n'

    def chunk(b: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(b), b)

    crlf = (
        b'data: {"choices":[{"index":0,"text":"a"}]}\r\n\r\n: keep-alive\r\n\r\n'
        b'data: {"choices":[{"index":0,"text":"b"}]}\r\n\r\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\r\n\r\ndata: [DONE]\r\n\r\n'
    )
    replies = {
        "reset_mid_stream": head + chunk(tok),
        "reset_before": b"",
        "error_event": head
        + chunk(tok + b'data: {"error":{"message":"boom"}}\n\ndata: [DONE]\n\n')
        + b"0\r\n\r\n",
        "bad_status": b"SSH-2.0-OpenSSH\r\n\r\n",
        "crlf": head + b"".join(chunk(crlf[i : i + 7]) for i in range(0, len(crlf), 7)) + b"0\r\n\r\n",
    }

    async def main() -> dict[str, Sample]:
        out = {}
        for mode in replies:

            async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, mode: str = mode) -> None:
                await r.readuntil(b"\r\n\r\n")
                w.write(replies[mode])
                await w.drain()
                if mode.startswith("reset"):
                    await asyncio.sleep(0.05)
                    w.get_extra_info("socket").setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    w.transport.abort()  # type: ignore[attr-defined]
                else:
                    w.close()

            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/completions"
            async with server, make_session(url, 1, 5.0) as session:
                out[mode] = await send_streaming(
                    session, URL(url), b"{}", {}, chat=False, point=0, context_tokens=3, level=1,
                    t_point=time.perf_counter(),
                )  # fmt: skip
        return out

    got = asyncio.run(main())
    assert {m: s.error for m, s in got.items()} == {
        "reset_mid_stream": "connection_reset",
        "reset_before": "connection_reset",
        "error_event": "server_error",
        "bad_status": "protocol_error",
        "crlf": None,
    }
    assert got["error_event"].error_detail == "boom" and got["reset_mid_stream"].chunks == 1
    ok = got["crlf"]
    assert ok.ok and ok.chunks == 2 and len(ok.itl_s) == 1 and ok.output_tokens == 2 and ok.prompt_tokens == 3


def test_bench_service_resolves_the_cloud_run_url(
    tmp_path: Path,
    sandbox_factory: Any,  # noqa: F811
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`gemma-sre bench --service NAME` reads the service's URL from the Cloud Run API and loads it."""
    from sandbox.testing import sandbox_env

    sb = sandbox_factory(scenario="healthy")
    for name, value in sandbox_env(sb).items():
        monkeypatch.setenv(name, value)
    args = ["bench", "--service", sb.service, "-c", "2", "--context", "64"]
    args += ["--output-tokens", "4", "-n", "4", "--warmup", "0", "--output-dir", str(tmp_path), "--json"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert sb.service in doc["metadata"]["url"]
    assert doc["points"][0]["success_rate"] == 1.0 and doc["points"][0]["ok"] == 4
    assert doc["run_dir"] and Path(doc["run_dir"], "run.json").is_file()

    missing = cli(*args[:2], "no-such-service")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "no-such-service" in missing.stderr
