# ruff: noqa: E501  (log samples are quoted as they appear)
"""Realistic vLLM / Cloud Run log samples for the tests and the compression benchmark.

The wording follows real logs quoted in public vLLM and Cloud Run reports (sources next to each
sample); only numbers, paths and model names are adapted to a Gemma-on-L4 setting.
"""

from __future__ import annotations

import random

# vLLM V1 start-up, as printed by vllm/vllm-openai v0.10-v0.11 on one GPU
# (format of e.g. vllm-project/vllm#31273, #29049, #27508).
STARTUP_OK = [
    "INFO 05-29 19:07:48 [__init__.py:216] Automatically detected platform cuda.",
    "(APIServer pid=1) INFO 05-29 19:07:52 [api_server.py:1839] vLLM API server version 0.11.0",
    "(APIServer pid=1) INFO 05-29 19:07:52 [utils.py:233] non-default args: {'model_tag': "
    "'/mnt/models/gemma-4-12B-it', 'host': '0.0.0.0', 'port': 8080, 'model': '/mnt/models/gemma-4-12B-it', "
    "'max_model_len': 16384}",
    "(APIServer pid=1) INFO 05-29 19:08:01 [model.py:547] Resolved architecture: Gemma3ForConditionalGeneration",
    "(APIServer pid=1) INFO 05-29 19:08:01 [model.py:1510] Using max model len 16384",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:08:09 [core.py:644] Waiting for init message from front-end.",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:08:09 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
    "config: model='/mnt/models/gemma-4-12B-it', speculative_config=None, tokenizer='/mnt/models/gemma-4-12B-it', "
    "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
    "max_seq_len=16384, download_dir=None, load_format=auto, tensor_parallel_size=1, quantization=None, "
    "enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:08:12 [gpu_model_runner.py:2602] Starting to load model "
    "/mnt/models/gemma-4-12B-it...",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:08:13 [cuda.py:366] Using Flash Attention backend on V1 engine.",
]

STARTUP_FIGURES = [
    "(EngineCore_DP0 pid=212) INFO 05-29 19:09:40 [default_loader.py:267] Loading weights took 85.31 seconds",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:09:41 [gpu_model_runner.py:2653] Model loading took 8.6213 GiB "
    "and 87.112 seconds",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:10:02 [gpu_worker.py:298] Available KV cache memory: 9.87 GiB",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:10:02 [kv_cache_utils.py:1087] GPU KV cache size: 26,944 tokens",
    "(EngineCore_DP0 pid=212) INFO 05-29 19:10:02 [kv_cache_utils.py:1091] Maximum concurrency for 16,384 "
    "tokens per request: 1.64x",
    "(APIServer pid=1) INFO 05-29 19:10:31 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8080",
    "(APIServer pid=1) INFO:     Application startup complete.",
]

# CUDA OOM while the weights are being created (the frames name load_model / initialize_model),
# wording from vllm-project/vllm#31273 and #16343 (torch 2.x OutOfMemoryError message).
WEIGHTS_OOM_TRACEBACK = [
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/'
    'vllm/v1/worker/gpu_worker.py", line 213, in load_model',
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]     self.model_runner.load_model(eep_scale_up=eep_scale_up)",
    '(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/'
    'vllm/model_executor/model_loader/base_loader.py", line 45, in load_model',
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]     model = initialize_model(vllm_config=vllm_config,",
    '(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/'
    'vllm/model_executor/layers/linear.py", line 466, in __init__',
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708]     torch.empty(sum(output_partition_sizes),",
    "(EngineCore_DP0 pid=212) ERROR 05-29 19:09:02 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 240.00 MiB. GPU 0 has a total capacity of 22.03 GiB of which 139.06 MiB is free. "
    "Including non-PyTorch memory, this process has 21.89 GiB memory in use. Of the allocated memory 21.61 GiB "
    "is allocated by PyTorch, and 19.72 MiB is reserved by PyTorch but unallocated.",
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {}",
]

_HEX = "0123456789abcdef"

NOISE_TEMPLATES = [
    '(APIServer pid=1) INFO:     169.254.{a}.{b}:{port} - "GET /health HTTP/1.1" 200 OK',
    '(APIServer pid=1) INFO:     10.{a}.{b}.{c}:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 05-29 19:{mm:02d}:{ss:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
    "{pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {ph:.1f}%",
    "(APIServer pid=1) INFO 05-29 19:{mm:02d}:{ss:02d} [chat_utils.py:560] Detected the chat template content "
    "format to be 'openai'. You can set `--chat-template-content-format` to override this.",
    "(APIServer pid=1) INFO 05-29 19:{mm:02d}:{ss:02d} [logger.py:41] Received request chatcmpl-{hex}: "
    "params: SamplingParams(n=1, temperature={t:.1f}, max_tokens={mt}), prompt_token_ids: None",
    "(APIServer pid=1) INFO 05-29 19:{mm:02d}:{ss:02d} [async_llm.py:323] Added request chatcmpl-{hex}.",
    "Loading safetensors checkpoint shards: {p:3d}% Completed | {i}/5 [00:{ss:02d}<00:{mm:02d}, {r}.{c}s/it]",
]


def noise_line(rng: random.Random) -> str:
    """One line of serving noise: the draws ``rng.choice`` and ``rng.randint`` would make, written out.

    Both draw ``n.bit_length()`` random bits until the number is below ``n`` (``Random._randbelow``), so
    the lines are the ones those calls gave; a request id's 32 hex digits were 32 ``choice`` calls, most
    of the time the 50,000-line logs took (1.2 s each)."""
    bits = rng.getrandbits

    def below(n: int) -> int:
        k = n.bit_length()
        r = bits(k)
        while r >= n:
            r = bits(k)
        return r

    def hex32() -> str:
        digits: list[str] = []
        while len(digits) < 32:
            d = bits(5)  # 16 has 5 bits: a draw of 16 or more is drawn again
            if d < 16:
                digits.append(_HEX[d])
        return "".join(digits)

    t = NOISE_TEMPLATES[below(len(NOISE_TEMPLATES))]
    return t.format(  # keyword arguments are evaluated in order: the draws keep theirs
        a=below(256),
        b=below(256),
        c=below(256),
        port=30000 + below(30001),
        mm=below(60),
        ss=below(60),
        pt=rng.random() * 900,
        gt=rng.random() * 300,
        r=below(10),
        kv=rng.random() * 60,
        ph=rng.random() * 90,
        hex=hex32(),
        t=rng.random(),
        mt=16 + below(4081),
        p=below(101),
        i=below(6),
    )


def noisy_oom_log(n: int = 50_000, seed: int = 7, oom_at: float = 0.6) -> tuple[list[str], int]:
    """``n`` lines of realistic serving noise with an OOM traceback buried inside; returns (lines, line of
    the ``torch.OutOfMemoryError`` line, 1-based)."""
    rng = random.Random(seed)
    lines = list(STARTUP_OK)
    cut = int(n * oom_at)
    while len(lines) < cut:
        lines.append(noise_line(rng))
    lines.extend(STARTUP_OK[:8])  # a restart after a scale-up ...
    start = len(lines)
    lines.extend(WEIGHTS_OOM_TRACEBACK)  # ... that dies loading the weights
    oom_line = start + 9  # the OutOfMemoryError line, 1-based
    while len(lines) < n:
        lines.append(noise_line(rng))
    return lines[:n], oom_line
