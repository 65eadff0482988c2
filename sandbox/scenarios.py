"""Named scenarios and incident files: the state a sandbox starts in.

Every scenario deploys one Cloud Run service through the same model the REST API uses, lets the
physics decide each revision's fate, and jumps the clock until every revision has settled, so the
sandbox starts with the incident already in the logs:

- ``reference-weights-oom``: Gemma 4 12B bf16 on one L4 (22.3 GiB of weights on a 22 GiB GPU). A
  first deployment: there is NO earlier good revision, the service has never been Ready and its URL
  answers 503. The fix (``set_model`` to the QAT w4a16 or FP8 checkpoint, or ``--quantization=fp8``)
  comes up Ready.
- ``weights-oom-with-good-revision``: the same bad rollout on top of a Ready QAT revision, which
  keeps all traffic (the case for ``rollback``).
- ``kv-starvation``: Llama 3.1 8B on one L4 with ``--max-model-len=131072``: the weights load, the KV
  cache cannot hold one request (fix: a shorter ``--max-model-len``).
- ``startup-timeout``: Gemma 4 12B FP8 read from a bucket at 100 MB/s with a 120 s startup probe
  (fix: ``set_probe`` to a longer budget).
- ``fp8-on-t4``: Gemma 4 E4B with ``--quantization=fp8`` on a T4 (cc 7.5): vLLM refuses FP8.
- ``overload``: Gemma 4 12B QAT on one L4 with ``--max-num-seqs=16`` under a steady internal load of
  48 concurrent requests sized to fill the KV cache: requests wait, KV usage near 100%, preemptions.
- ``healthy``: Gemma 4 12B QAT on one L4 at 16k context, Ready, light background traffic.
- ``canary-fix``: the ``healthy`` service, whose serving revision's engine stalled for minutes (its
  stats lines: requests running, no token generated): the fix (``restart``) is a new revision that
  serves as fast as the old one did, so the canary gives it all traffic in steps.
- ``canary-slow-fix``: the same, but the fix's revision is twice as slow to its first token (a
  ``slow`` fault armed for the service's next revision): it passes ``/health`` and the smoke
  completion, and the canary must roll it back.

Scenarios with time (their Cloud Monitoring series tell the story; the logs look healthy):

- ``load-ramp``: the overload service with offered load ramping from 4 to 60 clients over the last
  30 minutes: the queue grows, KV usage climbs to ~100%, preemptions start, TTFT drifts up.
- ``slow-leak``: the healthy service whose host memory utilization grows ~25 points an hour.
- ``stuck-engine``: the healthy service whose engine stopped making progress 10 minutes ago:
  requests running, generated tokens flat, 504s; ``/health`` still answers 200 and completions hang.
- ``hot-instance``: two instances, one taking 90% of the load (saturated) while the other idles.

``--incident FILE`` (SPEC.md section 3): the incident's ``service`` block is deployed and its log
lines are preloaded under that service's latest revision, re-timed so the last line is "now"
(keeping their spacing), so they fall inside the Logging client's default 24-hour window.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

from mcp_tools.errors import UserError
from mcp_tools.incident import Incident, ServiceSpec, StartupProbe, load_incident
from sandbox.cloudlogging.model import STDERR, STDOUT, run_resource
from sandbox.physics import PhysicsConfig

logger = logging.getLogger(__name__)

SCENARIOS = (
    "reference-weights-oom",
    "weights-oom-with-good-revision",
    "kv-starvation",
    "startup-timeout",
    "fp8-on-t4",
    "overload",
    "healthy",
    "load-ramp",
    "slow-leak",
    "stuck-engine",
    "hot-instance",
    "canary-fix",
    "canary-slow-fix",
)

#: The canary scenarios' fix revision is this many times slower to its first token (``canary-slow-fix``).
SLOW_FIX_FACTOR = 2.0

_IMAGE = "vllm/vllm-openai:v0.11.0"
_HISTORY_S = 2 * 3600.0  # scenarios start their history this long before "now"


def l4_spec(name: str, args: list[str], **kw: Any) -> ServiceSpec:
    """vLLM on one L4 as the scenarios deploy it (weights from a mounted bucket, on port 8080);
    ``kw`` overrides any field."""
    base: dict[str, Any] = dict(
        name=name,
        gpu_type="nvidia-l4",
        gpu_count=1,
        cpu=8,
        memory="32Gi",
        image=_IMAGE,
        args=[*args, "--port=8080"],
        env={"HF_HUB_OFFLINE": "1"},
        min_instances=0,
        max_instances=1,
        concurrency=4,
    )
    base.update(kw)
    return ServiceSpec(**base)


def scenario_specs(name: str) -> tuple[list[ServiceSpec], PhysicsConfig]:
    """The successive deployments of a scenario (oldest first) and its physics settings."""
    qat = "--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
    if name == "reference-weights-oom":
        return [
            l4_spec("gemma-4-12b", ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"])
        ], PhysicsConfig()
    if name == "weights-oom-with-good-revision":
        return [
            l4_spec("gemma-4-12b", [qat, "--max-model-len=16384"]),
            l4_spec("gemma-4-12b", ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"]),
        ], PhysicsConfig()
    if name == "kv-starvation":
        return [
            l4_spec("llama-3-8b", ["--model=/mnt/models/Llama-3.1-8B-Instruct", "--max-model-len=131072"])
        ], PhysicsConfig()
    if name == "startup-timeout":
        probe = StartupProbe(
            initial_delay_seconds=0, period_seconds=10, timeout_seconds=5, failure_threshold=12
        )
        return [
            l4_spec(
                "gemma-4-12b-fp8",
                ["--model=/mnt/models/gemma-4-12B-it-FP8-Dynamic", "--max-model-len=16384"],
                startup_probe=probe,
            )
        ], PhysicsConfig(bucket_read_mbps=100.0)
    if name == "fp8-on-t4":
        return [
            ServiceSpec(
                name="gemma-4-e4b",
                gpu_type="nvidia-tesla-t4",
                gpu_count=1,
                cpu=4,
                memory="16Gi",
                image=_IMAGE,
                args=[
                    "--model=/mnt/models/gemma-4-E4B-it",
                    "--quantization=fp8",
                    "--max-model-len=8192",
                    "--port=8080",
                ],
                max_instances=1,
                concurrency=4,
            )
        ], PhysicsConfig()
    if name == "overload":
        return [
            l4_spec("gemma-4-12b", [qat, "--max-model-len=16384", "--max-num-seqs=16"], concurrency=64)
        ], PhysicsConfig()
    if name in ("healthy", "slow-leak", "stuck-engine", "canary-fix", "canary-slow-fix"):
        return [l4_spec("gemma-4-12b", [qat, "--max-model-len=16384"])], PhysicsConfig()
    if name == "load-ramp":
        return [
            l4_spec("gemma-4-12b", [qat, "--max-model-len=16384", "--max-num-seqs=16"], concurrency=64)
        ], PhysicsConfig()
    if name == "hot-instance":
        return [
            l4_spec(
                "gemma-4-12b",
                [qat, "--max-model-len=16384", "--max-num-seqs=16"],
                concurrency=32,
                max_instances=2,
            )
        ], PhysicsConfig()
    raise UserError(f"unknown scenario {name!r} (one of {', '.join(SCENARIOS)})")


def timeline(name: str) -> Any:
    """A scenario's ``Timeline``: the offered load and what goes wrong over time."""
    from sandbox.monitoring.physics import Timeline

    return {
        # prompts of 6000 tokens: a full batch of 16 just overfills the 12B QAT's ~95k-token KV cache
        "overload": Timeline(base_load=48, prompt_tokens=6000),
        "healthy": Timeline(base_load=2),
        "load-ramp": Timeline(base_load=4, ramp_to=60, ramp_s=1800, prompt_tokens=6000),
        "slow-leak": Timeline(base_load=3, leak_per_hour=0.25),
        "stuck-engine": Timeline(base_load=4, stuck_for_s=600),
        "hot-instance": Timeline(base_load=30, instances=2, weights=(0.9, 0.1), prompt_tokens=6000),
    }.get(name, Timeline(base_load=2))


