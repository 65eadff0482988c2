"""``gemma-sre bench``: serving benchmarks (TTFT, ITL, TPOT, goodput, sweeps, charts) and ``compare``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from agent.params import bounded, http_url, time_scale_option, zero_latency_option
from mcp_tools.bench.limits import MAX_CONCURRENCY
from mcp_tools.errors import UserError

bench_app = typer.Typer(
    help="Benchmark an OpenAI-compatible vLLM endpoint: TTFT, ITL, TPOT, goodput; sweeps and charts.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


@contextmanager
def _sandbox_endpoint(time_scale: float, zero_latency: bool) -> Iterator[str]:
    """The simulated vLLM endpoint in-process on a free loopback port (a Gemma-12B-on-L4-like profile)."""
    from sandbox.serve import start_in_thread
    from sandbox.vllm_sim.app import create_vllm_app
    from sandbox.vllm_sim.config import SimConfig

    cfg = SimConfig(
        served_model_name="google/gemma-4-12B-it",
        max_model_len=32768,
        max_num_seqs=256,
        kv_cache_tokens=120_000,
        ttft_base_s=0.05,
        prefill_s_per_token=0.0001,
        itl_s=0.025,
        time_scale=time_scale,
        zero_latency=zero_latency,
        revision="sandbox-00001-sim",
    )
    url, stop = start_in_thread(create_vllm_app(cfg))
    try:
        yield url
    finally:
        stop()


def _token_provider(bearer_env: str | None, id_token: bool, url: str) -> Callable[[], str] | None:
    """The bearer token each load point sends: from an environment variable, or a Google ID token for
    the URL (Cloud Run IAM; minted and cached by the endpoint layer, as every other call does)."""
    if bearer_env:
        value = os.environ.get(bearer_env)
        if not value:
            raise UserError(f"--bearer-token-env: the environment variable {bearer_env} is not set or empty")
        return lambda: value
    from mcp_tools.endpoint import VllmEndpoint

    endpoint = VllmEndpoint(url, auth="id_token" if id_token else "auto")
    if not endpoint.wants_id_token():
        return None  # loopback or plain http: nothing to authenticate

    def fetch() -> str:
        return endpoint.headers()["Authorization"].removeprefix("Bearer ")

    return fetch


def _service_url(name: str) -> str:
    """A Cloud Run service's URL, from the Cloud Run Admin API."""
    from mcp_tools.cloudrun import CloudRun

    svc = CloudRun().get_service(name, with_revisions=False)
    if not svc.uri:
        raise UserError(f"--service: {name!r} has no URL yet (it has never become Ready)")
    return svc.uri


