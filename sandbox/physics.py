"""Revision physics: what happens when Cloud Run starts a vLLM container with this spec.

The capacity planner (``mcp_tools.capacity``) decides whether the weights fit, whether the KV cache
can hold one request at ``--max-model-len``, and whether the dtype / quantization / KV format runs
on this GPU. This module turns that verdict into a start-up timeline with the log lines real vLLM
and Cloud Run print (``sandbox.logtext``), the revision's fate and, when it is Ready, the
``SimConfig`` of the simulated vLLM server (KV capacity, batch size, roofline latencies).

Timeline of a start (simulated seconds after the instance starts; one instance per revision):
  0      instance starts (varlog/system)
  4      vLLM API server starts, prints its version and non-default args
  14     engine core initialises (dtype / quantization / GPU checks fail here)
  18     weights start loading: weights that do not fit fail within seconds (params are allocated
         before the checkpoint streams); otherwise ``weights / read throughput`` seconds pass.
         A model pulled from Hugging Face or copied to /tmp lands on Cloud Run's in-memory file
         system first and counts against the container memory limit.
  +35    torch.compile + profile run (skipped with --enforce-eager), then the KV-cache check
  +15    CUDA-graph capture (skipped with --enforce-eager), then the server listens: Ready.
The startup probe budget (initialDelaySeconds + periodSeconds x failureThreshold; Cloud Run's
default TCP probe gives 240 s) cuts any start that would end later.
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass
from typing import Any

from mcp_tools.errors import UserError
from sandbox import logtext as lt
from sandbox.cloudlogging.model import STDERR, STDOUT, SYSTEM
from sandbox.outcome import LogLine, RevisionContext, StartupOutcome

logger = logging.getLogger(__name__)

GIB = 1024**3

#: dense bf16/fp16 tensor TFLOPS (NVIDIA data sheets) for the prefill roofline; fallback below.
TFLOPS = {
    "nvidia-tesla-t4": 65,
    "nvidia-tesla-v100": 125,
    "nvidia-l4": 121,
    "nvidia-a10g": 70,
    "nvidia-a10": 125,
    "nvidia-tesla-a100": 312,
    "nvidia-a100-80gb": 312,
    "nvidia-l40s": 362,
    "nvidia-rtx-4090": 165,
    "nvidia-rtx-3090": 71,
    "nvidia-h100-80gb": 989,
    "nvidia-h200-141gb": 989,
    "nvidia-rtx-pro-6000": 500,
    "nvidia-b200": 2250,
}
PREFILL_EFFICIENCY = 0.5  # fraction of peak TFLOPS a prefill reaches
DECODE_EFFICIENCY = 0.8  # fraction of peak memory bandwidth a decode step reaches

T_API = 4.0
T_ENGINE = 14.0
T_LOAD = 18.0
COMPILE_S = 35.0
GRAPH_S = 15.0
BASE_HOST_GIB = 3.0  # the vLLM process itself: Python, torch, CUDA libraries


@dataclass
class PhysicsConfig:
    bucket_read_mbps: float = 400.0  # MB/s reading weights from a mounted bucket / volume
    hf_download_mbps: float = 500.0  # MB/s pulling weights from Hugging Face to the in-memory FS
    serve_time_scale: float = 1.0  # serving latencies run in real time (benchmarks stay honest)


def _quantity_bytes(q: str | None) -> float | None:
    if q is None:
        return None
    from sandbox.cloudrun.model import parse_quantity

    try:
        return parse_quantity(q)
    except ValueError:
        return None


def _probe(container: dict[str, Any]) -> tuple[float, str, str | None, int, int]:
    """(budget seconds, kind 'TCP'|'HTTP'|'GRPC', http path, failure threshold, port) of the startup probe."""
    p = container.get("startupProbe") or {}
    port = ((container.get("ports") or [{}])[0] or {}).get("containerPort", 8080)
    init = int(p.get("initialDelaySeconds", 0))
    period = int(p.get("periodSeconds", 240) or 240)
    thr = int(p.get("failureThreshold", 1) or 1)
    if p.get("httpGet") is not None:
        return init + period * thr, "HTTP", (p["httpGet"] or {}).get("path", "/"), thr, port
    if p.get("grpc") is not None:
        return init + period * thr, "GRPC", None, thr, port
    return init + period * thr, "TCP", None, thr, port


def _volume_paths(template: dict[str, Any], container: dict[str, Any]) -> list[str]:
    return [m.get("mountPath", "") for m in container.get("volumeMounts") or [] if m.get("mountPath")]


class Physics:
    """Callable ``(RevisionContext) -> StartupOutcome``; one per sandbox (scenarios tune the config)."""

    def __init__(self, config: PhysicsConfig | None = None) -> None:
        self.config = config or PhysicsConfig()

    def __call__(self, ctx: RevisionContext) -> StartupOutcome:
        return plan_startup(ctx, self.config)


def plan_startup(ctx: RevisionContext, cfg: PhysicsConfig | None = None) -> StartupOutcome:
    from mcp_tools import capacity
    from mcp_tools.spec_ops import get_flag, get_model

    cfg = cfg or PhysicsConfig()
    t = ctx.template
    containers = t.get("containers") or [{}]
    limits_of = [((c.get("resources") or {}).get("limits") or {}) for c in containers]
    idx = next((i for i, lim in enumerate(limits_of) if "nvidia.com/gpu" in lim), 0)
    c = containers[idx]
    limits = limits_of[idx]
    cname = c.get("name") or f"{ctx.service}-1"
    budget, probe_kind, probe_path, probe_thr, port = _probe(c)
    sp = c.get("startupProbe") or {}
    default_probe = "tcpSocket" in sp and sp.get("periodSeconds") == 240 and sp.get("failureThreshold") == 1
    argv = [*(c.get("command") or []), *(c.get("args") or [])]
    env = {e.get("name"): e.get("value") for e in c.get("env") or [] if e.get("name")}
    mem_limit = _quantity_bytes(limits.get("memory")) or 512 * 1024**2
    mem_mib = int(mem_limit / 1024**2)
    accel = (t.get("nodeSelector") or {}).get("accelerator")
    gpu_count = int(limits.get("nvidia.com/gpu", 0) or 0)
    clk = lt.Stamp(ctx)
    logs: list[LogLine] = []

    def out(off: float, text: str, log_id: str = STDOUT, severity: str = "DEFAULT") -> None:
        logs.append(LogLine(off, log_id, severity, text))

    def info(off: float, proc: str | None, where: str, msg: str) -> None:
        out(off, clk.info(off, proc, where, msg))

    def fail(
        at: float,
        message: str,
        category: str,
        *,
        exit_code: int | None = 1,
        probe_fail: bool = False,
        notes: dict[str, Any] | None = None,
    ) -> StartupOutcome:
        if probe_fail:
            out(
                at,
                lt.probe_failed(probe_kind, probe_thr, cname, port, probe_path, default=default_probe),
                SYSTEM,
                "ERROR",
            )
            msg = lt.REVISION_PROBE_FAILED if probe_kind == "HTTP" else lt.revision_not_listening(port)
        else:
            if exit_code is not None:
                out(at + 0.5, lt.container_exit(exit_code), SYSTEM, "WARNING")
            msg = lt.revision_not_listening(port)
        return StartupOutcome(
            ready=False,
            duration_s=at + 1.0,
            logs=logs,
            failure_message=lt.with_logs_url(msg, ctx),
            category=category,
            notes=notes or {},
        )

    out(0.0, lt.STARTING_INSTANCE, SYSTEM, "INFO")
    # --- the container must be vLLM's: args parse, a GPU exists, the model resolves
    try:
        flags = capacity.parse_vllm_args(argv)
    except UserError as e:
        out(T_API, f"vllm serve: error: {e}", STDERR, "ERROR")
        return fail(T_API + 0.2, "", "unsupported_config", exit_code=2)
    model_ref = get_model(argv) or flags.model or env.get("MODEL_NAME") or env.get("MODEL_ID")
    info(2.0, None, "__init__.py:216", "Automatically detected platform cuda.")
    info(T_API, "APIServer pid=1", "api_server.py:1839", f"vLLM API server version {lt.VLLM_VERSION}")
    if not model_ref:
        for line in lt.usage_error("the following arguments are required: model_tag"):
            out(T_API + 0.1, line, STDERR, "ERROR")
        return fail(T_API + 0.2, "", "model_not_found", exit_code=2)
    info(
        T_API + 0.1,
        "APIServer pid=1",
        "utils.py:233",
        f"non-default args: {lt.non_default_args(model_ref, flags)}",
    )
    gpu = None
    if accel and gpu_count > 0:
        with contextlib.suppress(UserError):  # an accelerator vLLM cannot use: no GPU, as far as it can tell
            gpu = capacity.resolve_gpu(accel)
    if gpu is None:
        for line in lt.no_gpu_traceback():
            out(T_ENGINE, line, STDERR, "ERROR")
        return fail(T_ENGINE + 0.5, "", "unsupported_config")
    try:
        spec = capacity.resolve_model(model_ref)
    except UserError:
        for line in lt.model_not_found(model_ref):
            out(T_API + 6.0, line, STDERR, "ERROR")
        return fail(T_API + 6.5, "", "model_not_found")
    try:
        plan = capacity.plan_capacity(spec, gpu=gpu.name, gpu_count=gpu_count, flags=flags, suggest=False)
    except UserError as e:
        text = str(e)
        if "max-model-len" in text and "limit" in text:
            for line in lt.context_too_long(flags.max_model_len or 0, spec.max_position_embeddings):
                out(T_API + 8.0, line, STDERR, "ERROR")
            return fail(T_API + 8.5, "", "context_too_long")
        out(T_API + 8.0, f"(APIServer pid=1) ValueError: {text}", STDERR, "ERROR")
        return fail(T_API + 8.5, "", "unsupported_config")

    notes: dict[str, Any] = {
        "plan": plan.model_dump(exclude={"suggestions"}),
        "gpu": gpu.name,
        "budget_s": budget,
        "memory_mib": mem_mib,
    }
    weights_gib = plan.weights_gib
    weights_bytes = weights_gib * GIB
    info(
        T_API + 8.0,
        "APIServer pid=1",
        "model.py:547",
        f"Resolved architecture: {spec.architecture or 'unknown'}",
    )
    info(T_API + 8.1, "APIServer pid=1", "model.py:1510", f"Using max model len {plan.max_model_len}")
    info(T_ENGINE, "EngineCore_DP0 pid=230", "core.py:77", lt.engine_config(model_ref, plan, flags))

    # --- where do the weights come from? (in-memory FS vs a mounted bucket)
    mounts = _volume_paths(t, c)
    on_volume = any(model_ref.startswith(m.rstrip("/") + "/") or model_ref == m for m in mounts)
    dd = get_flag(argv, "--download-dir")
    download_dir = dd if isinstance(dd, str) else None
    hf_id = not model_ref.startswith(("/", "gs://", "./")) and "://" not in model_ref
    in_memory = (
        model_ref.startswith("/tmp")
        or (download_dir or "").startswith("/tmp")
        or (hf_id and not (download_dir and any(str(download_dir).startswith(m) for m in mounts)))
    )
    if on_volume:
        in_memory = False
    read_mbps = cfg.hf_download_mbps if hf_id else cfg.bucket_read_mbps
    load_s = weights_bytes / (read_mbps * 1e6)
    notes.update({"in_memory": in_memory, "load_s": round(load_s, 1)})

    # --- failures, in the order vLLM meets them
    if plan.binding_constraint == "unsupported" or plan.unsupported:
        lines = lt.unsupported(plan.unsupported, gpu, flags, plan)
        at = T_ENGINE + 2.0
        if at > budget:
            return fail(budget, "", "startup_timeout", probe_fail=True, notes=notes)
        for line in lines:
            out(at, line, STDERR, "ERROR")
        return fail(at + 0.5, "", "unsupported_config", notes=notes)

    host_need = BASE_HOST_GIB * GIB + (weights_bytes if in_memory else 0.0)
    if host_need > mem_limit:
        # the download (or copy) fills the in-memory file system until the limit is hit
        room = max(mem_limit - BASE_HOST_GIB * GIB, 0.0)
        at = T_LOAD + (room / (read_mbps * 1e6) if in_memory else 1.0)
        if at > budget:
            return fail(budget, "", "startup_timeout", probe_fail=True, notes=notes)
        if in_memory and hf_id:
            info(
                T_LOAD,
                "EngineCore_DP0 pid=230",
                "weight_utils.py:426",
                f"Downloading weights of {model_ref} from the Hugging Face Hub",
            )
        used_mib = int(mem_mib * 1.03) + 17
        out(at, lt.memory_limit(mem_mib, used_mib), SYSTEM, "ERROR")
        out(at + 0.3, lt.CONTAINER_SIGKILL, SYSTEM, "WARNING")
        notes["host_need_gib"] = round(host_need / GIB, 2)
        return fail(at + 0.5, "", "host_memory_exceeded", exit_code=None, notes=notes)

    info(
        T_LOAD,
        "EngineCore_DP0 pid=230",
        "gpu_model_runner.py:2602",
        f"Starting to load model {model_ref}...",
    )
    if plan.binding_constraint == "weights" or (
        not plan.fits_expected and plan.kv_cache_tokens <= 0 and plan.binding_constraint != "kv_cache"
    ):
        at = T_LOAD + 3.0
        if at > budget:
            return fail(budget, "", "startup_timeout", probe_fail=True, notes=notes)
        for line in lt.weights_oom(gpu, weights_gib, clk, at):
            out(
                at,
                line,
                STDOUT if line.startswith("(EngineCore") and " ERROR " in line else STDERR,
                "DEFAULT" if " ERROR " in line and line.startswith("(EngineCore") else "ERROR",
            )
        return fail(at + 1.0, "", "weights_oom", notes=notes)

    t_loaded = T_LOAD + load_s + 2.0
    shards = max(1, math.ceil(weights_gib / 4.6))
    if t_loaded <= budget:
        info(
            T_LOAD + 1.0,
            "EngineCore_DP0 pid=230",
            "weight_utils.py:541",
            f"Loading safetensors checkpoint shards: 0% Completed | 0/{shards} [00:00<?, ?it/s]",
        )
        info(
            t_loaded - 1.0,
            "EngineCore_DP0 pid=230",
            "default_loader.py:267",
            f"Loading weights took {load_s:.2f} seconds",
        )
        info(
            t_loaded,
            "EngineCore_DP0 pid=230",
            "gpu_model_runner.py:2653",
            f"Model loading took {weights_gib:.4f} GiB and {load_s + 1.5:.6f} seconds",
        )
    eager = bool(flags.enforce_eager)
    t_profiled = t_loaded + (5.0 if eager else COMPILE_S + 5.0)
    if not eager and t_profiled - 5.0 <= budget:
        info(
            t_loaded + 2.0,
            "EngineCore_DP0 pid=230",
            "backends.py:548",
            "Using cache directory: /root/.cache/vllm/torch_compile_cache/3f1c2b9a1e/rank_0_0/backbone "
            "for vLLM's torch.compile",
        )
        info(
            t_profiled - 5.0,
            "EngineCore_DP0 pid=230",
            "monitor.py:34",
            f"torch.compile takes {COMPILE_S - 2.0:.2f} s in total",
        )
    # The simulated vLLM follows the central estimate (`fits` is the pessimistic end preflight uses).
    if not plan.fits_expected or plan.kv_cache_tokens <= 0:
        if t_profiled > budget:
            return fail(budget, "", "startup_timeout", probe_fail=True, notes=notes)
        info(
            t_profiled,
            "EngineCore_DP0 pid=230",
            "gpu_worker.py:298",
            f"Available KV cache memory: {max(plan.kv_cache_gib, 0.0):.2f} GiB",
        )
        for line in lt.kv_starved(plan, clk, t_profiled):
            out(t_profiled, line, STDERR, "ERROR")
        return fail(t_profiled + 0.5, "", "kv_cache_oom", notes=notes)

    t_ready = t_profiled + (0.0 if eager else GRAPH_S) + 3.0
    if t_ready > budget:
        notes["t_ready_s"] = round(t_ready, 1)
        return fail(budget, "", "startup_timeout", probe_fail=True, notes=notes)
    info(
        t_profiled,
        "EngineCore_DP0 pid=230",
        "gpu_worker.py:298",
        f"Available KV cache memory: {plan.kv_cache_gib:.2f} GiB",
    )
    info(
        t_profiled + 0.1,
        "EngineCore_DP0 pid=230",
        "kv_cache_utils.py:1087",
        f"GPU KV cache size: {plan.kv_cache_tokens:,} tokens",
    )
    info(
        t_profiled + 0.1,
        "EngineCore_DP0 pid=230",
        "kv_cache_utils.py:1091",
        f"Maximum concurrency for {plan.max_model_len:,} tokens per request: {plan.max_concurrency:.2f}x",
    )
    if not eager:
        info(
            t_ready - 3.5,
            "EngineCore_DP0 pid=230",
            "gpu_model_runner.py:3480",
            f"Graph capturing finished in {int(GRAPH_S)} secs, took {plan.cuda_graph_gib:.2f} GiB",
        )
    info(
        t_ready - 3.0,
        "EngineCore_DP0 pid=230",
        "core.py:210",
        f"init engine (profile, create kv cache, warmup model) took {t_ready - 3.0 - t_loaded:.2f} seconds",
    )
    for i, (where, msg) in enumerate(lt.server_ready(port)):
        out(
            t_ready - 1.0 + i * 0.01,
            clk.info(t_ready - 1.0, "APIServer pid=1", where, msg) if where else f"(APIServer pid=1) {msg}",
        )
    out(t_ready, lt.probe_succeeded(probe_kind, cname, port, probe_path), SYSTEM, "INFO")
    notes["t_ready_s"] = round(t_ready, 1)
    sim = sim_config(ctx, plan, gpu, flags, model_ref, t, cfg)
    return StartupOutcome(
        ready=True, duration_s=t_ready, logs=logs, sim_config=sim, category="healthy", notes=notes
    )


def sim_config(
    ctx: RevisionContext,
    plan: Any,
    gpu: Any,
    flags: Any,
    model_ref: str,
    template: dict[str, Any],
    cfg: PhysicsConfig,
) -> Any:
    """The simulated vLLM server of a ready revision: the planner's KV figures and a roofline."""
    from sandbox.vllm_sim.config import SimConfig

    bw = (gpu.bandwidth_gbps or 300.0) * 1e9 * max(1, plan.tensor_parallel_size)
    itl = plan.weights_gib * GIB / (bw * DECODE_EFFICIENCY)
    tflops = TFLOPS.get(gpu.name) or max(gpu.bandwidth_gbps / 2.5, 20.0)
    params = plan.num_params or 1e9
    prefill = 2.0 * params / (tflops * 1e12 * PREFILL_EFFICIENCY * max(1, plan.tensor_parallel_size))
    cc = template.get("maxInstanceRequestConcurrency")
    return SimConfig(
        served_model_name=(
            flags.served_model_name[0]
            if isinstance(flags.served_model_name, list)
            else flags.served_model_name
        )
        or model_ref,
        max_model_len=max(1, plan.max_model_len),
        max_num_seqs=max(1, plan.max_num_seqs or 256),
        kv_cache_tokens=max(1, plan.kv_cache_tokens),
        ttft_base_s=round(itl + 0.015, 6),
        prefill_s_per_token=prefill,
        itl_s=itl,
        zero_latency=ctx.zero_latency,
        time_scale=cfg.serve_time_scale,
        container_concurrency=int(cc) if cc else None,
        revision=ctx.revision,
    )