def build(
    *,
    scenario: str | None = None,
    incident: str | Path | Incident | None = None,
    time_scale: float = 60.0,
    project: str | None = None,
    location: str | None = None,
    zero_latency: bool = False,
    physics: PhysicsConfig | None = None,
) -> Any:
    from sandbox.server import Sandbox

    specs: list[ServiceSpec] = []
    cfg = physics
    inc: Incident | None = None
    if scenario is not None:
        specs, scen_cfg = scenario_specs(scenario)
        cfg = physics or scen_cfg
    elif incident is not None:
        inc = incident if isinstance(incident, Incident) else load_incident(incident)
        if inc.service is not None:
            specs = [inc.service]
    start = time.time() - _HISTORY_S if specs else None
    loc = location or next((s.region for s in specs if s.region), None)
    sb = Sandbox(
        project=project,
        location=loc,
        time_scale=time_scale,
        zero_latency=zero_latency,
        physics=cfg,
        start=start,
    )
    sb.scenario_name = scenario or (f"incident:{inc.id}" if inc is not None else None)
    for i, spec in enumerate(specs):
        if spec.region and spec.region != sb.location:
            spec = spec.model_copy(update={"region": sb.location})
        sb.deploy(spec, emit_logs=inc is None)
        if inc is not None:
            _incident_fate(sb, spec, inc)
        sb.settle()
        if i + 1 < len(specs):
            sb.clock.advance(15 * 60.0)  # some time passes between rollouts
    if inc is not None:
        _preload_incident(sb, inc)
    # the history ends a little before "now": catch the clock up to real time
    lag = time.time() - sb.clock.now_s()
    if lag > 0:
        sb.clock.advance(lag)
    if scenario is not None:
        for spec in specs:  # the timeline's "now" is the sandbox's when the scenario is ready
            sb.timelines[spec.name] = timeline(scenario).at(sb.clock.now_s())
    if scenario in ("canary-fix", "canary-slow-fix"):
        _stalled_engine(sb, specs[0].name)
    if scenario == "canary-slow-fix":
        sb.faults.inject(specs[0].name, "slow", count=1, factor=SLOW_FIX_FACTOR)
    return sb