@bench_app.callback()
def bench(
    ctx: typer.Context,
    url: str | None = typer.Option(
        None, "--url", parser=http_url, help="Base URL of the vLLM server (default: $VLLM_BASE_URL)."
    ),
    service: str | None = typer.Option(
        None, "--service", help="A Cloud Run service: its URL from the Cloud Run API, with an ID token."
    ),
    sandbox: bool = typer.Option(False, "--sandbox", help="Start the simulated vLLM endpoint in-process."),
    sandbox_time_scale: float = time_scale_option(1.0, "--sandbox-time-scale"),
    sandbox_zero_latency: bool = zero_latency_option("--sandbox-zero-latency"),
    model: str | None = typer.Option(None, "--model", help="Served model name (default: read /v1/models)."),
    endpoint: str = typer.Option("chat", "--endpoint", help="chat or completions."),
    concurrency: str = typer.Option("1", "--concurrency", "-c", help="Levels: 1,4,16 or a range 1..2048."),
    rate: str | None = typer.Option(None, "--rate", help="Request rates (req/s), e.g. 1,2,5: rate mode."),
    burstiness: float = typer.Option(
        1.0,
        "--burstiness",
        parser=bounded(float, 0, 100, lo_open=True),
        help="Gamma shape of arrivals; 1 = Poisson.",
    ),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", parser=bounded(int, 1, MAX_CONCURRENCY), help="Cap in-flight in rate mode."
    ),
    context: str = typer.Option("256", "--context", help="Prompt lengths in tokens: 256 or 8..16384."),
    output_tokens: int = typer.Option(
        128, "--output-tokens", parser=bounded(int, 1, 131_072), help="Tokens generated per request."
    ),
    requests_per_point: int = typer.Option(
        100,
        "--requests",
        "-n",
        parser=bounded(int, 1, 1_000_000),
        help="Requests per load point (upper bound).",
    ),
    seconds_per_point: float = typer.Option(
        60.0,
        "--seconds",
        parser=bounded(float, 0, 86_400, lo_open=True),
        help="Seconds per load point (upper bound).",
    ),
    warmup_requests: int = typer.Option(
        4, "--warmup", parser=bounded(int, 0, 10_000), help="Unrecorded warm-up requests."
    ),
    shared_prefix: bool = typer.Option(
        False, "--shared-prefix", help="Let prompts share a cacheable prefix."
    ),
    exact_prompt_lengths: bool = typer.Option(
        True, "--exact-lengths/--estimated-lengths", help="Trim prompts via /tokenize."
    ),
    slo: str | None = typer.Option(None, "--slo", help="Goodput SLOs, e.g. ttft=500ms,tpot=50ms."),
    request_timeout_s: float = typer.Option(
        300.0,
        "--timeout",
        parser=bounded(float, 0, 3_600, lo_open=True),
        help="Per-request timeout in seconds.",
    ),
    error_budget: float = typer.Option(
        0.05, "--error-budget", parser=bounded(float, 0, 1), help="Stop a sweep above this error rate."
    ),
    stop_on_saturation: bool = typer.Option(True, "--stop-on-saturation/--no-stop-on-saturation"),
    output_dir: Path = typer.Option(Path("bench-runs"), "--output-dir", help="Where run folders go."),
    label: str | None = typer.Option(None, "--label", help="Name the run folder."),
    seed: int | None = typer.Option(None, "--seed", help="Seed for prompts and arrivals."),
    bearer_token_env: str | None = typer.Option(
        None, "--bearer-token-env", help="Read a bearer token from this environment variable."
    ),
    id_token: bool = typer.Option(False, "--id-token", help="Send a Google ID token (Cloud Run IAM)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON document."),
) -> None:
    """Run a benchmark (fixed concurrency, request rate, or a sweep over concurrency x context length)."""
    if ctx.invoked_subcommand is not None:
        return
    import asyncio

    from mcp_tools.bench import BenchConfig, run_benchmark
    from mcp_tools.bench.config import parse_float_list, parse_int_list, parse_slo
    from mcp_tools.settings import get_settings

    chosen = sum(x is not None and x is not False for x in (url, service, sandbox or None))
    if chosen > 1:
        raise UserError("give only one of --url, --service and --sandbox")
    if service is not None:
        url = _service_url(service)
    if endpoint not in ("chat", "completions"):
        raise UserError(f"--endpoint: {endpoint!r} must be chat or completions")
    if not sandbox and url is None:
        url = get_settings().vllm_base_url
        if not url:
            raise UserError("no endpoint: pass --url URL, --sandbox, or set VLLM_BASE_URL")
    contexts = parse_int_list(context, "--context", hi=1_048_576)
    rates = parse_float_list(rate, "--rate") if rate else []
    levels = parse_int_list(concurrency, "--concurrency")

    def config_for(base_url: str) -> BenchConfig:  # the options named as BenchConfig fields, by name
        return BenchConfig.from_params(
            "bench",
            ctx.params,
            url=base_url,
            mode="rate" if rates else "concurrency",
            concurrencies=levels,
            rates=rates,
            context_lengths=contexts,
            slo=parse_slo(slo),
        )

    def run(base_url: str) -> Any:
        cfg = config_for(base_url)
        provider = _token_provider(bearer_token_env, id_token, base_url)
        with BenchProgress() as progress:
            return asyncio.run(run_benchmark(cfg, progress=progress.update, token_provider=provider))

    if sandbox:
        with _sandbox_endpoint(sandbox_time_scale, sandbox_zero_latency) as sandbox_url:
            result = run(sandbox_url)
    else:
        assert url is not None
        result = run(url)
    if as_json:
        doc = result.model_dump(mode="json")
        typer.echo(__import__("json").dumps(doc, indent=1))
        return
    _print_result(result)


