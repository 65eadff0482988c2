# ruff: noqa: E501  (verbatim log wording and traceback frames)
"""The words real vLLM and Cloud Run print, so analyzers built on the sandbox also work on real logs.

Sources (wording copied from real logs and from the code that prints them):
- vLLM V1 start-up lines ("Model loading took X GiB and S seconds", "Available KV cache memory",
  "GPU KV cache size: N tokens", "Maximum concurrency for N tokens per request: Xx", "init engine
  (profile, create kv cache, warmup model) took"): vllm/v1/worker/gpu_model_runner.py,
  gpu_worker.py, v1/core/kv_cache_utils.py, v1/engine/core.py; vllm-project/vllm#12569.
- Weights OOM while allocating parameters (``create_weights`` -> ``torch.empty``), with
  "EngineCore failed to start." and PyTorch's OutOfMemoryError text: vllm-project/vllm#28143,
  #16343, #15182; the API server's "Engine core initialization failed. See root cause above.":
  vllm/v1/engine/core_client.py / utils.py.
- KV cache starved: ``_check_enough_kv_cache_memory`` in v1/core/kv_cache_utils.py ("To serve at
  least one request with the models's max seq len (N), (X GiB KV cache is needed, which is larger
  than the available KV cache memory (Y GiB). Based on the available memory, the estimated maximum
  model length is M. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when
  initializing the engine."): vllm-project/vllm#27508, #34076, and "No available memory for the cache
  blocks": vllm/v1/core/kv_cache_utils.py.
- Unsupported on this GPU: "The quantization method fp8 is not supported for the current GPU.
  Minimum capability: 80. Current capability: 75." (vllm/model_executor/layers/quantization,
  vllm-project/vllm#4327, #1488); "Bfloat16 is only supported on GPUs with compute capability of at
  least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly
  setting the `dtype` flag in CLI, for example: --dtype=half." (vllm/platforms/cuda.py).
- Model not found: "Invalid repository ID or local directory specified: '...'" (vllm/transformers_utils
  /config.py, vllm-project/vllm#13724, #22043).
- Context too long: "User-specified max_model_len (N) is greater than the derived max_model_len
  (max_position_embeddings=M ...)" (vllm/config/model.py ``_get_and_verify_max_len``).
- Cloud Run: "Default STARTUP TCP probe failed 1 time consecutively for container \"x\" on port 8080.
  The instance was not started." in run.googleapis.com/varlog/system (1Password/scim-examples#309);
  "The user-provided container failed to start and listen on the port defined provided by the
  PORT=8080 environment variable within the allocated timeout. ..." (datawranglerai/self-host-n8n-on-gcr#34,
  googlecodelabs/feedback#1814); "The user-provided container failed the configured startup probe
  checks." (terraform-google-modules/terraform-docs-samples#254); the operation error "Revision 'x' is
  not ready and cannot serve traffic." with code 13 (chainguard-dev/terraform-infra-common#498);
  "Memory limit of N MiB exceeded with M MiB used." (Cloud Run memory-limit docs and runbooks);
  "Container called exit(1)." (varlog/system).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sandbox.outcome import RevisionContext

VLLM_VERSION = "0.11.0"
PY = "/usr/local/lib/python3.12/dist-packages"

STARTING_INSTANCE = (
    "Starting new instance. Reason: DEPLOYMENT_ROLLOUT - Instance started due to traffic shifting between "
    "revisions due to deployment, traffic split adjustment, or deployment health check."
)
CONTAINER_SIGKILL = "Container terminated on signal 9."
REVISION_PROBE_FAILED = (
    "The user-provided container failed the configured startup probe checks. Logs for this revision might "
    "contain more information."
)


class Stamp:
    """vLLM's log prefix ``INFO 11-30 10:00:02 [file.py:123]`` at a simulated offset."""

    def __init__(self, ctx: RevisionContext) -> None:
        self.ctx = ctx
        self.t0: float | None = None

    def prefix(self, level: str, off: float, proc: str | None, where: str) -> str:
        base = self.t0 if self.t0 is not None else self.ctx.created_s
        ts = datetime.fromtimestamp(base + off, UTC).strftime("%m-%d %H:%M:%S")
        head = f"({proc}) " if proc else ""
        return f"{head}{level} {ts} [{where}]"

    def info(self, off: float, proc: str | None, where: str, msg: str) -> str:
        return f"{self.prefix('INFO', off, proc, where)} {msg}"

    def error(self, off: float, proc: str | None, where: str, msg: str) -> str:
        return f"{self.prefix('ERROR', off, proc, where)} {msg}"


