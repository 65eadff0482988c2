"""What log lines mean: the one home of the failure and life-cycle vocabulary.

Two kinds of words live here:

- **Milestones** of a vLLM server's life, in the order they happen, as vLLM 0.2 .. 0.11 and the V1
  engine print them (read from vLLM's source: ``vllm/entrypoints/openai/api_server.py``,
  ``vllm/engine/llm_engine.py``, ``vllm/v1/engine/core.py``, ``vllm/worker/model_runner.py``,
  ``vllm/v1/worker/gpu_model_runner.py``, ``vllm/worker/worker.py``, ``vllm/v1/core/kv_cache_utils.py``,
  and uvicorn's start-up lines). A diagnosis asks *where in this life* the first fatal error happened.
- **Fatal markers**: the shapes of an error record (a traceback, an exception line, a kill, a
  platform's failure message), independent of which failure family it belongs to.

Analyzers, the root-cause choice and log compression import these; none writes its own copy.
"""

from __future__ import annotations

import re
from enum import IntEnum


class Phase(IntEnum):
    """Where a server is in its life. Ordered: a later phase means the earlier ones passed."""

    NONE = 0
    CONTAINER = 1  # the container / pod / process started
    ARGS = 2  # arguments parsed (version banner, non-default args)
    CONFIG = 3  # the engine's configuration resolved
    DOWNLOAD = 4  # weights being fetched
    LOADING = 5  # weights being loaded onto the GPU
    LOADED = 6  # the weights are on the GPU
    PROFILING = 7  # the memory-profiling run / torch.compile
    KV_CACHE = 8  # the KV cache is allocated
    CUDA_GRAPHS = 9  # CUDA graphs captured / warm-up
    ENGINE_READY = 10  # the engine finished initialising (an offline ``LLM()`` run generates here)
    API_UP = 11  # the OpenAI-compatible server listens
    SERVING = 12  # requests answered
    SHUTDOWN = 13  # an orderly shutdown


_I = re.IGNORECASE

#: Milestone patterns per phase (a line may match several: the highest phase wins).
MILESTONES: list[tuple[Phase, re.Pattern[str]]] = [
    (
        Phase.CONTAINER,
        re.compile(
            r"Starting new instance|Started container|Pulled container image|Successfully pulled image"
            r"|Container image .* already present|Default STARTUP .*probe succeeded|Created container",
            _I,
        ),
    ),
    (
        Phase.ARGS,
        re.compile(
            r"vLLM API server version|non-default args|^args: Namespace\(|Automatically detected platform"
            r"|vLLM server version",
            _I,
        ),
    ),
    (
        Phase.CONFIG,
        re.compile(
            r"Initializing (?:a V\d |an )?LLM engine|Resolved architecture|This model supports multiple tasks"
            r"|Using max model len|Chunked prefill is enabled|Initializing a V\d LLM engine",
            _I,
        ),
    ),
    (
        Phase.DOWNLOAD,
        re.compile(
            r"Time spent downloading weights|Using model weights format|Downloading (?:shards|model)", _I
        ),
    ),
    (
        Phase.LOADING,
        re.compile(
            r"Starting to load model|Loading safetensors checkpoint shards|Loading pt checkpoint shards"
            r"|Loading weights with|Loading model from scratch|Using (?:Flash"
            r"|XFormers|FlashInfer|Triton|Torch SDPA)"
            r"\w* backend|Using \w+ attention backend",
            _I,
        ),
    ),
    (
        Phase.LOADED,
        re.compile(r"Loading (?:model )?weights took|Model loading took|Loading weights took", _I),
    ),
    (
        Phase.PROFILING,
        re.compile(
            r"Memory profiling takes|Memory profiling results|torch\.compile takes|Starting profile run"
            r"|Dynamo bytecode transform time"
            r"|Compiling a graph for dynamic shape|Compiling model|profile_run",
            _I,
        ),
    ),
    (
        Phase.KV_CACHE,
        re.compile(
            r"# GPU blocks:|GPU KV cache size:|Available KV cache memory"
            r"|Maximum concurrency for [\d,]+ tokens"
            r"|num_gpu_blocks is",
            _I,
        ),
    ),
    (
        Phase.CUDA_GRAPHS,
        re.compile(
            r"Capturing (?:the model for )?CUDA ?graphs|Capturing cudagraphs|Graph capturing finished",
            _I,
        ),
    ),
    (
        Phase.ENGINE_READY,
        re.compile(
            r"init engine \(profile, create kv cache, warmup model\) took|Processed prompts:"
            r"|Engine core ready|engine is ready",
            _I,
        ),
    ),
    (
        Phase.API_UP,
        re.compile(
            r"Starting vLLM API server|Available routes are"
            r"|Started server process|Application startup complete"
            r"|Uvicorn running on|Route: /v\d/|Application '[^']+' is ready at"
            r"|Deployed app '[^']+' successfully",
            _I,
        ),
    ),
    (
        Phase.SERVING,
        re.compile(
            r"Avg prompt throughput|\"(?:GET|POST|PUT|DELETE"
            r"|HEAD) /\S* HTTP/\d(?:\.\d)?\" \d\d\d|Received request"
            r"|Added request|Finished request|CALL \w+ OK",
            _I,
        ),
    ),
    (
        Phase.SHUTDOWN,
        re.compile(
            r"received SIGTERM|Shutting down|shutdown signal|Waiting for application shutdown"
            r"|Application shutdown complete|Terminating instance|Finished server process|KeyboardInterrupt",
            _I,
        ),
    ),
]