def _stalled_engine(sb: Any, service: str, periods: int = 4, period_s: float = 10.0) -> None:
    """vLLM's periodic stats lines of the serving revision for a stall that just ended: requests
    running, nothing generated, ``periods`` times in a row (``vllm/v1/metrics/loggers.py``)."""
    from datetime import UTC, datetime

    with sb.cloudrun.lock:
        svc = sb.cloudrun.services[(sb.project, sb.location, service)]
        revision = svc["latestReadyRevision"].rsplit("/", 1)[-1]
    now = sb.clock.now_s()
    for i in range(periods):
        ts = now - (periods - i) * period_s
        stamp = datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%M:%S")
        sb.write_log(
            service,
            revision=revision,
            timestamp=ts,
            text=f"(APIServer pid=1) INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 "
            "tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 12 reqs, Waiting: 20 reqs, GPU KV "
            "cache usage: 41.5%, Prefix cache hit rate: 0.0%",
        )


_UP = ("healthy", "overload")
_UP_MARKERS = ("Application startup complete", "Uvicorn running on", "Starting vLLM API server")


def _incident_fate(sb: Any, spec: ServiceSpec, inc: Incident) -> None:
    """An incident's revision is Ready when the incident says the service was up (expected category
    healthy / overload, or, without one, its logs show the server started and no traceback after),
    whatever the planner would say about its spec; its log lines are the incident's own."""
    from sandbox import logtext as lt
    from sandbox.outcome import StartupOutcome
    from sandbox.vllm_sim.config import SimConfig

    if inc.expected is not None:
        up = inc.expected.category in _UP
    else:
        texts = [ln.message for ln in inc.logs]
        last_up = max((i for i, t in enumerate(texts) if any(m in t for m in _UP_MARKERS)), default=-1)
        up = last_up >= 0 and not any("Traceback" in t for t in texts[last_up:])
    with sb.cloudrun.lock:
        key = (sb.project, sb.location, spec.name)
        svc = sb.cloudrun.services[key]
        rev = sb.cloudrun.revisions[key][svc["latestCreatedRevision"].rsplit("/", 1)[1]]
        out = rev.outcome
        if up and not out.ready:
            from mcp_tools.capacity import parse_vllm_args, parse_vllm_startup
            from mcp_tools.errors import UserError

            try:
                flags = parse_vllm_args(spec.args)
            except UserError:
                flags = None
            figures = parse_vllm_startup([ln.message for ln in inc.logs])
            name = (flags.served_model_name or flags.model) if flags is not None else None
            max_len = (
                (flags.max_model_len if flags is not None else None) or figures.max_concurrency_tokens or 8192
            )
            kv = figures.kv_cache_tokens or max_len * 4
            out = StartupOutcome(
                ready=True,
                duration_s=max(out.duration_s, 60.0),
                category=inc.expected.category if inc.expected else "healthy",
                sim_config=SimConfig(
                    served_model_name=name or spec.name,
                    max_model_len=max_len,
                    max_num_seqs=(flags.max_num_seqs if flags is not None else None) or 256,
                    kv_cache_tokens=max(kv, 1),
                    zero_latency=sb.zero_latency,
                    container_concurrency=spec.concurrency,
                    revision=rev.short,
                ),
                notes={"from_incident": inc.id},
            )
        elif not up and out.ready:
            ctx_msg = lt.revision_not_listening(8080)
            out = StartupOutcome(
                ready=False,
                duration_s=max(out.duration_s, 30.0),
                failure_message=ctx_msg,
                category=inc.expected.category if inc.expected else "unknown",
                notes={"from_incident": inc.id},
            )
        out.logs = []
        rev.outcome = out
        sb.clock.fast_until(rev.settle_s)