def non_default_args(model: str, flags: Any) -> str:
    d: dict[str, Any] = {"model_tag": model, "model": model}
    for k in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "quantization", "served_model_name"):
        v = getattr(flags, k, None)
        if v is not None:
            d[k] = v
    if getattr(flags, "gpu_memory_utilization", 0.9) != 0.9:
        d["gpu_memory_utilization"] = flags.gpu_memory_utilization
    if getattr(flags, "kv_cache_dtype", "auto") != "auto":
        d["kv_cache_dtype"] = flags.kv_cache_dtype
    if getattr(flags, "dtype", "auto") != "auto":
        d["dtype"] = flags.dtype
    if getattr(flags, "enforce_eager", False):
        d["enforce_eager"] = True
    return repr(d)


def engine_config(model: str, plan: Any, flags: Any) -> str:
    dtype = {"bfloat16": "torch.bfloat16", "float16": "torch.float16"}.get(plan.dtype, f"torch.{plan.dtype}")
    q = flags.quantization or (
        plan.weight_format if plan.weight_format not in ("bfloat16", "float16") else None
    )
    return (
        f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{model}', speculative_config=None, "
        f"tokenizer='{model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
        f"trust_remote_code=False, dtype={dtype}, max_seq_len={plan.max_model_len}, download_dir=None, "
        f"load_format=auto, tensor_parallel_size={plan.tensor_parallel_size}, pipeline_parallel_size=1, "
        f"quantization={q}, enforce_eager={bool(flags.enforce_eager)}, kv_cache_dtype={plan.kv_cache_dtype}, "
        f"device_config=cuda, served_model_name={flags.served_model_name or model}, "
        f"enable_prefix_caching=True, chunked_prefill_enabled=True"
    )


def _tb(
    proc: str, frames: list[tuple[str, int, str, str]], final: str, *, logger_prefix: str | None = None
) -> list[str]:
    """A Python traceback, one log line per line, each with vLLM's process prefix."""
    head = f"({proc}) " + (f"{logger_prefix} " if logger_prefix else "")
    lines = [f"{head}Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        lines.append(f'{head}  File "{path}", line {lineno}, in {func}')
        lines.append(f"{head}    {code}")
    lines.extend(f"{head}{ln}" for ln in final.split("\n"))
    return lines


# The first frames of every APIServer traceback: the ``vllm`` script, then its CLI dispatcher.
_VLLM_SCRIPT = ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())")
_CLI_MAIN = (f"{PY}/vllm/entrypoints/cli/main.py", 54, "main", "args.dispatch_function(args)")
_CREATE_MODEL_CONFIG = (f"{PY}/vllm/engine/arg_utils.py", 1106, "create_model_config", "return ModelConfig(")