#: One pattern that finds every milestone candidate (cheap first test per line shape).
ANY_MILESTONE = re.compile("|".join(f"(?:{p.pattern})" for _, p in MILESTONES), _I)

#: Milestones that show this process's server up: what makes a start "completed". Answered traffic
#: alone is not one (on Cloud Run another instance may be serving while this one fails).
UP_PHASES = frozenset({Phase.ENGINE_READY, Phase.API_UP})

#: The shape of a fatal error record, whatever its family.
FATAL = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:\(\S+ pid=\d+\)\s*)?(?:[\w.]+\.)?[A-Z]\w*(?:Error"
    r"|Exception):"
    r"|\] [\w.]*(?:Error|Exception): |Engine core initialization failed|died unexpectedly"
    r"|Container called exit\((?!0\))"
    r"|exited with (?:status|code) (?!0\b)|EngineCore failed to start|Worker failed|fatal error|^Killed$"
    r"|Segmentation fault|OOMKilled|CrashLoopBackOff|Back-off restarting failed container"
    # An exception reported by repr: asyncio's "future: <Future finished exception=AssertionError('...')>",
    # vLLM's "IndexError('Error in model execution: ...')"
    r"|exception=[\w.]*(?:Error|Exception)\(|^[\w.]*(?:Error|Exception)\(['\"]",
    _I,
)
FATAL_PREFILTER = re.compile(
    r"Traceback|Error|Exception|failed|died|exit|fatal|Killed|Segmentation|BackOff|Back-off", _I
)

#: An exception that says what went wrong (not one that only reports that something else did: an
#: engine that failed to start, died, or was cancelled).
EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::|\(['\"])|exception=[\w.]*(?:Error|Exception)\("
    r"|^Segmentation fault|Fatal Python error"
)
REPORTS_ONLY = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|Engine process failed to start"
    r"|EngineDeadError|Background loop has errored|died unexpectedly|CancelledError|KeyboardInterrupt"
    r"|SystemExit|See (?:the )?root cause above|Worker failed|WorkerProc hit an exception",
    re.IGNORECASE,
)
EXCEPTION_PREFILTER = re.compile(r"Error|Exception|Segmentation|Fatal")

#: The banner of a Python traceback (what failed is the exception line that ends it).
TRACEBACK_HEAD = re.compile(r"Traceback \(most recent call last\)")

#: A server that came up (a later one means an earlier start-up failure recovered).
STARTED = re.compile(
    "|".join(f"(?:{p.pattern})" for ph, p in MILESTONES if ph in (*UP_PHASES, Phase.SERVING)), _I
)
#: The OpenAI-compatible server listening.
API_UP = next(p for ph, p in MILESTONES if ph is Phase.API_UP)
#: A fresh server start (not just traffic, which other instances may be serving).
RESTARTED = re.compile("|".join(f"(?:{p.pattern})" for ph, p in MILESTONES if ph in UP_PHASES), _I)
#: An answered inference request (tested line by line within the access-log shapes).
SERVED = re.compile(r"\"(?:GET|POST) /v1/\S+ HTTP/\d\.\d\" 200")
SERVED_PREFILTER = re.compile(r"\"(?:GET|POST) /v\d/")


#: An orderly shutdown: tracebacks after it are not causes.
SHUTDOWN = re.compile(
    r"received SIGTERM|SIGTERM|Shutting down|shutdown signal|Waiting for application shutdown"
    r"|Application shutdown complete|Terminating instance|scaling down|KeyboardInterrupt|CancelledError"
    r"|Finished server process",
    re.IGNORECASE,
)
#: The weights loaded (what blocked loading did not happen, or did not matter).
LOADED = re.compile(
    r"Loading (?:model )?weights took|Model loading took|Available KV cache memory|GPU KV cache size"
    r"|# GPU blocks",
    re.IGNORECASE,
)
#: A (re)start of the server process (or its container): the life starts over from here.
START_MARK = re.compile(
    r"vLLM API server version|Initializing (?:a V\d |an )LLM engine|non-default args"
    r"|Automatically detected platform|^args: Namespace\(|Starting new instance|Started container",
    re.IGNORECASE,
)