def _preload_incident(sb: Any, inc: Incident) -> None:
    from sandbox.clock import parse_time

    svc_name = inc.service.name if inc.service is not None else "vllm"
    rev_name = f"{svc_name}-00001-inc"
    with sb.cloudrun.lock:
        svc = sb.cloudrun.services.get((sb.project, sb.location, svc_name))
        if svc is not None and svc.get("latestCreatedRevision"):
            rev_name = svc["latestCreatedRevision"].rsplit("/", 1)[-1]
    times: list[float | None] = []
    for ln in inc.logs:
        try:
            times.append(parse_time(ln.timestamp) if ln.timestamp else None)
        except ValueError:
            times.append(None)
    known = [t for t in times if t is not None]
    end = sb.clock.now_s()
    shift = (end - max(known)) if known else 0.0
    n = len(inc.logs)
    resource = run_resource(sb.project, sb.location, svc_name, rev_name)
    prev = end - n * 0.5
    for i, (ln, t) in enumerate(zip(inc.logs, times, strict=True)):
        ts = t + shift if t is not None else max(prev + 0.001, end - (n - i) * 0.5)
        prev = ts
        is_err = ln.severity in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY")
        sb.logs.append(
            project=sb.project,
            log_id=STDERR if is_err else STDOUT,
            timestamp=ts,
            severity=ln.severity,
            text=ln.text,
            json_payload=ln.json_payload if ln.text is None else None,
            resource=resource,
        )


def after_start(sb: Any) -> None:
    """Start what a scenario needs while running (the overload scenario's load)."""
    if sb.scenario_name == "overload":
        start_load(sb, "gemma-4-12b", concurrency=48)
    if sb.scenario_name == "stuck-engine":
        from sandbox.faults import stall_generation

        svc = sb.cloudrun.get_service(sb.project, sb.location, "gemma-4-12b")
        ready = str(svc.get("latestReadyRevision") or "").rsplit("/", 1)[-1]
        if ready:
            stall_generation(sb.faults, ready)


def start_load(sb: Any, service: str, *, concurrency: int = 48, max_tokens: int = 256) -> None:
    """Keep ``concurrency`` requests in flight against a service until the sandbox stops. Prompts are
    sized so the running batch fills the KV cache, as a saturated server's would."""
    import httpx

    stop = threading.Event()

    async def _worker(client: httpx.AsyncClient, uri: str, prompt: str, model: str) -> None:
        while not stop.is_set():
            try:
                await client.post(
                    f"{uri}/v1/completions",
                    json={"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
                )
            except httpx.HTTPError:
                await asyncio.sleep(0.2)

    async def _main() -> None:
        svc = sb.cloudrun.get_service(sb.project, sb.location, service)
        sim = sb.revision_sim(service)
        if sim is None:
            logger.warning("overload: %s has no ready revision to load", service)
            return
        cfg = sim.config
        # the full batch starts just under the KV capacity, so decoding soon forces preemptions
        per_seq = max(16, int(cfg.kv_cache_tokens / max(1, cfg.max_num_seqs)) - max_tokens // 4)
        per_seq = min(per_seq, cfg.max_model_len - max_tokens - 8)
        prompt = " load" * max(1, per_seq - 1)
        limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as client:
            tasks = [
                asyncio.create_task(_worker(client, svc["uri"], prompt, cfg.served_model_name))
                for _ in range(concurrency)
            ]
            while not stop.is_set():
                await asyncio.sleep(0.1)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    thread = threading.Thread(target=lambda: asyncio.run(_main()), name="sandbox-load", daemon=True)
    thread.start()

    def _stop() -> None:
        stop.set()
        thread.join(timeout=5)

    sb.add_background(_stop)