_ENGINE_FRAMES = [
    (f"{PY}/vllm/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
    (
        f"{PY}/vllm/v1/engine/core.py",
        498,
        "__init__",
        "super().__init__(vllm_config, executor_class, log_stats,",
    ),
    (f"{PY}/vllm/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (f"{PY}/vllm/executor/executor_base.py", 54, "__init__", "self._init_executor()"),
    (f"{PY}/vllm/executor/uniproc_executor.py", 55, "_init_executor", 'self.collective_rpc("load_model")'),
    (
        f"{PY}/vllm/v1/worker/gpu_worker.py",
        213,
        "load_model",
        "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
    ),
    (f"{PY}/vllm/v1/worker/gpu_model_runner.py", 2634, "load_model", "self.model = model_loader.load_model("),
    (
        f"{PY}/vllm/model_executor/model_loader/base_loader.py",
        45,
        "load_model",
        "model = initialize_model(vllm_config=vllm_config,",
    ),
]


def _api_server_fail() -> list[str]:
    frames = [
        _VLLM_SCRIPT,
        _CLI_MAIN,
        (f"{PY}/vllm/entrypoints/cli/serve.py", 57, "cmd", "uvloop.run(run_server(args))"),
        (
            f"{PY}/vllm/entrypoints/openai/api_server.py",
            1884,
            "run_server",
            "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        ),
        (
            f"{PY}/vllm/v1/engine/utils.py",
            880,
            "wait_for_engine_startup",
            'raise RuntimeError("Engine core initialization failed. "',
        ),
    ]
    return _tb(
        "APIServer pid=1",
        frames,
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    )


def _engine_core_failed(
    frames: list[tuple[str, int, str, str]], msg: str, clk: Stamp, off: float
) -> list[str]:
    """What vLLM logs when the engine core dies while starting: the logged error with its traceback, the
    process's own traceback, then the API server's."""
    where = clk.prefix("ERROR", off, None, "core.py:708")
    return [
        f"(EngineCore_DP0 pid=230) {where} EngineCore failed to start.",
        *_tb("EngineCore_DP0 pid=230", frames, msg, logger_prefix=where),
        "(EngineCore_DP0 pid=230) Process EngineCore_DP0:",
        *_tb("EngineCore_DP0 pid=230", frames, msg),
        *_api_server_fail(),
    ]


def weights_oom(gpu: Any, weights_gib: float, clk: Stamp, off: float) -> list[str]:
    total = gpu.memory_gib
    in_use = min(total - 0.02, total * 0.992)
    alloc = in_use - 0.37
    tried_mib = 240.0
    oom = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_mib:.2f} MiB. GPU 0 has a total "
        f"capacity of {total:.2f} GiB of which {max((total - in_use) * 1024, 1.0):.2f} MiB is free. Including "
        f"non-PyTorch memory, this process has {in_use:.2f} GiB memory in use. Of the allocated memory "
        f"{alloc:.2f} GiB is allocated by PyTorch, and 13.45 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    frames = [
        *_ENGINE_FRAMES,
        (
            f"{PY}/vllm/model_executor/model_loader/utils.py",
            54,
            "initialize_model",
            "return model_class(vllm_config=vllm_config, prefix=prefix)",
        ),
        (
            f"{PY}/vllm/model_executor/models/utils.py",
            610,
            "make_layers",
            'maybe_offload_to_cpu(layer_fn(prefix=f"{prefix}.{idx}"))',
        ),
        (
            f"{PY}/vllm/model_executor/layers/linear.py",
            202,
            "create_weights",
            "weight = ModelWeightParameter(data=torch.empty(",
        ),
        (f"{PY}/torch/utils/_device.py", 103, "__torch_function__", "return func(*args, **kwargs)"),
    ]
    return _engine_core_failed(frames, oom, clk, off)


def kv_starved(plan: Any, clk: Stamp, off: float) -> list[str]:
    if plan.kv_cache_gib <= 0 or plan.kv_cache_tokens <= 0 and plan.max_model_len_that_fits <= 0:
        msg = (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    else:
        msg = (
            f"ValueError: To serve at least one request with the models's max seq len ({plan.max_model_len}), "
            f"({plan.kv_needed_gib_one_request:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({plan.kv_cache_gib:.2f} GiB). Based on the available memory, the estimated maximum "
            f"model length is {plan.max_model_len_that_fits}. Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )
    frames = [
        *_ENGINE_FRAMES[:2],
        (f"{PY}/vllm/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
        (
            f"{PY}/vllm/v1/engine/core.py",
            199,
            "_initialize_kv_caches",
            "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
        ),
        (
            f"{PY}/vllm/v1/core/kv_cache_utils.py",
            1243,
            "get_kv_cache_configs",
            "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
        ),
        (f"{PY}/vllm/v1/core/kv_cache_utils.py", 716, "check_enough_kv_cache_memory", "raise ValueError("),
    ]
    return _engine_core_failed(frames, msg, clk, off)


_GPU_LABEL = {"nvidia-tesla-t4": "Tesla T4", "nvidia-tesla-v100": "Tesla V100-SXM2-32GB"}


def unsupported(problems: list[str], gpu: Any, flags: Any, plan: Any) -> list[str]:
    cap = int(round(gpu.cc * 10))
    label = _GPU_LABEL.get(gpu.name, gpu.label or gpu.name)
    text = " ".join(problems)
    if "Bfloat16" in text or "bfloat16" in text:
        msg = (
            f"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {label} "
            f"GPU has compute capability {gpu.compute_capability}. You can use float16 instead by explicitly "
            "setting the `dtype` flag in CLI, for example: --dtype=half."
        )
    elif "FP8 KV" in text or "KV cache" in text and "fp8" in text.lower():
        msg = (
            f"ValueError: fp8 KV cache is not supported on the current GPU ({label}, compute capability "
            f"{cap}); it needs compute capability 89 or higher."
        )
    elif "FP8" in text:
        msg = (
            f"ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: "
            f"80. Current capability: {cap}."
        )
    elif "NVFP4" in text or "nvfp4" in text.lower():
        msg = (
            f"ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. Minimum "
            f"capability: 100. Current capability: {cap}."
        )
    else:
        msg = f"ValueError: {text}"
    frames = [
        *_ENGINE_FRAMES[:7],
        (f"{PY}/vllm/config/__init__.py", 3610, "_get_quantization_config", "raise ValueError("),
    ]
    return [
        "(EngineCore_DP0 pid=230) Process EngineCore_DP0:",
        *_tb("EngineCore_DP0 pid=230", frames, msg),
        *_api_server_fail(),
    ]


def model_not_found(model: str) -> list[str]:
    msg = (
        f"Value error, Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n"
        "3. For GGUF: pass the local path of the GGUF checkpoint.\n"
        "   Loading GGUF from a remote repo directly is not yet supported.\n"
        " [type=value_error, input_value=ArgsKwargs((), {'model': '"
        + model
        + "', ...}), input_type=ArgsKwargs]"
    )
    frames = [
        _VLLM_SCRIPT,
        _CLI_MAIN,
        _CREATE_MODEL_CONFIG,
        (
            f"{PY}/pydantic/_internal/_dataclasses.py",
            123,
            "__init__",
            "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)",
        ),
    ]
    return _tb(
        "APIServer pid=1",
        frames,
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n" + msg,
    )


def context_too_long(asked: int, derived: int) -> list[str]:
    msg = (
        f"ValueError: User-specified max_model_len ({asked}) is greater than the derived max_model_len "
        f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
        "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN "
        "must be used with extreme caution. If the model uses relative position encoding (RoPE), positions "
        "exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions "
        "exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
    )
    frames = [
        _VLLM_SCRIPT,
        _CREATE_MODEL_CONFIG,
        (f"{PY}/vllm/config/model.py", 2031, "_get_and_verify_max_len", "raise ValueError(msg)"),
    ]
    return _tb("APIServer pid=1", frames, msg)


def no_gpu_traceback() -> list[str]:
    frames = [
        _VLLM_SCRIPT,
        (f"{PY}/vllm/engine/arg_utils.py", 1290, "create_engine_config", "device_config = DeviceConfig("),
        (
            f"{PY}/vllm/config/device.py",
            58,
            "__post_init__",
            'raise RuntimeError("Failed to infer device type")',
        ),
    ]
    return _tb("APIServer pid=1", frames, "RuntimeError: Failed to infer device type")


def usage_error(msg: str) -> list[str]:
    return ["usage: vllm serve [model_tag] [options]", f"vllm serve: error: {msg}"]


def server_ready(port: int) -> list[tuple[str, str]]:
    return [
        ("api_server.py:1634", "Supported_tasks: ['generate']"),
        ("api_server.py:1912", f"Starting vLLM API server 0 on http://0.0.0.0:{port}"),
        ("", "INFO:     Started server process [1]"),
        ("", "INFO:     Waiting for application startup."),
        ("", "INFO:     Application startup complete."),
    ]


def memory_limit(limit_mib: int, used_mib: int) -> str:
    return (
        f"Memory limit of {limit_mib} MiB exceeded with {used_mib} MiB used. Consider increasing the memory "
        "limit, see https://cloud.google.com/run/docs/configuring/memory-limits"
    )


def container_exit(code: int) -> str:
    return f"Container called exit({code})."


def probe_failed(
    kind: str, threshold: int, container: str, port: int, path: str | None, *, default: bool
) -> str:
    times = f"{threshold} time{'s' if threshold != 1 else ''}"
    where = f'on path "{path}"' if kind == "HTTP" and path else f"on port {port}"
    lead = "Default STARTUP" if default else "STARTUP"
    return f'{lead} {kind} probe failed {times} consecutively for container "{container}" {where}. The instance was not started.'


def probe_succeeded(kind: str, container: str, port: int, path: str | None) -> str:
    where = f'on path "{path}"' if kind == "HTTP" and path else f"on port {port}"
    return f'STARTUP {kind} probe succeeded after 1 attempt for container "{container}" {where}.'


def revision_not_listening(port: int) -> str:
    return (
        f"The user-provided container failed to start and listen on the port defined provided by the PORT={port} "
        "environment variable within the allocated timeout. This can happen when the container port is "
        "misconfigured or if the timeout is too short. The health check timeout can be extended. Logs for this "
        "revision might contain more information."
    )


def with_logs_url(msg: str, ctx: RevisionContext) -> str:
    from urllib.parse import quote

    adv = quote(
        f'resource.type="cloud_run_revision"\nresource.labels.service_name="{ctx.service}"\n'
        f'resource.labels.revision_name="{ctx.revision}"',
        safe="",
    )
    url = (
        f"https://console.cloud.google.com/logs/viewer?project={ctx.project}&resource=cloud_run_revision/"
        f"service_name/{ctx.service}/revision_name/{ctx.revision}&advancedFilter={adv}"
    )
    return (
        f"{msg}\n\nLogs URL: {url} \nFor more troubleshooting guidance, see "
        "https://cloud.google.com/run/docs/troubleshooting#container-failed-to-start"
    )
