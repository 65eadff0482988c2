"""How fast can the benchmark client go? Its ceiling, against a server that answers instantly.

Starts the simulated vLLM endpoint in zero-latency mode in its own process, then measures, over
several runs, and prints medians:

- requests/s of our engine (``mcp_tools.bench``, aiohttp) at concurrency 256 (streaming chat, usage
  included);
- requests/s of a plain aiohttp loop written the way ``vllm bench serve`` writes its client
  (``aiohttp.ClientSession`` + ``TCPConnector(limit=C)``, iterate ``response.content`` lines,
  ``json.loads`` each ``data:`` line), in its own process (this interpreter unless
  ``--compare-python`` names another);
- optionally GuideLLM (``--guidellm PATH`` to its executable) against the same server;
- the client's added TTFT: at concurrency 1, our TTFT minus that of a minimal raw-socket client
  (hand-written HTTP/1.1 on asyncio streams), medians over the requests.

    python benchmarks/bench_client_ceiling.py --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _support import count, stop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_tools.bench import BenchConfig, run_benchmark  # noqa: E402

MODEL = "ceiling-model"

AIOHTTP_CLIENT = r"""
import asyncio, json, sys, time
import aiohttp

url, n, conc, out_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
payloads = [
    {"model": "ceiling-model",
     "messages": [{"role": "user", "content": f"q{i} tell me a story about the sea"}],
     "max_tokens": out_tokens, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    for i in range(n)
]

async def one(session, payload, out):
    st = time.perf_counter(); ttft = 0.0; last = st; tokens = 0; ok = False
    async with session.post(url + "/v1/chat/completions", json=payload) as response:
        if response.status == 200:
            async for chunk_bytes in response.content:
                chunk_bytes = chunk_bytes.strip()
                if not chunk_bytes:
                    continue
                chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                if chunk == "[DONE]":
                    ok = True
                    continue
                ts = time.perf_counter()
                data = json.loads(chunk)
                if choices := data.get("choices"):
                    if choices[0]["delta"].get("content"):
                        if ttft == 0.0:
                            ttft = ts - st
                elif usage := data.get("usage"):
                    tokens = usage.get("completion_tokens")
                last = ts
    out.append((ok, ttft, tokens))

async def main():
    sem = asyncio.Semaphore(conc)
    out = []
    connector = aiohttp.TCPConnector(limit=conc)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def limited(p):
            async with sem:
                await one(session, p, out)
        await asyncio.gather(*[limited(p) for p in payloads[:conc]])  # warm-up: open the connections
        out.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*[limited(p) for p in payloads])
        dt = time.perf_counter() - t0
    ok = [o for o in out if o[0]]
    ttfts = sorted(o[1] for o in ok)
    print(json.dumps({"requests": n, "ok": len(ok), "seconds": dt, "req_per_s": len(ok) / dt,
                      "ttft_p50": ttfts[len(ttfts) // 2] if ttfts else None}))

asyncio.run(main())
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "sandbox.vllm_sim", "--zero-latency", "--port", str(port)]
    cmd += ["--served-model-name", MODEL, "--max-num-seqs", "100000", "--kv-cache-tokens", "1000000000"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(
        f"the simulated server did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
    )


async def ours(url: str, n: int, conc: int, out_tokens: int) -> tuple[float, float | None]:
    cfg = BenchConfig(
        url=url,
        model=MODEL,
        concurrencies=[conc],
        context_lengths=[32],
        output_tokens=out_tokens,
        requests_per_point=n,
        seconds_per_point=600,
        warmup_requests=conc,
        exact_prompt_lengths=False,
        write_output=False,
        stop_on_saturation=False,
        error_budget=1.0,
    )
    result = await run_benchmark(cfg)
    (p,) = result.points
    if p.ok != p.requests:
        print(f"  warning: {p.requests - p.ok} of our requests failed: {p.errors}", file=sys.stderr)
    return p.request_throughput, p.ttft.p50


def _has_content(data: bytes) -> bool:
    return b'"content":"' in data.replace(b'"content":""', b"")


async def raw_ttft(host: str, port: int, n: int, out_tokens: int) -> float:
    """TTFT of a minimal client: hand-written HTTP/1.1 over one keep-alive asyncio stream."""
    reader, writer = await asyncio.open_connection(host, port)
    ttfts: list[float] = []
    for i in range(n):
        body = json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"r{i} tell me a story about the sea"}],
                "max_tokens": out_tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        t0 = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        first = None
        header = await reader.readuntil(b"\r\n\r\n")
        lowered = header.lower()
        if b"content-length:" in lowered:
            length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
            got = b""
            while len(got) < length:
                data = await reader.read(length - len(got))
                if first is None and _has_content(got + data):
                    first = time.perf_counter() - t0
                got += data
        else:  # chunked
            got = b""
            while not got.endswith(b"0\r\n\r\n"):
                data = await reader.read(65536)
                if not data:
                    raise RuntimeError("server closed the connection")
                if first is None and _has_content(got + data):
                    first = time.perf_counter() - t0
                got += data
        ttfts.append(first if first is not None else float("nan"))
    writer.close()
    return statistics.median(ttfts)


def aiohttp_run(python: str, url: str, n: int, conc: int, out_tokens: int) -> dict[str, float] | None:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(AIOHTTP_CLIENT)
        script = f.name
    try:
        out = subprocess.run(
            [python, script, url, str(n), str(conc), str(out_tokens)],
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        os.unlink(script)
    if out.returncode != 0:
        print(f"  aiohttp client failed: {out.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def guidellm_run(exe: str, url: str, n: int, conc: int, out_tokens: int) -> dict[str, float] | None:
    """GuideLLM (``guidellm run``) at fixed concurrency; requests/s = successful / benchmark duration."""
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "prompts.jsonl"
        with data.open("w") as f:
            for i in range(n + conc):
                f.write(
                    json.dumps(
                        {"prompt": f"g{i} tell me a story about the sea", "output_tokens_count": out_tokens}
                    )
                )
                f.write("\n")
        report = Path(d) / "report.json"
        cmd = [
            exe, "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
            "--profile", f"kind=concurrent,streams={conc}", "--constraint", f"kind=max_requests,count={n}",
            "--data", f"kind=json_file,path={data}", "--output", f"kind=json,path={report}",
            "--disable-progress",
        ]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=d)
        if out.returncode != 0 or not report.exists():
            print(f"  guidellm failed: {(out.stderr or out.stdout).strip()[-400:]}", file=sys.stderr)
            return None
        b = json.loads(report.read_text())["benchmarks"][0]
        ok = b["metrics"]["request_totals"]["successful"]
        ttft = b["metrics"]["time_to_first_token_ms"]["successful"]["median"]
        return {"req_per_s": ok / b["duration"], "ttft_p50_ms": ttft}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=count, default=3)
    ap.add_argument("--requests", type=count, default=4000)
    ap.add_argument("--concurrency", type=count, default=256)
    ap.add_argument("--output-tokens", type=count, default=16)
    ap.add_argument("--ttft-requests", type=count, default=300)
    ap.add_argument(
        "--compare-python", default=sys.executable, help="the python that runs the vLLM-style aiohttp loop"
    )
    ap.add_argument("--guidellm", help="path to a guidellm executable (a throwaway venv), to compare with")
    args = ap.parse_args()

    port = _free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        ours_rps: list[float] = []
        ours_ttft_c: list[float] = []
        aio_rps: list[float] = []
        guide_rps: list[float] = []
        for run in range(args.runs):
            rps, ttft = asyncio.run(ours(url, args.requests, args.concurrency, args.output_tokens))
            ours_rps.append(rps)
            if ttft is not None:
                ours_ttft_c.append(ttft)
            line = f"run {run + 1}: ours {rps:,.0f} req/s"
            res = aiohttp_run(args.compare_python, url, args.requests, args.concurrency, args.output_tokens)
            if res:
                aio_rps.append(res["req_per_s"])
                line += f", aiohttp loop {res['req_per_s']:,.0f} req/s"
            if args.guidellm:
                g = guidellm_run(args.guidellm, url, args.requests, args.concurrency, args.output_tokens)
                if g:
                    guide_rps.append(g["req_per_s"])
                    line += f", guidellm {g['req_per_s']:,.0f} req/s"
            print(line, flush=True)
        # added TTFT at concurrency 1
        _, ours_ttft1 = asyncio.run(ours(url, args.ttft_requests, 1, args.output_tokens))
        raw1 = asyncio.run(raw_ttft("127.0.0.1", port, args.ttft_requests, args.output_tokens))
    finally:
        stop(server)

    print()
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "server: sandbox.vllm_sim --zero-latency in its own process; "
        f"{args.output_tokens} output tokens/request"
    )
    print(f"concurrency {args.concurrency}, {args.requests} requests per run, {args.runs} runs (medians):")
    print(f"  ours (mcp_tools.bench, aiohttp):      {statistics.median(ours_rps):8,.0f} req/s")
    if aio_rps:
        print(f"  aiohttp loop (vllm bench style):      {statistics.median(aio_rps):8,.0f} req/s")
        ratio = statistics.median(ours_rps) / statistics.median(aio_rps)
        print(f"  ratio ours / aiohttp loop (medians of this run): {ratio:.2f}")
    if guide_rps:
        print(f"  GuideLLM (guidellm run, concurrent):  {statistics.median(guide_rps):8,.0f} req/s")
    if ours_ttft_c:
        print(
            f"  ours: TTFT p50 at concurrency {args.concurrency}: "
            f"{statistics.median(ours_ttft_c) * 1000:.2f} ms"
        )
    if ours_ttft1 is not None:
        print(
            f"added TTFT at concurrency 1 (median of {args.ttft_requests}): ours {ours_ttft1 * 1000:.3f} ms, "
            f"raw socket {raw1 * 1000:.3f} ms, client overhead {(ours_ttft1 - raw1) * 1000:.3f} ms"
        )


if __name__ == "__main__":
    main()