class BenchProgress:
    """A rich progress bar (on stderr, or on ``console``), one task per load point: ``gemma-sre bench``
    and the REPL's ``/bench`` show it."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console if console is not None else Console(stderr=True),
            transient=False,
        )
        self.task: Any = None

    def __enter__(self) -> BenchProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, ev: Any) -> None:
        if ev.kind == "prepare":
            self.progress.console.print(f"[dim]preparing {ev.message}[/dim]")
        elif ev.kind == "point_start":
            what = f"{ev.level:g} req/s" if ev.mode == "rate" else f"concurrency {ev.level:g}"
            self.task = self.progress.add_task(
                f"point {ev.point + 1}/{ev.points}  ctx {ev.context_tokens}  {what}", total=ev.total
            )
        elif ev.kind == "request" and self.task is not None:
            self.progress.update(self.task, completed=ev.done)
        elif ev.kind == "point_end" and self.task is not None:
            self.progress.update(self.task, total=ev.total, completed=ev.done)


def _print_result(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if Console().is_terminal else Console(width=160)
    mode = result.metadata.config.get("mode")
    t = Table(title=f"{result.metadata.model} @ {result.metadata.url}", title_justify="left")
    for col in (
        "context", "rate" if mode == "rate" else "conc.", "ok", "req/s", "out tok/s", "goodput",
        "TTFT p50/p99 ms", "TPOT p50/p99 ms", "ITL p99 ms", "e2e p50 ms",
    ):  # fmt: skip
        t.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.0f}" if v >= 1 else f"{v * 1000:.1f}"

    for p in result.points:
        t.add_row(
            str(p.context_tokens),
            f"{p.level:g}",
            f"{p.success_rate:.0%}",
            f"{p.request_throughput:.2f}",
            f"{p.output_token_throughput:,.0f}",
            "-" if p.goodput is None else f"{p.goodput:.2f}",
            f"{ms(p.ttft.p50)} / {ms(p.ttft.p99)}",
            f"{ms(p.tpot.p50)} / {ms(p.tpot.p99)}",
            ms(p.itl.p99),
            ms(p.e2e.p50),
        )
    console.print(t)
    if result.errors:
        console.print("errors: " + ", ".join(f"{k}={v}" for k, v in sorted(result.errors.items())))
    for kind, s in result.remarks():
        style = "dim" if kind == "note" else "yellow"
        console.print(f"[{style}]{kind}[/{style}] {s}")
    if result.run_dir:
        console.print(f"run folder: {result.run_dir}")


@bench_app.command("compare")
def compare(
    run_a: Path = typer.Argument(..., help="The baseline run folder (or its run.json)."),
    run_b: Path = typer.Argument(..., help="The run to compare with it."),
    output_dir: Path = typer.Option(Path("bench-runs"), "--output-dir", help="Where the comparison goes."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON document."),
) -> None:
    """Compare two runs point by point: a table of differences and a comparison chart."""
    from mcp_tools.bench import compare_runs

    cmp = compare_runs(run_a, run_b, output_dir=output_dir)
    if as_json:
        typer.echo(cmp.model_dump_json(indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console() if Console().is_terminal else Console(width=160)
    t = Table(title=f"A = {cmp.run_a}\nB = {cmp.run_b}  (cells: A -> B, change)", title_justify="left")
    metrics = [
        m
        for m in (
            "req/s",
            "output tok/s",
            "goodput req/s",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "TPOT p50 ms",
            "ITL p99 ms",
            "e2e p50 ms",
        )
        if any(r.metric == m and r.a is not None for r in cmp.rows)
    ]
    t.add_column("context", justify="right")
    t.add_column("level", justify="right")
    for m in metrics:
        t.add_column(m, justify="right")

    def cell(r: Any) -> str:
        if r is None or (r.a is None and r.b is None):
            return "-"
        fa = "-" if r.a is None else f"{r.a:,.3g}" if abs(r.a) < 100 else f"{r.a:,.0f}"
        fb = "-" if r.b is None else f"{r.b:,.3g}" if abs(r.b) < 100 else f"{r.b:,.0f}"
        ch = "" if r.change is None else f" ({r.change:+.0%})"
        color = "green" if r.better is True else "red" if r.better is False else "white"
        return f"{fa} -> {fb}[{color}]{ch}[/{color}]"

    keys = sorted({(r.context_tokens, r.level) for r in cmp.rows})
    by = {(r.context_tokens, r.level, r.metric): r for r in cmp.rows}
    for ctx_tokens, level in keys:
        t.add_row(str(ctx_tokens), f"{level:g}", *[cell(by.get((ctx_tokens, level, m))) for m in metrics])
    console.print(t)
    for u in cmp.unmatched:
        console.print(f"[yellow]{u}[/yellow]")
    if cmp.output_dir:
        console.print(f"comparison chart: {Path(cmp.output_dir) / 'compare.png'}")
