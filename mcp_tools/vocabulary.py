"""What log lines mean: the one home of the failure and life-cycle vocabulary.

Three kinds of words live here:

- **Milestones** of a vLLM server's life, in the order they happen, as vLLM 0.2 .. 0.11 and the V1
  engine print them (read from vLLM's source: ``vllm/entrypoints/openai/api_server.py``,
  ``vllm/engine/llm_engine.py``, ``vllm/v1/engine/core.py``, ``vllm/worker/model_runner.py``,
  ``vllm/v1/worker/gpu_model_runner.py``, ``vllm/worker/worker.py``, ``vllm/v1/core/kv_cache_utils.py``,
  and uvicorn's start-up lines). A diagnosis asks *where in this life* the first fatal error happened.
- **Fatal markers**: the shapes of an error record (a traceback, an exception line, a kill, a
  platform's failure message), independent of which failure family it belongs to.

- **Family wording**: what each failure family of the taxonomy (SPEC.md section 1) says, in vLLM
  0.2 .. current, Cloud Run, gcloud, Kubernetes, Ray, Docker and the wrappers around vLLM; one section
  per analyzer in ``graph/analyzers/`` (which holds only the logic that reads them).

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

#: The command that starts the server, as a shell, an entrypoint script or a paste shows it before the
#: server's own first line: "$ vllm serve Qwen/Qwen3-8B ...", "root@host:/ws# vllm serve ...",
#: "+ exec python3 -m vllm.entrypoints.openai.api_server --model ...", "CUDA_VISIBLE_DEVICES=0,1 vllm serve
#: ...". A process starts here: what it prints next is a new life, not the one of the lines before it.
LAUNCH_COMMAND = (
    r"^(?:[\w@.:/~-]*[$#] +|\+ +)?(?:[A-Z][A-Z\d_]*=\S* +)*(?:nohup +|exec +)?"
    r"(?:python[\d.]* +(?:-[A-Za-z]+ +)*-m +vllm\.entrypoints\.[\w.]+|vllm +serve)(?= |$)"
)

#: vLLM's request handlers (``entrypoints/openai/serving_chat.py`` and its siblings, v0.4 .. current)
#: logging a request they refused, then answering it with an error response (a 4xx): "Error with model
#: object='error' message='The model `x` does not exist.' ... code=404" (the model it named is not the one
#: served), "Error in applying chat template from request: System role not supported", "Error in
#: preprocessing prompt inputs". The request's error: the server took it and answered it.
REQUEST_REFUSED = re.compile(
    r"\bError with model\b|Error in applying chat template from request|Error in preprocessing prompt inputs"
)
#: A command-line flag as a message names it ("--tool-call-parser").
FLAG_WORD = re.compile(r"--[a-z][\w-]{2,60}")
#: A request the server refused because it asks for a feature the server was not started with, by the
#: flags that would enable it (vLLM's serving_chat.py: '"auto" tool choice requires
#: --enable-auto-tool-choice and --tool-call-parser to be set'): every such request fails the same way,
#: so it is the serving configuration's, not the request's.
REQUEST_NEEDS_FLAGS = re.compile(
    r"\brequires (?P<flags>"
    + FLAG_WORD.pattern
    + r"(?:(?:,| and| or)\s+"
    + FLAG_WORD.pattern
    + r"){0,3})(?:\s+to be (?:set|enabled|specified|passed))?"
)
#: The OpenAI-compatible server's answer itself, as a client that pasted it received it: the model list
#: (``{"object":"list","data":[{"id":...,"object":"model"``), a completion, or an error object.
OPENAI_ANSWER = re.compile(
    r"\{\s*\"(?:id|object)\":\s*\"(?:list|error|chat\.completion|text_completion|cmpl-|chatcmpl-)"
)

#: Milestone patterns per phase (a line may match several: the highest phase wins).
MILESTONES: list[tuple[Phase, re.Pattern[str]]] = [
    (
        Phase.CONTAINER,
        re.compile(
            r"Starting new instance|Started container|Pulled container image|Successfully pulled image"
            r"|Container image .* already present|Default STARTUP .*probe succeeded|Created container"
            r"|" + LAUNCH_COMMAND,
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
            r"|Loading weights with|Loading model from scratch|Prefetching checkpoint files|Using (?:Flash"
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
            r"|Dynamo bytecode transform time|Directly load the compiled graph"
            r"|Compiling a graph for |Compiling model|profile_run|Multimodal Encoder profiling finished"
            r"|Initial profiling/warmup run took|(?:Profiling|Estimated) CUDA graph memory"
            # the profiling run's account (v0.6.5 .. v0.9, V0's worker and V1's gpu_worker; vLLM's formatter
            # prefixes each of its lines): "the current vLLM instance can use total_gpu_memory (79.11GiB) x
            # gpu_memory_utilization (0.90) = ...", "... the rest of the memory reserved for KV Cache is ..."
            r"|the current vLLM instance can use total_gpu_memory"
            r"|the rest of the memory reserved for KV Cache",
            _I,
        ),
    ),
    (
        Phase.KV_CACHE,
        re.compile(
            r"# \w+ blocks: \d|GPU KV cache size:|Available KV cache memory|Auto-fit max_model_len"
            r"|Maximum concurrency for [\d,]+ tokens"
            r"|num_gpu_blocks is",
            _I,
        ),
    ),
    (
        Phase.CUDA_GRAPHS,
        re.compile(
            r"Capturing (?:the model for )?CUDA ?graphs|Capturing cudagraphs|Graph capturing finished"
            r"|CUDA graph capture complete|Compile and warming up model for size",
            _I,
        ),
    ),
    (
        Phase.ENGINE_READY,
        re.compile(
            r"init engine \(profile, create kv cache, warmup model\) took|Processed prompts:"
            r"|Engine core ready|engine is ready|Core engine process \d+ ready",
            _I,
        ),
    ),
    (
        Phase.API_UP,
        re.compile(
            r"Starting vLLM API server|Starting vLLM server on \S|vLLM gRPC server started on"
            r"|Available routes are|Started server process|Application startup complete"
            r"|Uvicorn running on|Route: /v\d/|Application '[^']+' is ready at"
            r"|Deployed app '[^']+' successfully"
            # OpenLLM's ``openllm hello`` / ``serve`` once its BentoML server answers (0.6 ..)
            r"|^Model is ready\s*$",
            _I,
        ),
    ),
    (
        Phase.SERVING,
        re.compile(
            r"Avg prompt throughput|\"(?:GET|POST|PUT|DELETE"
            r"|HEAD) /\S* HTTP/\d(?:\.\d)?\" \d\d\d|Received request"
            r"|Added request|Finished request|CALL \w+ OK"
            rf"|{REQUEST_REFUSED.pattern}|{OPENAI_ANSWER.pattern}",
            _I,
        ),
    ),
    (
        Phase.SHUTDOWN,
        re.compile(
            r"received SIGTERM|Shutting down|shutdown signal|Waiting for application shutdown"
            r"|Application shutdown complete|Terminating instance|Finished server process|KeyboardInterrupt"
            # v0.26 ..: each process's shutdown steps ("[shutdown] EngineCore: trigger received signal=15")
            r"|\[shutdown\] ",
            _I,
        ),
    ),
]

#: One pattern that finds every milestone candidate (cheap first test per line shape).
ANY_MILESTONE = re.compile("|".join(f"(?:{p.pattern})" for _, p in MILESTONES), _I)

#: The API server's start-up lines that say the most: where it listens (vLLM's "Starting vLLM API
#: server on", current releases' "Starting vLLM server on", uvicorn's "Uvicorn running on") and that its
#: start completed (uvicorn's "Application startup complete"); a healthy verdict cites these.
API_LISTENING = re.compile(
    r"Starting vLLM API server\b.{0,40}? on \S|Starting vLLM server on \S|Uvicorn running on"
    r"|Application startup complete",
    _I,
)
#: Milestones that show this process's server up: what makes a start "completed". Answered traffic
#: alone is not one (on Cloud Run another instance may be serving while this one fails).
UP_PHASES = frozenset({Phase.ENGINE_READY, Phase.API_UP})

#: The banner c10::Error puts after its message, before the native frames ("Exception raised from
#: OperationSetup at .../compiler_depend.ts:203 (most recent call first):"): what failed is the record
#: before it.
NATIVE_BANNER = re.compile(r"^Exception raised from \S{1,200} at \S{1,300} \(most recent call first\):")
#: A Rust program's or library's panic (llguidance's tokenizer tries, tokenizers, a Rust server that
#: embeds Python): "thread '<unnamed>' panicked at toktrie/src/toktree.rs:1101:13:", its message on the
#: next line (Rust 1.73 on).
RUST_PANIC = re.compile(r"\bthread '[^'\n]{0,80}' panicked at\b")
#: The shape of a fatal error record, whatever its family.
FATAL = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:\(\S+ pid=\d+\)\s*)?(?:[\w.]+\.)?[A-Z]\w*(?:Error"
    r"|Exception):"
    r"|\] [\w.]*(?:Error|Exception): |Engine core initialization failed|died unexpectedly"
    r"|Container called exit\((?!0\))"
    r"|exited with (?:status|code) (?!0\b)|EngineCore failed to start|Worker failed|fatal error|^Killed$"
    r"|Segmentation fault|OOMKilled|CrashLoopBackOff|Back-off restarting failed container"
    r"|^\s*exitCode: (?!0\b)\d+"  # a Kubernetes container state (kubectl get pod -o yaml)
    # A C / C++ assert that failed (glibc: "file.cpp:43: fn: Assertion `expr' failed."): the process aborts
    r"|\bAssertion [`'][^\n]{1,600}?['`] failed\b"
    # torch.distributed's watchdog (ProcessGroupNCCL, and torch_npu's ProcessGroupHCCL after it) when a
    # collective failed: "... watchdog thread terminated with exception", "we are taking the entire
    # process down"
    r"|watchdog thread terminated with exception|taking the entire process down"
    # a Rust library's panic (RUST_PANIC); a C++ exception of torch's (c10::Error, also torch_npu's and
    # other backends' ops): its message, then "Exception raised from OperationSetup at
    # .../compiler_depend.ts:203 (most recent call first):" and the native frames; C++'s own end of an
    # uncaught one: "terminate called after throwing an instance of"
    r"|"
    + RUST_PANIC.pattern
    + r"|"
    + NATIVE_BANNER.pattern
    + r"|terminate called after throwing an instance of"
    # V0's multiprocessing worker reporting what a method raised in it ("Exception in worker
    # VllmWorkerProcess while processing method load_model: <the message>")
    r"|\bException in worker \S{1,80} while processing method \w{1,80}"
    # An exception reported by repr: asyncio's "future: <Future finished exception=AssertionError('...')>",
    # vLLM's "IndexError('Error in model execution: ...')"
    r"|exception=[\w.]*(?:Error|Exception)\(|^[\w.]*(?:Error|Exception)\(['\"]"
    # A model client's exception quoted inside a gateway's own record (LiteLLM's proxy: "... Exception
    # occured - litellm_call_id=... - litellm.Timeout: APITimeoutError - Request timed out."): a call to
    # the model server failed, whatever the rest of the log shows of the server
    r"|(?<![\w.])(?:litellm|openai)\.(?:exceptions\.)?(?:[A-Z]\w{0,60}Error|Timeout): "
    # A router's or gateway's words that the server it routes to is unhealthy, unreachable or absent
    # (vLLM production-stack's router: "gemma at http://10.52.0.7:8000 not healthy!", "Failed to get
    # model names from http://...: Cannot connect to host ...", "No backend available for model gemma";
    # LiteLLM's "No healthy deployment available", "No deployments available for selected model")
    r"|\bat https?://\S{1,200} not healthy\b|\bFailed to get model (?:names|info) from https?://"
    r"|\bNo (?:backend|healthy deployments?|deployments?) available for\b",
    _I,
)
FATAL_PREFILTER = re.compile(
    r"Traceback|Error|Exception|failed|died|exit|fatal|Killed|Segmentation|BackOff|Back-off"
    r"|not healthy|available for|litellm\.|openai\.|watchdog|process down|panicked|terminate called",
    _I,
)

#: An exception that says what went wrong (not one that only reports that something else did: an
#: engine that failed to start, died, or was cancelled).
EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::|\(['\"])|exception=[\w.]*(?:Error|Exception)\("
    r"|^Segmentation fault|Fatal Python error"
    # a KeyError logged by its message alone (V0's engine process: ``logger.exception(e)`` prints str(e),
    # "'layers.0.mlp.gate_up_proj.deq_scale'", then the traceback): a dotted parameter path in quotes
    r"|^'(?:\w{1,80}\.){2,12}\w{1,80}'$"
    # V0's multiprocessing worker quoting what a method raised in it, where no traceback follows (the
    # worker appends one, and its own last line is then the exception to read)
    r"|\bException in worker \S{1,80} while processing method \w{1,80}: (?![^\n]*Traceback \(most recent)"
)
#: The engine saying its own start failed (V1's engine core, v0.7 .. current; V0's MQLLMEngine): it
#: names no cause, but places what came before it in the start-up.
ENGINE_START_FAILED = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|Engine process failed to start"
)
REPORTS_ONLY = re.compile(
    ENGINE_START_FAILED.pattern
    + r"|EngineDeadError|Background loop has errored|died unexpectedly|CancelledError|KeyboardInterrupt"
    r"|SystemExit|See (?:the )?root cause above|Worker failed|WorkerProc hit an exception"
    # An exception whose message is another's traceback (Ray: ``RuntimeError(traceback.format_exc())``)
    r"|(?:Error|Exception): Traceback \(most recent call last\)",
    re.IGNORECASE,
)
#: An exception line that names its class ("KeyError: 'x'"), as against one logged by its message alone.
EXCEPTION_NAMED = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b")
EXCEPTION_PREFILTER = re.compile(r"Error|Exception|Segmentation|Fatal|^'\w")

#: Kinds of error, by what the exception says of itself (its class and its first words), for an
#: exception no family's wording explains: with the phase it happened in, they name the family.
KIND_MISSING = re.compile(
    r"FileNotFoundError|No such file or directory|does(?: not|n't) exist|EntryNotFound|not found\b", _I
)
KIND_DENIED = re.compile(r"PermissionError|Permission denied|Unauthori[sz]ed|Forbidden|AccessDenied", _I)
#: An error the engine's own code raises while it builds itself from its configuration: a rejected
#: value, type or key, and equally an attribute it expected or arithmetic on a size it got (a tokenizer
#: class without the attribute a feature reads, a parallel size of 0): this configuration does not run.
KIND_CONFIG = re.compile(
    r"^(?:[\w.]+\.)?(?:ValueError|TypeError|KeyError|AssertionError|NotImplementedError|AttributeError"
    r"|ZeroDivisionError|"
    r"argparse\.ArgumentError|ValidationError|pydantic[\w.]*ValidationError)\b"
)
#: An error that tells its reader which of the engine's settings to change ("Please increase
#: max_num_batched_tokens", "try setting --max-model-len", "consider reducing `max_num_seqs`"): the
#: engine checked what it was given and refused it, whatever step of the start-up ran the check. ``verb``
#: is the change asked for, ``name`` the setting (as a flag or as the engine argument's name).
KIND_ASKS_SETTING = re.compile(
    r"\b(?:please|try|consider|then|you (?:can|must|should|need to|may))\s(?:to\s)?"
    r"(?P<verb>increas|decreas|reduc|lower|rais|set|specify|pass|enabl|disabl)\w{0,4}\s[^.\n]{0,60}?"
    r"(?P<name>--[a-z][\w-]{1,60}|\b[a-z]{2,20}(?:_[a-z]{1,20}){1,6}\b)",
    _I,
)
#: The engine's on/off switches a check may ask to turn on ("set the option `trust_remote_code=True`", "use
#: the `--enforce-eager` flag"), by their engine-argument names: a plan adds the bare flag.
ASKABLE_SWITCHES = frozenset(
    {"trust_remote_code", "enforce_eager", "disable_custom_all_reduce", "enable_chunked_prefill"}
)
#: An error that names an environment variable of the engine's to set, and its value ("Set Flashinfer
#: backend by export VLLM_ATTENTION_BACKEND=FLASHINFER"): the engine refused what it was configured with.
KIND_ASKS_ENV = re.compile(
    r"\b(?:export|set(?:ting)?)\s(?:the\s)?(?:environment\svariable\s|env\s)?`?(?P<env>VLLM_\w{2,60}?)`?"
    r" ?= ?`?(?P<value>[\w.-]{1,40})"
)
#: A setting's figure as such a check prints it: ``max_num_batched_tokens (2048)``, ``max_model_len=8192``,
#: ``max_num_seqs is 256``.
FACT_SETTING_FIGURE = re.compile(
    r"\b(?P<name>[a-z]{2,20}(?:_[a-z]{1,20}){1,6}) ?(?:\(|=|is ) ?(?P<value>\d{1,9})\b"
)
KIND_ENVIRONMENT = re.compile(
    r"^(?:[\w.]+\.)?(?:ImportError|ModuleNotFoundError)\b|undefined symbol|cannot import name"
    r"|No module named"
    # a program embedding Python that could not import it (ai-dynamo's Rust worker: "Failed to import
    # python 'vllm' module. Are we running in the correct venv?")
    r"|Failed to import python '[\w.]{1,80}' module",
    _I,
)
KIND_CHECKPOINT = re.compile(
    r"size mismatch|Error\(s\) in loading state_dict|unexpected key|Missing key|KeyError: '[\w.]*weight"
    # vLLM's weight loader (AutoWeightsLoader, models/utils.py): a checkpoint tensor the model has no
    # place for, the checkpoint's layout not this model class's
    r"|There is no module or parameter named"
    # a parameter the checkpoint names that the model's parameters lack (``params_dict[name]``): a KeyError
    # of a dotted parameter path, with its class or by its message alone
    r"|^(?:KeyError: )?'(?:\w{1,80}\.){2,12}\w{1,80}'$"
    # torch's shape check on a loaded tensor ("The size of tensor a (1280) must match the size of tensor b
    # (2560) at non-singleton dimension 1"): a checkpoint's shape not this model's or parallel layout's
    r"|The size of tensor a \(\d+\) must match the size of tensor b",
    _I,
)
#: One piece calling another with what the other does not take or have: a keyword or a positional
#: argument the callee's signature lacks, an attribute or a name its module no longer has. Raised while
#: a start builds itself (a wrapper constructing vLLM's engine, vLLM calling a kernel library), the
#: pieces' versions do not fit together: a configuration this image does not run (an image, a pin or a
#: flag fixes it, a restart repeats it). Serving, the same words are a bug of one code path.
KIND_API_MISMATCH = re.compile(
    r"^(?:[\w.]+\.)?(?:TypeError: [\w.<>]{1,200}\(\) (?:got an unexpected keyword argument"
    r"|missing \d{1,3} required (?:positional|keyword-only) arguments?|takes \d{1,3} positional arguments?"
    r" but \d{1,3} (?:were|was) given|got multiple values for (?:keyword )?argument)"
    # (not "'NoneType' object has no attribute": a value that was None, the ordinary bug)
    r"|AttributeError: (?:module )?'(?!NoneType')[\w.]{1,200}' (?:object )?has no attribute"
    # a library's own AttributeError subclass, raised where an attribute moved (transformers 5:
    # "AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute")
    r"|\w+AttributeError:"
    r"|ImportError: cannot import name)"
)
#: Functions that build a server, an engine or a worker from its configuration (the constructors, the
#: engine's factories; not a script's top level, which also runs a client's requests): a traceback
#: through one of them and through no step of the engine or request handler (``STEP_FRAMES``,
#: ``REQUEST_FRAMES``) was raised by a start.
BUILD_FRAMES = re.compile(
    r"^(?:__init__|__post_init__|from_engine_args|from_vllm_config|from_config"
    r"|build_\w{1,80}|create_\w{0,80}engine\w{0,80}|init_\w{1,80}|_init_\w{1,80}|setup\w{0,40})$"
)
#: A request being handled (the OpenAI frontend's and the wrappers' handlers, a model's forward pass):
#: an exception under one was raised serving, whatever constructor it passed through.
REQUEST_FRAMES = re.compile(
    r"^(?:create_\w{0,40}(?:completion|embedding|response|transcription)s?|\w{0,60}_request\w{0,40}"
    r"|handle\w{0,60}|forward|__call__|generate\w{0,40}|chat|encode|embed\w{0,60}|sample\w{0,40})$"
)

#: An exception saying this engine cannot do what it was asked at all (a kernel, a dtype, a feature
#: or a device that is not implemented or not supported): during start-up, whatever the phase, that is
#: a configuration this build does not run.
KIND_UNSUPPORTED = re.compile(
    r"NotImplementedError|\bNot Implemented\b|(?<!(?-i:Operation) )\bnot (?:yet )?(?:supported|implemented)\b"
    r"|\bis unsupported\b"
    # a requirement the component states of its configuration, unmet ("vLLM Triton backend must be
    # configured to use decoupled model transaction policy")
    r"|\bmust be configured (?:to|with|for)\b"
    # a compiled kernel this build does not have (torch's custom-op namespace lacks the op)
    r"|'_OpNamespace' '\w+' object has no attribute"
    # vLLM's multimodal processing (multimodal/processing.py, v0.7 .. current) when the model's Hugging
    # Face processor fails on its inputs: in the start-up those are the profiling run's dummy inputs, so
    # this processor does not run with this vLLM / transformers
    r"|Failed to apply \w{1,80}Processor\b"
    # a kernel's shape constraint the model's dimensions do not meet as configured (Marlin's "size_n =
    # 5152 is not divisible by tile_n_size = 64" at tensor parallel 2): this kernel cannot run that split
    r"|\b\w{1,40} = \d{1,9} is not divisible by \w{1,40} = \d{1,9}\b",
    _I,
)
#: What this installation lacks for what it was asked: a toolchain, library or backend not installed or
#: not found (a JIT-built kernel with no nvcc, a backend forced but absent), or a facility of the
#: machine the engine needs ("UVA is not available"). Raised in the start-up, this image or machine
#: does not run this configuration: a flag, a model or an image fixes it, a restart does not.
KIND_NOT_INSTALLED = re.compile(
    r"\bnot installed\b|\bis not available\b|\bare not available\b|Could not find nvcc|\bnvcc\b[^.]*not found"
    r"|\bcuda_home\b|\bCUDA_HOME\b|\brequires? (?:the )?[\w.-]+ (?:to be installed|package)"
    r"|\bplease install\b|\bpip install\b|\b(?:module|package|library) (?:was |is )?not found\b"
    # A name an optional import left as None (``try: from flashinfer import X`` / ``except ImportError:
    # X = None``), then called: the backend's library is not in the image.
    r"|'NoneType' object is not callable"
    # A model class without the method a mode calls (pipeline parallelism's
    # ``make_empty_intermediate_tensors``): this model's implementation does not support the mode.
    r"|^(?:[\w.]+\.)?AttributeError: '\w+For(?:CausalLM|ConditionalGeneration|[A-Z]\w*)' object has no"
    r" attribute",
    _I,
)
#: Code torch.compile generated (Inductor's cache, an FX graph): an exception raised there is the
#: compiled graph's, and the log cannot say whether the graph, the checkpoint or the compiler is wrong.
COMPILED_CODE = re.compile(r"torch_compile_cache/|inductor_cache/|/torch/_inductor/|<eval_with_key>")
#: torch.compile's own compiler (vLLM's compilation backend, Dynamo) failing, by where it raised or by its
#: own words (vLLM's "failed to get the hash of the compiled graph", torch's "This error most often comes
#: from a incorrect fake (aka meta) kernel for a custom op", Dynamo's "Set TORCHDYNAMO_VERBOSE=1"): a bug
#: of the compiler stack with this model, which eager mode (no torch.compile) goes around.
COMPILER_CODE_PATH = re.compile(r"[/\\]vllm[/\\]compilation[/\\]|[/\\]torch[/\\]_dynamo[/\\]")
COMPILER_SAID = re.compile(
    r"failed to get the hash of the compiled graph|incorrect fake \(aka meta\) kernel|TORCHDYNAMO_VERBOSE"
    r"|BackendCompilerFailed|torch\._dynamo\.exc\."
)
#: ... unless what failed there is the read of a file that is empty or cut short (json's "Expecting
#: value: line 1 column 1 (char 0)", pickle's "Ran out of input" / "pickle data was truncated"): a
#: cache entry a killed run left half-written, which a start with an empty cache writes again.
CACHE_FILE_CUT = re.compile(
    r"Expecting value: line \d+ column \d+ \(char \d+\)|Ran out of input|pickle data was truncated"
)
#: Frames of the engine's step loop (serving, or an offline ``LLM()`` generating): an exception below
#: one of them happened while the engine served, not while it started.
STEP_FRAMES = re.compile(
    r"^(?:_run_engine|step|run_busy_loop|_process_engine_step|step_with_batch_queue|run_engine_loop"
    r"|engine_step|generate)$"
)
#: The engine's own loop, which catches nothing: an exception that passes through one of these frames
#: ends the loop, and the engine with it (V0's ``AsyncLLMEngine.run_engine_loop``, whose task's end
#: ``_raise_exception_on_finish`` / ``_log_task_completion`` reports, and its ``engine_step``; V0's
#: ``MQLLMEngine.run_engine_loop`` / ``engine_step``, which re-raises; V1's ``run_busy_loop``). Not an
#: offline ``LLM()``'s ``_run_engine``: that is a script's call, failing the script.
LOOP_FRAMES = re.compile(
    r"^(?:run_engine_loop|engine_step|run_busy_loop|_raise_exception_on_finish|_log_task_completion)$"
)
#: A CUDA graph being captured or replayed, by the function on a traceback's stack (V0 / V1
#: ``capture_model``, the runners' ``_replay`` / ``run_pw_graph``, anything named for CUDA graphs): a crash
#: under one implicates the graphs, which eager mode does without.
GRAPH_FRAMES = re.compile(r"^(?:capture_model|capture_graph|_?replay|run_\w*graph|\w*cuda_?graph\w*)$", _I)
#: No accelerator where the engine was built: the process was given no GPU (a scheduler, a Ray
#: placement, a container without the device).
KIND_NO_DEVICE = re.compile(
    r"No CUDA GPUs are available|no CUDA-capable device|Found no NVIDIA driver|CUDA driver initialization"
    r" failed|does not allocate any GPUs|No (?:GPU|accelerator)s? (?:found|available|detected)"
    # the container has the CUDA libraries but not the node's driver (cudaErrorStubLibrary)
    r"|CUDA driver is a stub library|cudaErrorNoDevice\b|cudaErrorStubLibrary"
    # v0.7 .. current: no CUDA / ROCm / other platform found in the process ("No platform detected, vLLM
    # is running on UnspecifiedPlatform", then "RuntimeError: Failed to infer device type")
    r"|No platform detected\b|Failed to infer device type",
    _I,
)
#: A weights file that cannot be read as what it says it is: cut short or overwritten (an interrupted
#: download, a disk that filled, a cache another process was writing). safetensors' own errors (its Rust
#: SafeTensorError: InvalidHeader*, HeaderTooLarge / HeaderTooSmall, MetadataIncompleteBuffer, "incomplete
#: metadata, file not fully covered"), torch.load's zip reader and unpickler. While the weights load, the
#: checkpoint as stored is not there whole: fetch it again (the config or the flags are not the cause).
KIND_CORRUPT = re.compile(
    r"Error while deserializing header|\bSafetensorError\b|\bHeaderToo(?:Large|Small)\b"
    r"|MetadataIncompleteBuffer|incomplete metadata, file not fully covered"
    r"|PytorchStreamReader failed|failed finding central directory"
    r"|invalid load key|UnpicklingError"
)
#: A remote the server had to reach did not answer (the model hub, a bucket, a registry).
KIND_UNREACHABLE = re.compile(
    r"MaxRetryError|Max retries exceeded|ConnectionError|Connection refused|Name or service not known"
    r"|Temporary failure in name resolution|SSL\w*Error|ConnectTimeout|ReadTimeout|Network is unreachable"
    r"|LocalEntryNotFoundError|cannot find the requested files in the local cache",
    _I,
)

#: A traceback's frame: ``File "...", line N, in FUNC``.
FRAME = re.compile(r'^File "(?P<path>[^"]*)", line \d+, in (?P<fn>\S+)')
#: A frame's file that is an installed library's (or vLLM's own source tree), not a script's.
LIBRARY_PATH = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]vllm[/\\]|^<frozen ")
#: Python's own code for what processes share (multiprocessing's semaphores, shared memory, the
#: handles it passes between them): an exception raised there ("FileNotFoundError" in
#: ``SemLock._rebuild``) is the host taking those objects away under a running engine (systemd's
#: RemoveIPC, a cleaner of /dev/shm), not anything of the model or its flags.
IPC_CODE_PATH = re.compile(
    r"[/\\]multiprocessing[/\\](?:synchronize|shared_memory|resource_sharer|resource_tracker)\.py"
)
#: vLLM's configuration code: the engine's arguments and config classes (``vllm/config/``, ``config.py``,
#: ``engine/arg_utils.py``) and the KV cache's layout (``v1/core/kv_cache_utils.py``). A rejected value
#: raised there, at any step of the start-up, is a setting it refused, not a bug of a step.
CONFIG_CODE_PATH = re.compile(
    r"[/\\]vllm[/\\](?:config[/\\]|config\.py|engine[/\\]arg_utils\.py|v\d[/\\]core[/\\]kv_cache_utils\.py)"
)
#: vLLM's own check of one family, by its function name (stable across releases, read from the
#: source): a pasted traceback cut at one of them, before its exception, still says which check failed.
#: ``_get_and_verify_max_len`` (config.py: the context against the model's limit), V0's
#: ``raise_if_cache_size_invalid`` (worker.py) and V1's ``check_enough_kv_cache_memory``
#: (kv_cache_utils.py: one request's KV cache against the memory left).
FAMILY_CHECK_FRAMES = {
    "context_too_long": re.compile(r"^(?:_get_and_verify_max_len|verify_max_model_len)$"),
    "kv_cache_oom": re.compile(r"^(?:raise_if_cache_size_invalid|_?check_enough_kv_cache_memory)$"),
}
#: What joins two tracebacks of one chain.
CHAINED = re.compile(r"During handling of the above exception|The above exception was the direct cause")

#: The banner of a Python traceback (what failed is the exception line that ends it).
TRACEBACK_HEAD = re.compile(r"Traceback \(most recent call last\)")

#: A server that came up (a later one means an earlier start-up failure recovered).
STARTED = re.compile(
    "|".join(f"(?:{p.pattern})" for ph, p in MILESTONES if ph in (*UP_PHASES, Phase.SERVING)), _I
)
#: An answer that is a server error (a 5xx after a crash is the failure, not service).
SERVER_ERROR_STATUS = re.compile(r"HTTP/\d(?:\.\d)?\" 5\d\d|\bcode(?:=|\":\s?)5\d\d\b")
#: A request refused as the client's (a 4xx): the access line, or the OpenAI client's "Error code: 400 - ...".
CLIENT_ERROR_STATUS = re.compile(r"HTTP/\d(?:\.\d)?\" 4\d\d|\bError code: 4\d\d\b|\b400 Bad Request\b")

#: A request the server answered: a 2xx on an inference route, or an engine stats line with a request
#: running or tokens generated (vLLM's periodic "Engine 000: Avg prompt throughput: ...").
REQUEST_SERVED = re.compile(
    r"\"(?:POST|GET) /v\d/\S* HTTP/\d(?:\.\d)?\" 2\d\d\b"
    r"|Avg generation throughput: (?!0\.0 )\d[\d.]* tokens/s|Running: [1-9]\d* reqs"
)
REQUEST_SERVED_PREFILTER = re.compile(r"HTTP/|generation throughput|Running: ")
#: A health check the server answered (a healthy server's most direct evidence).
HEALTH_ANSWERED = re.compile(r"\"GET /(?:health|healthz|ready|readyz|ping)\S* HTTP/\d(?:\.\d)?\" 200\b")
HEALTH_PREFILTER = re.compile(r"\"GET /(?:health|healthz|ready|readyz|ping)")

#: A fresh server start (not just traffic, which other instances may be serving).
RESTARTED = re.compile("|".join(f"(?:{p.pattern})" for ph, p in MILESTONES if ph in UP_PHASES), _I)

#: An orderly shutdown: tracebacks after it are not causes.
SHUTDOWN = re.compile(
    r"received SIGTERM|SIGTERM|Shutting down|shutdown signal|Waiting for application shutdown"
    r"|Application shutdown complete|Terminating instance|scaling down|KeyboardInterrupt|CancelledError"
    r"|Finished server process",
    re.IGNORECASE,
)
#: A worker tearing itself down because its parent went away ("Parent process exited, terminating
#: worker", "WorkerProc shutting down."): what the parent died of, or was stopped by, is the shutdown;
#: this line alone says neither (the API server's traceback may come after it).
WORKER_TEARDOWN = re.compile(
    r"Parent process exited|terminating worker|WorkerProc shutting down"
    r"|Worker\w{0,40} (?:proc\w* )?shutting down",
    re.IGNORECASE,
)
#: The weights loaded (what blocked loading did not happen, or did not matter).
LOADED = re.compile(
    r"Loading (?:model )?weights took|Model loading took|Available KV cache memory|GPU KV cache size"
    r"|# GPU blocks",
    re.IGNORECASE,
)
#: A start still under way: V1's API server waiting for its engine-core processes (v1/engine/utils.py
#: ``wait_for_engine_startup``, every 10 s until they report ready). A paste may hold these and not the
#: start's banner: the start began all the same, and must be seen completing.
START_PENDING = re.compile(r"Waiting for \d{1,4} local, \d{1,4} remote core engine proc\(s\) to start")
#: A (re)start of the server process (or its container): the life starts over from here.
START_MARK = re.compile(
    r"vLLM API server version|Initializing (?:a V\d |an )LLM engine|non-default args"
    r"|Automatically detected platform|^args: Namespace\(|Starting new instance|Started container"
    r"|" + LAUNCH_COMMAND,
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------------------
# GPU out of memory: weights_oom, kv_cache_oom, runtime_oom (where it happened)  (graph/analyzers/_oom.py)
# --------------------------------------------------------------------------------------------------

OOM = re.compile(
    # (not Ray's ray.exceptions.OutOfMemoryError / RayOutOfMemoryError: host RAM, below; nor a traceback's
    # source line "raise OutOfMemoryError(", which is code, not the message)
    r"CUDA out of memory|(?<!ray\.exceptions\.)(?<!Ray)(?<!raise )OutOfMemoryError"
    r"|out of memory occurred when warming up sampler"
    r"|not enough GPU memory|CUDA error: out of memory|cudaErrorMemoryAllocation|HIP out of memory"
    # the CUDA driver API's CUDA_ERROR_OUT_OF_MEMORY as torch raises it ("RuntimeError: CUDA driver error:
    # out of memory": a kernel library's own allocation, Marlin's weight repack, a cuMem pool)
    r"|CUDA driver error: out of memory"
    # the other accelerators' torch backends word their caching allocator's OOM as CUDA's does:
    # torch_npu (Ascend) "NPU out of memory. Tried to allocate", torch's XPU "XPU out of memory", MPS
    # "MPS backend out of memory"
    r"|\b[NX]PU out of memory|MPS backend out of memory"
    # a library handle or workspace the GPU had no memory left for: "CUDA error: CUBLAS_STATUS_ALLOC_FAILED
    # when calling `cublasCreate(handle)`", cuDNN's CUDNN_STATUS_ALLOC_FAILED
    r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    # NCCL's own allocations (libnccl 2.27's WARN lines): "Cuda failure 'out of memory'", "Cuda failure 2
    # 'out of memory'", "Failed to CUDA calloc 9437184 bytes"
    r"|Cuda failure (?:\d{1,4} )?'out of memory'|Failed to CUDA calloc"
    # vLLM's own words for a device allocation that failed, v0.6 .. current: "This might be due to
    # insufficient GPU memory" (profile run), "insufficient memory to allocate the weight" /
    # "... to allocate kv cache" (v0.11 layer init); the phase names the family
    r"|(?:insufficient|not enough) (?:GPU|CUDA|device) memory"
    r"|insufficient memory to allocate (?:the )?(?:weight|kv cache)"
    # "The required memory size 24.5 GB for model is higher than the total available device memory"
    r"|(?:higher|larger|more) than the (?:total )?available (?:device|GPU) memory"
    # XLA on a TPU (vLLM's TPU backend, JAX): the device's HBM, as XLA words it: "RESOURCE_EXHAUSTED:
    # Ran out of memory on HBM", "Error allocating device buffer", a compiled program that does not
    # fit ("RuntimeProgramAllocationFailure", "Attempting to reserve 384.11M at the bottom of memory")
    r"|Ran out of memory (?:on|in memory space) HBM|Error allocating device buffer"
    r"|RuntimeProgramAllocationFailure|Attempting to reserve [\d.]+\w? at the (?:bottom|top) of memory",
    _I,
)
OOM_WEIGHTS = re.compile(
    r"load_model|load_weights|initialize_model|init_parameters|_init_model|make_layers|create_weights"
    r"|model_loader|weight_loader|get_model\(|Failed to load model|process_weights_after_loading"
    r"|Loading safetensors|Loading weights|load_state_dict"
    # a quantized checkpoint's weights repacked for their kernel as they load (gptq_marlin_repack,
    # awq_marlin_repack, ..., under process_weights_after_loading)
    r"|_repack\b",
)
#: A worker of a tensor-parallel group reporting the method it ran when it failed (v0.5 .. v0.10's
#: multiproc executor): "Exception in worker VllmWorkerProcess while processing method load_model."
WORKER_METHOD = re.compile(r"\bException in worker \S{1,80} while processing method (\w{1,80})")
OOM_KV = re.compile(
    r"initialize_kv_cache|_allocate_kv_cache|initialize_cache|allocate_kv_cache|_init_cache"
    r"|CacheEngine|_reshape_kv_cache|init_kv_cache|initialize_from_config",
)
OOM_RUNTIME = re.compile(
    r"profile_run|_dummy_run|_dummy_sampler_run|warming up sampler|capture_model|cuda_graph|CUDAGraph"
    r"|capture_graph|determine_available_memory|determine_num_available_blocks|compile_or_warm_up_model"
    r"|execute_model|_model_forward|sample_tokens|step_with_batch_queue|warm_up"
    # the engine's own loop (``LOOP_FRAMES``): it runs once the engine is built, so what ran out under it
    # ran out serving
    r"|run_busy_loop|_process_engine_step|run_engine_loop|engine_step"
    # sleep mode (v0.7.3 .. current): the engine that slept gives its GPU memory back when woken
    # (``LLM.wake_up``, ``CuMemAllocator.wake_up``), long after its weights first loaded
    r"|wake_up",
)
#: A frame of a forward pass (``in forward``, a kernel's ``..._fwd``): the weights were loaded by then, so
#: an OOM under it is not the model failing to load, even where no other frame says which step ran.
#: A frame of the model running (its forward pass, a kernel's ``_fwd``) or of a step being readied for
#: it (the model runners' ``_prepare_inputs`` / ``prepare_model_input``, which build a batch's tensors
#: and attention masks): the weights were in by then.
FORWARD_FRAME = re.compile(
    r", in (?:\w{0,80}(?:forward|_fwd)\w{0,80}|_prepare_inputs|prepare_model_input|_make_attention_mask)\s*$",
    re.M,
)
OOM_CREATE_WEIGHTS = re.compile(r"Failed to (?:create|load|allocate) \w*[ \w]*weights", _I)

#: Where in the start-up a traceback was, by the functions on its stack (for a paste that begins at the
#: traceback and shows no milestone before it). The deepest frame that names a step wins.
FRAME_PHASES: list[tuple[Phase, re.Pattern[str]]] = [
    # The command line being parsed and checked (argparse's own ``parse_args`` with the flags' type
    # converters; the OpenAI server's ``validate_parsed_serve_args``, v0.5 .. current, and the chat
    # template check it makes): before any engine exists.
    (
        Phase.ARGS,
        re.compile(r"^(?:_?parse_args|parse_known_args|validate_parsed_serve_args|validate_chat_template)$"),
    ),
    (
        Phase.CONFIG,
        re.compile(
            r"get_config|get_hf_file|AutoConfig|create_engine_config|create_model_config|get_tokenizer"
            r"|AutoTokenizer|_init_executor|_init_workers_ray|init_device|set_device|_cuda_init"
            r"|init_distributed_environment|init_worker"
            # the model config's own checks of what it was given (config.py's _get_and_verify_dtype /
            # _max_len, verify_with_parallel_config, _verify_quantization, ...): not a bare _verify_args,
            # which SamplingParams also runs per request, nor speculative decoding's _verify_tokens
            r"|^_get_and_verify_\w{1,40}$|^verify_with_\w{1,40}$"
            r"|^_verify_(?:quantization|cuda_graph|tokenizer_mode|load_format|bnb_config|embedding_mode)$"
            # V1's engine-core process builds its engine here (then runs its busy loop, below)
            r"|^run_engine_core$"
        ),
    ),
    # The engine's step loop: a frame below one of the start's is serving, not starting (its phase
    # is left to the milestones).
    (
        Phase.NONE,
        re.compile(r"^(?:run_busy_loop|_process_engine_step|step|step_with_batch_queue|execute_model)$"),
    ),
    (Phase.DOWNLOAD, re.compile(r"snapshot_download|hf_hub_download|download_weights_from_hf|_download")),
    (Phase.LOADING, OOM_WEIGHTS),
    (Phase.PROFILING, OOM_RUNTIME),
    # torch.compile's compiler (Inductor's entry), which vLLM runs on the model's first forward pass:
    # the profiling run, after the weights loaded
    (Phase.PROFILING, re.compile(r"^compile_fx$")),
    (Phase.KV_CACHE, OOM_KV),
]
# --------------------------------------------------------------------------------------------------
# auth_denied  (graph/analyzers/auth_denied.py)
# --------------------------------------------------------------------------------------------------

AUTH = re.compile(
    r"Cannot access gated repo|gated repo|Access to model \S+ is restricted|\b401 Client Error"
    r"|\b403 Client Error"
    r"|401 Unauthorized|403 Forbidden|Invalid (?:user )?token|Invalid credentials|authentication required"
    # (gRPC's status code in its own capitals: a field named permission_denied=False is no denial)
    r"|Permission denied|PermissionError|(?-i:PERMISSION_DENIED)|does not have storage\.\w+\.\w+ access"
    r"|AccessDenied|not in the authorized list|Unauthenticated"
    # Google: gRPC "code = PermissionDenied desc = Permission 'secretmanager.versions.access' denied",
    # ADC missing ("google: could not find default credentials"), "Request had insufficient
    # authentication scopes", "does not have permission to access", invalid_grant / expired tokens
    r"|code = PermissionDenied|Permission '[\w.]+' denied|could not find default credentials"
    r"|DefaultCredentialsError|insufficient authentication scopes|does not have permission to access"
    r"|invalid_grant|token (?:has )?expired|401 Unauthorized|HTTP 401|HTTP 403"
    r"|NoCredentialsError|Unable to locate credentials|caller does not have permission"
    # an HTTP client's error naming the status: Rust's reqwest / ureq ``Status(403, Response[...])``,
    # Python's ``status_code=401`` (not an access log's "status": 401 for one client's bad key, nor a
    # probe's "statuscode: 403")
    r"|\bStatus\(40[13],|\bstatus_code=40[13]\b",
    _I,
)
AUTH_PREFILTER = re.compile(
    r"gated|restricted|Client Error|Unauthori[sz]ed|Forbidden|Invalid|authenticat|Permission|PERMISSION"
    r"|does not have storage|AccessDenied|authorized list|credentials|scopes|invalid_grant|expired"
    r"|does not have permission|HTTP |Unable to locate|caller does not|status",
    _I,
)
AUTH_EXCLUDE = re.compile(
    r"Repository Not Found|artifactregistry\.repositories|pull access denied|manifest|pulling|Failed to pull"
    r"|ImagePull|Read-only file system",
    _I,
)

# --------------------------------------------------------------------------------------------------
# context_too_long  (graph/analyzers/context_too_long.py)
# --------------------------------------------------------------------------------------------------

CONTEXT = re.compile(
    r"is greater than the derived max_model_len|maximum context length is \d+"
    r"|is longer than the maximum model length"
    r"|exceeds the model's maximum context|prompt \(\d+ tokens\) is too long"
    r"|Input prompt \(\d+ tokens\) is too long"
    r"|max_model_len .* exceeds .*max_position_embeddings"
    r"|Please reduce the length of the messages|is too long and exceeds (?:the )?limit"
    # The stable parts of vLLM's request-length checks, v0.4 .. current: "The prompt (total length N)
    # is too long to fit into the model (context length M)" (v0.6-v0.7), "... is longer than the maximum
    # model length of M" (V1), "Input length (N) exceeds model's maximum context length (M)" (v0.20 ..)
    r"|is too long to fit into the model|\(context length \d+\)|longer than the maximum model length of \d+"
    r"|exceeds (?:the )?model'?s? maximum context length"
    # The comparison itself, v0.5 .. current, in the OpenAI, pooling and scoring frontends: "'max_tokens'
    # (16384) cannot be greater than the model's maximum context length (8192)", "truncate_prompt_tokens
    # value is greater than max_model_len", "query + document length (9210) must be less than
    # max_model_len (8192)", "the prompt has 9210 tokens, more than max_model_len=8192", the tokenizer
    # group's "Input too long.", the embedder's "Input of 9210 tokens exceeds max_tokens=8192 with
    # truncate=NONE"
    r"|(?:greater|larger|more) than (?:the )?(?:model's )?(?:maximum context length|max_model_len\b)"
    r"|must be less than max_model_len|\bInput too long\b|tokens exceeds max_tokens=\d+"
    # Gateways in front of vLLM: LiteLLM's exception for a context overflow (ContextWindowExceededError,
    # whatever the provider said), and the OpenAI-style "The input (N tokens) is longer than the model's
    # context length (M tokens)."
    r"|ContextWindowExceededError|is longer than the model's context length"
    # vLLM's renderer, v0.17 .. (third pass): "You passed 9000 input tokens and requested 512 output
    # tokens. However, the model's context length is only 8192 tokens, ..."
    r"|the model'?s context length is only \d+",
    _I,
)

#: A request the scheduler turned away for its length, which V0 (v0.4 .. v0.10) prints as a WARNING
#: ("Input prompt (9000 tokens) is too long and exceeds limit of 8192"): the failure is that request's,
#: so the warning counts (unlike a warning about a flag).
CONTEXT_REJECTED = re.compile(
    r"Input prompt \(\d+ tokens\)(?: \+ lookahead slots \(\d+\))? is too long and exceeds"
)

# --------------------------------------------------------------------------------------------------
# engine_crash  (graph/analyzers/engine_crash.py)
# --------------------------------------------------------------------------------------------------

CRASH = re.compile(
    r"illegal memory access|[NH]CCL error|ncclInternalError|ncclUnhandledCudaError|ncclSystemError"
    r"|Segmentation fault|SIGSEGV|core dumped|uncorrectable ECC error|Xid \d+"
    r"|CUDA error: (?!out of memory|CUDA driver version is insufficient|CUBLAS_STATUS_ALLOC_FAILED)\w"
    r"|CUBLAS_STATUS_(?!ALLOC_FAILED)\w+|cudaError(?!MemoryAllocation|InsufficientDriver)\w+"
    r"|CUDA driver error(?!: out of memory)"
    r"|cudaErrorIllegalAddress|Fatal Python error|watchdog.*timeout|watchdog thread terminated with exception"
    # C++ aborts and the distributed backend: "terminate called after throwing an instance of
    # 'c10::Error'", "Aborted (core dumped)", torch.distributed.DistBackendError, ProcessGroupNCCL
    r"|terminate called after throwing|Aborted \(core dumped\)|SIGABRT|DistBackendError|ProcessGroupNCCL"
    r"|Triton Error \[CUDA\]|CUDA kernel errors might be asynchronously reported"
    # Ascend's runtime (torch_npu): "ERR00100 PTA call acl api failed", "rtKernelLaunch execute failed",
    # "The process exits for this inner error"
    r"|PTA call acl api failed|rtKernelLaunch execute failed|The process exits for this inner error"
    # Gloo, the CPU side of torch.distributed (metadata broadcast between TP / PP ranks)
    r"|gloo/transport/\S+\] (?:Read|Write) error|Gloo connectFullMesh failed"
    # Ray: a worker process that died under a task ("Worker exit type: SYSTEM_ERROR")
    r"|A worker died or was killed while executing a task by an unexpected system error"
    r"|Worker exit type: SYSTEM_ERROR"
    # Ray's own words for a worker that died or never joined, 2.9 .. 2.40: WorkerCrashedError "The worker
    # died unexpectedly while executing this task", "Failed to register worker <id> to Raylet" / "Failed
    # to register worker to Raylet: IOError", a node the GCS "has been marked dead because the detector
    # has missed too many heartbeats from it"
    r"|The worker died unexpectedly while executing|Failed to register worker\b[^\n]{0,80}\bto Raylet"
    r"|has been marked dead because the detector has missed too many heartbeats"
    # a collective between ranks that failed (v0.26 ..: "Fault detected in EP all2all communication")
    r"|Fault detected in [\w ]*communication",
    _I,
)
#: The banner torch.distributed puts before NCCL's own account of what failed (getNcclErrorDetailStr, 2.0
#: ..: "NCCL error in: ..., unhandled system error ..." / "ncclSystemError: ..." / "Last error:" / "Error
#: while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888), error: No space left on
#: device (28)"): the record after it is the cause of the NCCL error, read with ``NCCL_DETAIL_CAUSES`` (the
#: end of this module).
NCCL_LAST_ERROR = re.compile(r"^\s*Last error:\s*$")
#: A warning of torch's C++ core (glog's "[W<MMDD> <time> <file>:<line>]" prefix): "ProcessGroupNCCL.cpp:1624]
#: Warning: WARNING: destroy_process_group() was not called before program exit" is printed by every
#: process that exits, after whatever ended it: advice, not a crash.
CRASH_ADVICE = re.compile(r"^\[W\d{3,4} \d\d:\d\d:[\d.]+ [^\]]*\]")
#: The engine is dead, without saying of what: a symptom of whatever failed before it (the root-cause
#: choice prefers any earlier failure, explained or not), the cause only when nothing came before.
CRASH_DIED = re.compile(
    r"EngineDeadError|EngineCore encountered (?:a fatal error|an issue)|Background loop has errored"
    r"|Engine loop is not running|MQEngineDeadError|MQLLMEngine is already dead"
    r"|Got fatal signal from worker processes|Engine core proc \S+ died unexpectedly|EngineCore_\w* died"
    # The family, not one release's sentence (v0.4 .. current): one of vLLM's own workers or engine
    # processes that died ("Worker VllmWorkerProcess pid 1221 died, exit code: -11", "Worker proc 0 died
    # unexpectedly", "Worker proc VllmWorker-0 died", "Process EngineCore_DP0 (PID: 212) died with exit
    # code -11", "Engine core process EngineCore_DP0 died", "RayWorkerProc rank=0 died unexpectedly",
    # Ray's "its worker process has died") or is dead ("Engine is dead.", "At least one Worker is dead.
    # Dead Workers: [...]", "AsyncLLMEngine is already dead, terminating server process"). Not any
    # process of any program ("Tokenizer process 33 died"), nor one being restarted ("... died with
    # ActorDiedError, reinitializing", "... died, restarting"); a worker stopped by SIGTERM ("exit code:
    # -15", KILLED_FROM_OUTSIDE) is the engine shutting its workers down after what failed, not a death
    # (graph/analyzers/engine_crash.py)
    r"|(?:\bVllmWorker\w*|\bRayWorkerProc\b|\bEngineCore\w*|\bWorker proc\b|\bEngine ?core proc(?:ess)?\b"
    r"|\bWorker \S+ pid \d+|\bworker process(?:es)? (?:has|have)\b|\bRPCServer\b|\bMQLLMEngine\b"
    r"|\bRay[A-Za-z]{0,40}?(?:Worker|Pool|Group)\S{0,80}|ChildProcessError: worker"
    # the engine core's socket threads (v0.10 .. v0.33, third pass): "Input socket thread died during
    # startup"
    r"|\b(?:In|Out)put socket thread)[^\n]{0,60}?\bdied\b"
    r"(?! with ActorDiedError)(?![^\n]*\b(?:restart|reinitializ|respawn)\w*)"
    r"|(?:Worker|Engine) is (?:already )?dead\b|Dead Workers:"
    # the API server's loop that pulls the engine core's outputs, dead of an exception (v0.7 ..):
    # "EngineCore output handler hit an error: ..."; no request gets an answer after it
    r"|output handler hit an error"
    # Python's multiprocessing, for a child whose target raised: "Process SpawnProcess-1:" and then
    # the traceback it died of (V0's MQLLMEngine and unnamed engine processes are such children)
    r"|^Process (?:Spawn|Fork|ForkServer)Process-\d+:$",
    _I,
)

#: What a restart of the same revision repeats: the image's code does not import (a module missing
#: from it, a symbol its build lacks), or a GPU kernel rejects this device or these arguments (a
#: kernel built without this architecture, "invalid argument" from a kernel's launch check).
CRASH_REPEATS = re.compile(
    r"^(?:[\w.]+\.)?(?:ImportError|ModuleNotFoundError)\b|No module named|undefined symbol"
    r"|cannot import name|no kernel image is available|invalid device function"
    # an op the build's compiled extension lacks (torch.ops._C.<op>: "'_OpNamespace' '_C' object has
    # no attribute 'apply_repetition_penalties_'")
    r"|'_OpNamespace' '\w+' object has no attribute"
    r"|cudaErrorNoKernelImageForDevice|cudaErrorInvalidValue"
    r"|(?:failed with error|CUDA error:?) invalid argument"
    r"|rtKernelLaunch execute failed, reason=\[invalid value\]",
    _I,
)

# --------------------------------------------------------------------------------------------------
# engine_hung  (graph/analyzers/engine_hung.py)
# --------------------------------------------------------------------------------------------------

#: A stall the engine reports about itself: one line is enough.
HUNG_STALL = re.compile(
    r"Engine iteration timed out|RPC call to \w+ timed out"
    # (not vLLM's start deadline for its engine processes, STARTUP: a start that took too long)
    r"|timed out waiting for (?:the )?engine(?!(?: core process)?(?:es|s)? to (?:start\b|send ?initial))"
    r"|Engine loop has died|EngineCore [^\n]{0,200}?(?:hang|hung|stuck)|execute_model timed out"
    # the ranks' barrier (vllm/distributed/utils.py, v0.9 ..): "Barrier timed out after 600.0 seconds"
    r"|\bBarrier (?:departure )?timed out\b"
    # the engine core not answering the health check its API server or serving framework asks (KServe's
    # huggingfaceserver, 0.16 ..: "vLLM engine health check timed out after 1 seconds")
    r"|\bengine health check timed out\b",
    _I,
)
#: V0's RPC to its engine process timed out, v0.6 .. v0.10: "RPCServer didn't reply within 10000 ms",
#: "MQLLMEngine didn't reply within 10000ms", "Server didn't reply within 10000 ms". A stall only as
#: an error (the TimeoutError vLLM raises, a line at ERROR) or when it repeats: one warning of a slow
#: reply on a server that goes on answering is not a hang.
HUNG_NO_REPLY = re.compile(r"(?:didn't|did not) reply within \d+ ?ms", _I)
#: Waiting that only means a hang when it repeats (a slow compile can print it once or twice).
HUNG_WAITING = re.compile(
    r"No available shared memory broadcast block found|Waiting for output from MQLLMEngine"
    r"|shm_broadcast\.py[^\n]{0,200}acquire_read",
    _I,
)
HUNG_TIMEOUT = re.compile(r"^(?:[\w.]+\.)?TimeoutError\b|raise TimeoutError")
HUNG_STATS = re.compile(
    r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s,"
    r" Running: (\d+) reqs",
    _I,
)

# --------------------------------------------------------------------------------------------------
# failures only time shows: what the analyzers say of Cloud Monitoring's series
# (graph/analyzers/_series.py, engine_hung.py, overload.py; graph/slo.py)
# --------------------------------------------------------------------------------------------------

#: Evidence read from a series (not a log line: ``line`` 0) starts with this.
SERIES_PREFIX = "series: "
#: What a series-based finding says, by signal.
SERIES_WORDS: dict[str, str] = {
    "hung_series": "requests are in flight but no token has been generated",
    "hung_probe": "a 1-token completion did not answer while /health answered 200",
    "queue_growth": "the queue grew over the window",
    "kv_window": "the KV cache stayed (nearly) full for most of the window",
    "preempt_rate": "requests are preempted every minute",
    "slo_burn": "a latency SLO is burning its error budget",
    "batch_full": "running is pinned at --max-num-seqs with a queue behind it",
    "concurrency_over_batch": "Cloud Run admits far more concurrent requests than the engine batches",
    "hot_instance": "one instance is saturated while the others idle: the load is not spread "
    "(a concurrency / session-affinity problem, not a memory one)",
}

# --------------------------------------------------------------------------------------------------
# gpu_quota (and capacity for CPU, memory, disk)  (graph/analyzers/gpu_quota.py)
# --------------------------------------------------------------------------------------------------

#: A GPU type the zone does not offer at all (Compute Engine, GKE node pools: "Accelerator type
#: \"nvidia-l4\" does not exist in zone us-west4-b.", or its resource path "not found"): no capacity of
#: that kind there, ever; another zone or GPU type is the fix, not quota.
GPU_NOT_OFFERED = re.compile(
    r"Accelerator type \\?\"?(?P<gpu>[\w-]{1,80})\\?\"? does not exist in zone (?P<zone>[\w-]{1,40})"
    r"|zones/(?P<zone_in_path>[\w-]{1,40})/acceleratorTypes/(?P<gpu_in_path>[\w-]{1,80})' was not found"
    r"|acceleratorTypes/[\w-]{1,80}' was not found|Accelerator type \S{1,80} does not exist in zone"
)
QUOTA = re.compile(
    r"Quota exceeded for total allowable count of GPUs|quota for using GPUs|ZONE_RESOURCE_POOL_EXHAUSTED"
    r"|\bSTOCKOUT\b|Insufficient regional quota|Quota '[A-Z\d_]*GPU[A-Z\d_]*' exceeded|GCE quota exceeded"
    r"|nvidia_\w*gpu\w*|GPUS?_ALL_REGIONS|(?:QUOTA_EXCEEDED|RESOURCE_EXHAUSTED|Quota exceeded).*GPU"
    r"|GPU.*(?:QUOTA_EXCEEDED|quota exceeded|not enough capacity|no capacity|currently unavailable)"
    r"|does not have enough resources available to fulfill the request|Insufficient nvidia\.com/gpu"
    r"|GCE out of resources|no GPU capacity"
    # Quota and capacity for CPU, memory or disk too: Cloud Run "Quota violated:
    # CpuAllocPerProjectRegion requested: 60000 allowed: 20000", "Max instances must be set to 2 or
    # fewer to set the requested total memory", Compute "QUOTA_EXCEEDED ... Quota 'SSD_TOTAL_GB'
    # exceeded", Kubernetes "0/6 nodes are available: 6 Insufficient nvidia.com/gpu"
    r"|Quota violated|Quota exceeded|QUOTA_EXCEEDED|Quota '[\w]+' exceeded"
    r"|\b\w{1,60}PerProjectRegion requested"
    r"|Max instances must be set to \d+ or fewer to set the requested total"
    # (Kubernetes capitalises it; vLLM's "insufficient memory to allocate the weight" is a GPU OOM)
    r"|(?-i:Insufficient) (?:cpu|memory|nvidia\.com/gpu|google\.com/tpu)\b(?! to allocate)|exceeded quota"
    r"|quota exceeded"
    # AWS's quota error code ("An error occurred (ResourceLimitExceeded) when calling the CreateEndpoint
    # operation: The account-level service limit 'ml.g6.2xlarge for endpoint usage' is 1 Instances")
    r"|\bResourceLimitExceeded\b"
    # AWS's capacity (stock-out) error codes, EC2's and SageMaker's (GCE's STOCKOUT): "Unable to provision
    # requested ML compute capacity due to InsufficientInstanceCapacity error"
    r"|\bInsufficient(?:Instance)?Capacity\b|Unable to provision requested ML compute capacity"
    r"|resource pool exhausted|RESOURCE_POOL_EXHAUSTED|not enough resources available"
    r"|FailedScaleUp|NotTriggerScaleUp|pod didn't trigger scale-up"
    # A GPU type the zone does not offer at all: GPU_NOT_OFFERED
    # A GPU that is there but held by another process or not free for this engine: the CUDA runtime's
    # cudaErrorDevicesUnavailable ("CUDA-capable device(s) is/are busy or unavailable", before CUDA 12
    # "all CUDA-capable devices are busy or unavailable"), Xinference's worker ("Requested GPUs exceed
    # the number of available devices", "GPU index 0 has been occupied with models"): no GPU capacity
    # now; no flag or image fixes it, a free GPU does
    r"|"
    + GPU_NOT_OFFERED.pattern
    + r"|CUDA-capable devices?(?:\(s\))? (?:is/are|are|is) busy or unavailable|cudaErrorDevicesUnavailable"
    r"|Requested GPUs exceed the number of available devices|GPU index \d{1,4} has been occupied",
    _I,
)
#: The Kubernetes scheduler placed the pod (its "Scheduled" event, "Successfully assigned <ns>/<pod> to
#: <node>"): a FailedScheduling before it was the pod waiting for a node the autoscaler then added
#: ("TriggeredScaleUp"), not a request that cannot be met.
POD_SCHEDULED = re.compile(r"Successfully assigned (?P<pod>\S{1,300}) to \S")
#: A scheduler's refusal of a pod, and the pod a namespace-wide ``kubectl get events`` line names.
FAILED_SCHEDULING = re.compile(r"FailedScheduling|\b\d{1,6}/\d{1,6} nodes are available")
POD_NAMED = re.compile(r"\bpod/(?P<pod>[\w.-]{1,253})")
#: A Hugging Face token in a service's environment (what decides whether a 401 is a private repo).
HF_TOKEN_ENV = re.compile(r"^(?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HF_HUB_TOKEN|HUGGINGFACE_TOKEN)$", re.I)
#: A start waiting for GPUs a Ray cluster does not have: vLLM's ray_utils (v0.4 .. current) warns "The
#: number of required GPUs exceeds the total number of available GPUs in the placement group.", then
#: repeats "Waiting for creating a placement group of specs for N seconds" until it gives up ("Cannot
#: provide a placement group of placement_group_specs=... within 1800 seconds"). Printed as warnings
#: and INFO: what decides is that the start never completes after them.
GPU_CAPACITY_WAIT = re.compile(
    r"The number of required [GT]PUs exceeds the total number of available [GT]PUs"
    r"|Waiting for creating a placement group of specs|Cannot provide a placement group"
    # Ray itself, 2.9 .. 2.40, of a request for GPUs no node type has / no node can give now: the
    # autoscaler's "No available node types can fulfill resource request(s) {'GPU': 1.0}", the raylet's
    # "The actor or task with ID ... cannot be scheduled right now. ..." whose next line says it needs
    # GPUs: "Required resources for this actor or task: {CPU_group_0_..: 1.0, GPU_group_0_..: 1.0}"
    r"|No available node types can fulfill resource requests? [^\n]{0,300}?'GPU'"
    r"|Required resources for this actor or task: [^\n]{0,300}?\bGPU"
    # Ray Serve's controller of a replica that needs a GPU no node has (2.9 ..): "Deployment
    # 'LLMServer:gemma' ... has 1 replicas that have taken more than 30s to be scheduled. ... Resources
    # required for each replica: {'CPU': 1.0, 'GPU': 1.0}, total resources available: {'CPU': 8.0}."
    r"|to be scheduled\. [^\n]{0,300}?Resources required for each replica: \{[^}\n]{0,300}?'GPU'"
)

# --------------------------------------------------------------------------------------------------
# host_memory_exceeded  (graph/analyzers/host_memory_exceeded.py)
# --------------------------------------------------------------------------------------------------

#: The table of Ray's memory monitor's kill report (ray/_private/memory_monitor.py, the raylet's "Top 10
#: memory users:"): its header and its rows of Ray workers, as a paste may keep them alone. Cited after
#: the report's own words when those are there.
HOST_MEMORY_TABLE = re.compile(
    r"Top \d{1,3} memory users:|^PID\s+MEM\(GB\)\s+COMMAND\s*$|^\d{1,8}\s+\d{1,5}\.\d{1,3}\s+ray::", _I
)
HOST_MEMORY_STRONG = re.compile(
    r"Memory limit of \d+\s*\w* exceeded|Out of memory: Killed process|oom-kill|OOMKilled|oom_kill_process"
    r"|memory cgroup out of memory|Container memory limit exceeded"
    # Ray's memory monitor (host RAM, not GPU): "2 Workers (tasks / actors) killed due to memory
    # pressure (OOM)", "Task was killed due to the node running low on memory",
    # ray.exceptions.OutOfMemoryError
    r"|killed due to memory pressure|running low on memory|ray\.exceptions\.OutOfMemoryError"
    # Ray ..2.x's first memory monitor: "RayOutOfMemoryError: More than 95% of the memory on node x is
    # used"; the kubelet's eviction "The node was low on resource: memory."
    r"|RayOutOfMemoryError|More than \d+% of the memory on node|low on resource: memory\b"
    r"|ray-oom-prevention|Memory on the node \(IP: [^)]*\) .* was \d+\.\d+GB / \d+\.\d+GB"
    # shared memory (/dev/shm is host RAM; docker's default 64 MB): NCCL "failed to extend /dev/shm",
    # "unable to write to file </torch_...>: No space left on device"
    r"|failed to extend /dev/shm|/dev/shm\S* .*No space left on device|No space left on device.*shm"
    # NCCL's shared-memory transport (2.x) that could not create its segment in /dev/shm, with or without
    # the errno after it: "Error while creating shared memory segment /dev/shm/nccl-F9ffgB (size 9637888)"
    r"|Error while creating shared memory segment /dev/shm"
    r"|Cannot allocate memory|std::bad_alloc|(?<![\w.])MemoryError\b"
    r"|exceeded (?:its|the) memory limit|killed because it exceeded|Bus error.*shm|shm.*Bus error"
    # vLLM's own checks of host RAM (the third pass over its source, v0.3 .. v0.33): the CPU backend's
    # "Available memory on node 0 (...) on startup is less than desired CPU memory utilization (0.9,
    # 56.51 GiB)", the swap-space refusal "Too large swap space. 64.00 GiB out of the 62.79 GiB total
    # CPU memory ..." (not the advice "Possibly too large swap space"), HiSparse's "pinned host pool needs
    # ~48.0 GiB but only 12.5 GiB of RAM is available"
    r"|less than desired CPU memory utilization|(?<!possibly )\bToo large swap space\b"
    r"|but only \d+(?:\.\d+)? ?GiB of RAM is available",
    _I,
)
#: The RAM the container or host had when it ran out, as the line gives it: Cloud Run's "Memory limit of
#: 32768 MiB exceeded", Ray's memory monitor "Memory on the node (...) was 2152.43GB / 2265.25GB".
FACT_HOST_MEMORY = re.compile(
    r"Memory limit of (?P<mib>\d{1,9}) ?MiB exceeded"
    r"|\bwas \d{1,7}(?:\.\d{1,3})? ?GB / (?P<gb>\d{1,7}(?:\.\d{1,3})?) ?GB"
)
#: Ray's account of a worker that vanished without a word (its connection hit end-of-file), whose first
#: likely cause it names is the kernel's OOM killer (Ray 2.x: "Worker unexpectedly exits with a connection
#: error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL
#: by OOM killer due to high memory usage."): a kill, as weak as a bare "Killed", not a crash's own words.
RAY_WORKER_VANISHED = (
    r"connection error code \d\. End of file\. There are some potential root causes\. \(\d\) The process"
    r" is killed by SIGKILL by OOM killer"
)
RAY_WORKER_VANISHED_RE = re.compile(RAY_WORKER_VANISHED)
HOST_MEMORY_WEAK = re.compile(
    r"^\s*Killed\s*$|exit code 137|exited with code 137|terminated on signal 9\b|signal: killed|"
    + RAY_WORKER_VANISHED
    + r"|Bus error \(core dumped\)|killed by signal: Bus error"
)
HOST_MEMORY_WEAK_PREFILTER = re.compile(r"Killed|killed|exit|signal|Bus error")

# --------------------------------------------------------------------------------------------------
# image_pull  (graph/analyzers/image_pull.py)
# --------------------------------------------------------------------------------------------------

IMAGE_PULL = re.compile(
    r"Image '[^']+' not found|Image \S+ not found|failed to pull|Failed to pull image|ErrImagePull"
    r"|ImagePullBackOff|manifest unknown|manifest for \S+ not found"
    r"|artifactregistry\.repositories\.downloadArtifacts"
    r"|pull access denied|failed to resolve reference|Unable to retrieve the image"
    r"|Container import failed"
    r"|does not support image|must support amd\d\d/linux|exec format error"
    r"|no matching manifest for linux/amd\d\d"
    # Docker / containerd: "pullImage error: failed pulling", "failed to register layer",
    # "error pulling image configuration", "toomanyrequests: You have reached your pull rate limit"
    r"|pullImage error|failed pulling|failed to register layer|error pulling image|pull rate limit"
    r"|Back-off pulling image|ErrImageNeverPull|InvalidImageName"
    # A wrapper that resolves the runner image itself (GPUStack, KServe runtimes): "Failed to get vLLM
    # backend image", "could not find the image for ...", "unable to resolve image"
    r"|(?:failed to|unable to|could not|couldn't) (?:get|fetch|find|obtain|resolve|locate) (?:the |an? )?"
    r"(?:[\w.-]+ ){0,3}image\b(?! '[^']*' locally)"
    # Cloud Run's service agent that may not read the image: "Google Cloud Run Service Agent ... must
    # have permission to read the image, us-docker.pkg.dev/..."
    r"|must have permission to (?:read|pull|access) the image"
    # a registry that does not answer (its v2 API): "Get \"https://registry-1.docker.io/v2/\": net/http:
    # request canceled while waiting for connection"
    r"|Get \"?https://[^/\s\"]{1,253}/v\d/\S{0,300}?\"?: "
    r"(?:net/http|dial tcp|context deadline|EOF|tls|certificate)",
    _I,
)

# kubelet: a pull that began ("Pulling image \"x\"") and its completion ("Successfully pulled image").
IMAGE_PULLING = re.compile(r"\bPulling image \"?(?P<image>[^\s\"]+)", _I)
IMAGE_PULLED = re.compile(
    r"Successfully pulled image \"?(?P<image>[^\s\"]+)|Container image \"?(?P<present>[^\s\"]+)\"? already",
    _I,
)
# docker run's "Unable to find image 'llm-api:vllm' locally" (it then pulls), and what a pull that
# completed prints: "Pull complete", "Digest: sha256:...", "Status: Downloaded newer image for ...".
DOCKER_NOT_LOCAL = re.compile(r"Unable to find image '(?P<image>[^']+)' locally")
DOCKER_PULLED = re.compile(r"Pull complete|^Digest: sha\d+:|Status: (?:Downloaded newer|Image is up to date)")
# The node's disk filled (a pull unpacks the image's layers onto it): "The node was low on resource:
# ephemeral-storage.", "no space left on device", the DiskPressure condition / taint.
NODE_DISK_FULL = re.compile(
    r"low on resource: ephemeral-storage|no space left on device|DiskPressure|disk-pressure"
    r"|ephemeral-storage (?:usage|limit) exceeded|ephemeral local storage usage exceeds",
    _I,
)

# --------------------------------------------------------------------------------------------------
# kv_cache_oom  (graph/analyzers/kv_cache_oom.py)
# --------------------------------------------------------------------------------------------------

#: GPU memory held by other processes (the figures are read by mcp_tools.capacity.startup).
GPU_MEMORY_IN_USE = re.compile(
    r"Free memory on device|less than desired GPU memory utilization|Error in memory profiling", _I
)
KV_SHORT = re.compile(
    r"No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV"
    r"|KV cache is needed, which is larger than the available KV cache memory|insufficient KV cache"
    r"|estimated maximum model length is|Not enough memory to allocate KV cache|too small KV cache"
    r"|To serve at least one request with the models?'s max seq len"
    # v0.14 .. current, --max-model-len auto: "Cannot auto-fit max_model_len: not enough GPU memory
    # available to serve even a single token"
    r"|Cannot auto-fit max_model_len|not enough GPU memory available to serve"
    # v0.4 .. v0.6's block manager: "Out of memory! No free blocks are available."
    r"|No free blocks are available"
    # v0.10 .. current, hybrid models: "max_num_seqs (1024) exceeds available Mamba cache blocks (856)":
    # the cache holds fewer sequences' state than the engine is set to batch
    r"|exceeds (?:the )?available (?:\w+ ){0,2}cache blocks"
    # the CPU backend's check of a NUMA node before it allocates the cache (v0.23 .. v0.30, read in the
    # third pass): "Available memory on node 0 (4.38/62.79 GiB) on kv cache allocation is less than
    # requested memory for kv (40.0 GiB)"
    r"|on kv cache allocation is less than requested memory",
    _I,
)
KV_MAXLEN = re.compile(r"max seq len \((\d+)\)")
KV_CAP = re.compile(r"stored in KV cache \((\d+)\)|estimated maximum model length is (\d+)")

# --------------------------------------------------------------------------------------------------
# model_not_found  (graph/analyzers/model_not_found.py)
# --------------------------------------------------------------------------------------------------

MODEL_NOT_FOUND = re.compile(
    r"does not appear to have a file named|Repository Not Found|RepositoryNotFoundError"
    r"|is not a local folder and is not a valid model identifier|Invalid repository ID or local directory"
    r"|Cannot find any (?:\w+ )?model weights|No model weights found|Can't load the configuration of"
    # vLLM's get_config (v0.6 ..) on a directory with neither config.json nor params.json (a LoRA adapter's
    # folder, a parent of the snapshot): "No supported config format found in <path>"
    r"|No supported config format found in"
    # V0's weight filter "File or directory '/mnt/models/.../model.safetensors.index.json' not found.",
    # tensorizer's "... is not a valid tensorizer URI"
    r"|File or directory '[^']*' not found|is not a valid \w+ URI"
    r"|No such file or directory: '[^']*(?:models?|\.safetensors|config\.json|gs:|/mnt/|tokenizer)[^']*'"
    r"|Revision Not Found|EntryNotFoundError|LocalEntryNotFoundError|model .* not found|No such bucket"
    # huggingface_hub: "HFValidationError: Repo id must be in the form 'repo_name' or
    # 'namespace/repo_name': '/models/'" (a local path that is not there), "404 Client Error: Not
    # Found for url: https://huggingface.co/..."; KServe storage-initializer "No model found in"
    r"|HFValidationError|Repo id must be in the form"
    # the hubs vLLM downloads from: Hugging Face, its mirror, ModelScope (VLLM_USE_MODELSCOPE)
    r"|Client Error: Not Found for url: https://(?:[\w-]+\.)*(?:huggingface\.co|hf-mirror\.com|modelscope\.cn)\b"
    # ModelScope's hub API for an id it does not have: "The request model: Qwen3-30B-A3B does not exist!"
    r"|The request model: \S+ does not exist"
    r"|No model found in|Failed to fetch model|model path .* does not exist|not a valid model"
    # transformers 4.36 .. 4.57: a revision that is not there ("v2.0 is not a valid git identifier (branch
    # name, tag name or commit id)"), an offline hub with no copy in the cache ("couldn't find it in the
    # cached files" / "couldn't find them in the cached files"), "Can't load tokenizer for '...'"
    r"|is not a valid git identifier|couldn't find (?:it|them) in the cached files|Can't load tokenizer for"
    # vLLM's loaders for a file the model path lacks (third pass, v0.5 .. v0.33): the sharded-state
    # loader's "Could not find checkpoint files '/mnt/models/.../model-rank-*-part-*.safetensors'", the
    # remote GGUF loader's "Could not find config.json for remote GGUF model repo" / "Could not find GGUF
    # file for repo unsloth/... with quantization Q4_K_M"
    r"|Could not find (?:checkpoint files|config\.json for|GGUF file for)\b",
    _I,
)

# --------------------------------------------------------------------------------------------------
# overload  (graph/analyzers/overload.py)
# --------------------------------------------------------------------------------------------------

OVERLOAD_STATS = re.compile(
    r"Running: (\d+) reqs.*?(?:Waiting|Pending): (\d+) reqs.*?GPU KV cache usage: ([\d.]+)%", _I
)
#: vLLM's scheduler preempting a request (v0.5 .. v0.10: "Sequence group cmpl-7d3c is preempted by
#: PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. ...
#: total_num_cumulative_preemption=51"). Not any "preemption": Kubernetes' scheduler says "No
#: preemption victims found for incoming pod" of a pod it cannot place, and the args print
#: "preemption_mode=None".
OVERLOAD_PREEMPT = re.compile(
    r"preempted by PreemptionMode|\bSequence group \S+ is preempted by\b|total_num_cumulative_preemption=\d",
    _I,
)
#: The count a preemption warning gives of itself: V0's scheduler prints the warning at the first
#: preemption and every 50th after it ("total_num_cumulative_preemption=51"), so one record can stand for
#: many preemptions.
FACT_PREEMPTIONS = re.compile(r"total_num_cumulative_preemption=(\d{1,9})")
#: A row of ``kubectl get hpa``: NAME, REFERENCE, TARGETS (the metric now / its target: "12/10",
#: "500m/1", "cpu: 93%/80%"), MINPODS, MAXPODS, REPLICAS.
OVERLOAD_HPA_HEADER = re.compile(r"\bMINPODS\s+MAXPODS\s+REPLICAS\b")
OVERLOAD_HPA_ROW = re.compile(
    r"^\S+\s+\S+/\S+\s+(?:[\w-]{1,40}: ?)?(?P<now>\d{1,9}(?:\.\d{1,6})?)(?P<now_unit>[m%]?)"
    r"/(?P<target>\d{1,9}(?:\.\d{1,6})?)(?P<target_unit>[m%]?)\s+(?P<min>\d{1,5})\s+(?P<max>\d{1,5})"
    r"\s+(?P<replicas>\d{1,5})\s"
)
OVERLOAD_REJECT_PREFILTER = re.compile(
    r"HTTP/|no available instance|Too Many Requests|status|Error code|Exception - |backpressure", _I
)
OVERLOAD_REJECT = re.compile(
    r"\b(?:429|503) (?:Too Many Requests|Service Unavailable)"
    # The same refusal as the clients and gateways in front of the server relay it, one record per
    # request: the openai client's status errors ("openai.RateLimitError: Error code: 429 - ..."),
    # LiteLLM's classes for those statuses ("litellm.RateLimitError: RateLimitError: Hosted_vllmException
    # - ...", "ServiceUnavailableError: ..."; not its router's own cooldown "No deployments available"),
    # Ray Serve's queue limit ("Request dropped due to backpressure (num_queued_requests=100, ...)")
    r"|\bError code: (?:429|503)\b|\b(?:RateLimitError|ServiceUnavailableError): \w{1,40}Exception - "
    r"|Request dropped due to backpressure",
    _I,
)
#: What serves in front of the engines saying every replica is busy or its queue full: Cloud Run's "The
#: request was aborted because there was no available instance", Ray Serve's "Request dropped due to
#: backpressure (num_queued_requests=100, max_queued_requests=100)" (ray/serve/exceptions.py,
#: 2.10 ..). Saturation in the platform's own words, a sign on its own; a relayed 429 / 503 (a gateway's
#: rate limit as often as a full server) needs another.
OVERLOAD_NO_CAPACITY = re.compile(r"no available instance|Request dropped due to backpressure", _I)

# --------------------------------------------------------------------------------------------------
# startup_timeout  (graph/analyzers/startup_timeout.py)
# --------------------------------------------------------------------------------------------------

STARTUP = re.compile(
    r"failed to start and listen on the port|STARTUP (?:TCP|HTTP|GRPC) probe failed|Startup probe failed"
    r"|startup probe .*(?:failed|timed out)|Container failed to start"
    # a supervisor's wait for the server's health check ran out: "did not become ready", NemoClaw's
    # "NIM did not become healthy within 300s.", "failed to become ready"
    r"|(?:did not|didn't|failed to|never) bec[oa]me (?:ready|healthy)"
    # Kubernetes: a liveness / readiness probe that fails while the server still loads gets the
    # container killed and restarted ("Liveness probe failed: ... connection refused", "Container vllm
    # failed liveness probe, will be restarted")
    r"|(?:Liveness|Readiness) probe failed|failed (?:liveness|startup|readiness) probe"
    # KServe / Knative: the revision never reached its initial scale in time
    r"|Initial scale was never achieved|ProgressDeadlineExceeded"
    # Any supervisor's start deadline: Modal "Runner has been initializing for too long: 300 seconds",
    # "timed out waiting for the server to start", "took too long to become ready"
    r"|initializing for too long|took too long to (?:start|become ready|initiali[sz]e)"
    r"|timed out waiting for (?:the )?(?:\w+ )?(?:server|container|model|engine)"
    r" to (?:start|be(?:come)? ready)"
    # ... or for the parts of a model spread over hosts to join (Xinference: "Timed out after 601
    # seconds waiting for clients. 1/2 clients joined.")
    r"|timed out after \d+ (?:s|sec|seconds) waiting for (?:\w+ )?(?:clients|workers|replicas|nodes)\b"
    r"|start(?:up)? (?:deadline|timeout) (?:exceeded|reached)"
    # vLLM's own start deadline for its engine processes (third pass, v0.9 .. v0.33): "Timed out waiting
    # for engine core processes to start. ... VLLM_ENGINE_READY_TIMEOUT_S", "Timed out waiting for
    # engines to send initial message on input socket." (v0.9 .. v0.13 print "sendinitial")
    r"|timed out waiting for (?:new )?engine(?: core process)?(?:es|s)? to (?:start\b|send ?initial message)",
    _I,
)
STARTUP_LOADING = re.compile(
    r"Loading safetensors checkpoint shards|Starting to load model|Loading weights|Downloading|download"
    r"|Capturing CUDA graph|torch.compile|Compiling|Memory profiling|Loading model",
    _I,
)
STARTUP_EXITED = re.compile(
    r"Container called exit\(|Traceback \(most recent call last\)|"
    + ENGINE_START_FAILED.pattern
    + r"|exited with (?:status|code)|terminated on signal|Killed|OOMKilled",
    _I,
)
#: vLLM's engine core told to stop: its handler for SIGTERM and SIGINT raises SystemExit, and
#: run_engine_core logs "EngineCore exiting." for that exception alone (v1 core.py, v0.8 on).
ENGINE_SIGNALLED = re.compile(r"\bEngineCore exiting\.")
#: A stop sent from outside the server (not a crash of its own): a worker ended by SIGTERM ("Worker
#: VllmWorkerProcess pid 1221546 died, exit code: -15", "terminated by signal SIGTERM"), the engine
#: saying it was signalled (ENGINE_SIGNALLED), or a Kubernetes container state SIGKILLed
#: (``exitCode: 137``) whose ``reason`` is not ``OOMKilled`` — the kubelet's kill after a failed
#: liveness probe.
KILLED_FROM_OUTSIDE = re.compile(
    r"exit code:? -15\b|terminated by signal (?:15|SIGTERM)|^\s*exitCode: 137\s*$|"
    + ENGINE_SIGNALLED.pattern,
    _I | re.MULTILINE,
)
KILLED_FROM_OUTSIDE_PREFILTER = re.compile(
    r"exit code|terminated by signal|exitCode|" + ENGINE_SIGNALLED.pattern, _I
)
K8S_STATE_REASON = re.compile(r"^\s*reason: (?P<reason>\w+)\s*$", re.MULTILINE)
#: A supervisor (a wrapper, a CLI) polling for the server to come up.
STARTUP_WAITING = re.compile(
    r"Waiting for (?:the )?(?:[\w.-]+ )?(?:server|model server|engine|endpoint)"
    r" to (?:start|be(?:come)? ready)"
    r"|waiting for (?:the )?server to be up",
    _I,
)

# --------------------------------------------------------------------------------------------------
# unsupported_config  (graph/analyzers/unsupported_config.py)
# --------------------------------------------------------------------------------------------------

#: vLLM's check that a parallel size divides the model ("Total number of attention heads (32) must be
#: divisible by tensor parallel size (3).", config.py v0.2 .. current; "... hidden layers ... pipeline
#: parallel size"): what it counts and which size; ``FACT_PARALLEL_DIVISOR`` also reads the size asked for.
PARALLEL_DIVISOR = (
    r"\((?P<total>\d{1,7})\) (?:must|should) be divisible by (?P<which>tensor|pipeline)[ _]parallel[ _]size"
)
#: A GPU refused for being older than the least this build runs on (the figure is ``FACT_DEVICE_REFUSED``'s).
DEVICE_REFUSED = (
    r"\bGPUs? with compute capability (?:below|lower than|less than) (\d{1,2}(?:\.\d)?)"
    r" (?:are|is) not supported"
)
UNSUPPORTED = re.compile(
    r"only supported on GPUs with compute capability|is not supported for the current GPU"
    # the dtype check's advice, its message's last sentence (v0.2 .. v0.8), also where a paste kept only
    # the wrapped record's tail: "You can use float16 instead by explicitly setting the`dtype` flag in CLI"
    r"|You can use float\d\d instead by explicitly setting the ?`dtype` flag"
    r"|Minimum capability: \d+|"
    + DEVICE_REFUSED
    + r"|only supported on (?:GPUs|devices) with compute capability|requires capability \d+"
    r"|Failed to find a kernel that can implement|architectures? \[[^\]]*\] (?:are|is) not supported"
    r"|Model architectures? .* failed to be inspected|unrecognized arguments|error: argument --?\S+"
    # the same inspection, as its subprocess's exit (registry.py ``_run_in_subprocess``, before vLLM says
    # "failed to be inspected"): the model's class does not load in this image
    r"|'vllm\.model_executor\.models\.registry'\]' returned non-zero exit status"
    # a checkpoint's own quantization and the flag's disagree (v0.4 ..: "Quantization method specified in
    # the model config (gptq) does not match the quantization method specified in the `quantization`
    # argument (gptq_marlin)")
    r"|does not match the quantization method specified in the `?quantization`? argument"
    r"|invalid choice|no kernel image is available for execution on the device|is not supported on this GPU"
    r"|not supported on (?:Turing|Volta|Ampere|this device|this platform)|does not support (?:bf\d\d"
    r"|bfloat\d\d|fp\d)"
    r"|unsupported (?:quantization|dtype|kv[_ ]cache[_ ]dtype)|Unknown quantization method"
    r"|Transformers does not recognize this architecture|has model type `[^`]+` but"
    r"|is not supported for quantization method|only supports (?:\w+ )?GPUs or newer"
    r"|No [\w-]+ compatible scheme was found|is not supported on (?:CPU|XPU|TPU|ROCm|this)"
    # An image older than the model: transformers or vLLM must be upgraded; a kernel the GPU cannot fit
    r"|(?:upgrade|update) (?:your )?transformers|requires transformers|out of resource: shared memory"
    # a platform plugin the image lacks (v0.14 ..: "tpu_inference not found, please install
    # tpu_inference to run vllm on TPU")
    r"|please install [\w.\[\]-]+ to (?:run|use)\b"
    # a quantization the checkpoint does not carry (--quantization awq on a bf16 repo), v0.4 ..:
    # "Cannot find the config file for awq", "Cannot find any of ['quant_method'] in the model's
    # quantization config."
    r"|Cannot find the config file for \w+|Cannot find any of .* in the model's quantization config"
    # transformers' auto classes refusing the architecture: "Unrecognized configuration class <...> for
    # this kind of AutoModel"
    r"|Unrecognized configuration class .{1,200}? for this kind of"
    # a driver older than the image's CUDA: torch's "CUDA driver version is insufficient for CUDA runtime
    # version", "The NVIDIA driver on your system is too old", libnvidia-container's "unsatisfied
    # condition: cuda>=12.8, please update your driver"; a host without the NVIDIA runtime (docker's
    # "could not select device driver \"\" with capabilities: [[gpu]]")
    r"|CUDA driver version is insufficient|driver on your system is too old|unsatisfied condition: cuda\s*>="
    r"|please update your (?:GPU |NVIDIA )?driver|could not select device driver"
    # The CUDA runtime's own words (cudaGetErrorString, libcudart 12.8) for a GPU, driver or kernel this
    # place cannot use, by their text and their cudaError names: no device given to the container, a
    # stub driver, a driver stack that is not ready or does not match the image, a kernel with no code
    # for this GPU or built by a newer toolchain, a launch this GPU cannot give resources to. A restart
    # repeats them; a spec, image or flag change fixes them. (Not "invalid device ordinal": a rank handed
    # an index it cannot see is Ray's / the platform's visibility bug as often as a configuration,
    # evals/real/dev/real-vllm-4131-*.)
    r"|no CUDA-capable device is detected|CUDA driver is a stub library"
    r"|forward compatibility was attempted on non supported HW|unsupported display driver / cuda driver"
    r"|(?:CUDA error:|Error \d{3}:) system not yet initialized|PTX JIT compil|provided PTX was compiled with"
    r"|cudaError(?:NoDevice|StubLibrary|CompatNotSupportedOnDevice|SystemNotReady"
    r"|SystemDriverMismatch|InvalidPtx|JitCompilerNotFound|UnsupportedPtxVersion"
    r"|NoKernelImageForDevice|InsufficientDriver)\b"
    # A placement or network setting that does not fit what this container has (NCCL 2.27's WARN lines,
    # Xinference's worker): two ranks on one GPU ("Duplicate GPU detected : rank 1 and rank 0 both on
    # CUDA device 1000": fewer GPUs given than ranks), NCCL_SOCKET_IFNAME naming no interface here
    # ("Bootstrap : no socket interface found", "NET/Socket : No usable listening interface found"),
    # a launch naming GPUs the worker cannot see ("... can only see these GPUs: [0]")
    r"|Duplicate GPU detected|Bootstrap : no socket interface found|No usable listening interface found"
    r"|can only see these GPUs"
    # vLLM's check that a parallel size divides the model (``PARALLEL_DIVISOR``): raised only while the
    # engine is configured, so it names the family also where a paste shows nothing of the start around it
    r"|" + PARALLEL_DIVISOR,
    _I,
)
#: The platform's admission control refusing the workload's spec before anything runs (Kubernetes:
#: "admission webhook \"warden-validating.common-webhooks.networking.gke.io\" denied the request: ...
#: You must specify a GPU type with node selector ...", Gatekeeper's and Kyverno's webhooks alike): the
#: spec asks for what this cluster does not allow, and must change as the refusal says.
ADMISSION_DENIED = re.compile(r"admission webhook \"?[\w.-]+\"? denied the request", _I)
#: A kernel launch this GPU cannot serve (cudaGetErrorString: no code for it in the kernel, more registers
#: or shared memory than it has): a configuration only where a start fails on it; while serving, one
#: batch's shape can hit it as well (a crash, not a configuration).
UNSUPPORTED_LAUNCH = re.compile(
    r"invalid device function|too many resources requested for launch"
    r"|cudaError(?:LaunchOutOfResources|InvalidDeviceFunction)\b"
)
#: What an error (never a warning or an info line) says when a feature is missing here: judged only
#: on error records written before the server came up, where they are about the configuration.
UNSUPPORTED_GENERIC = re.compile(
    # (not the OS's strerror(ENOTSUP), capitalised "Operation not supported": a socket's or a file system's
    # refusal, raised by the system call, is no setting of the engine's; CUDA's lower-case "operation not
    # supported" is the device's)
    r"(?<!(?-i:Operation) )\bnot supported\b|does not support|only supports"
    r"|\bonly supported (?:on|for|with|in|by)\b"
    r"|NotImplementedError|is not implemented"
    r"|\bunsupported\b|requires (?:a )?(?:newer|GPU)|not compatible with",
    _I,
)
#: A check whose only job is to refuse what this build or device does not support (vLLM's
#: ``_check_if_gpu_supports_dtype``, ``is_fa_version_supported``, ``has_device_capability``): a traceback
#: that ends in one (a bare ``AssertionError`` after ``assert is_..._supported(...)``, or a paste cut off
#: inside it) failed that check, whatever the missing message said.
SUPPORT_CHECK = re.compile(
    r"\b(?:is_\w*supported|\w+_is_supported|supports_\w+|_?check_if_\w*supports?_\w+|check_\w*support\w*"
    r"|has_device_capability)\b"
)
#: A bare exception line (no message of its own).
BARE_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\s*$")
#: A GPU this torch build has no kernels for, which torch only warns about (1.13 .. 2.5's
#: torch/cuda/__init__.py: "PyTorch no longer supports this GPU because it is too old", "... with CUDA
#: capability sm_120 is not compatible with the current PyTorch installation"): the cause when the
#: start does not get past it.
UNSUPPORTED_DEVICE_WARNING = re.compile(
    r"no longer supports this GPU because it is too old"
    r"|with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"
    # torch.cuda could not initialize CUDA at all (1.13 ..: "UserWarning: CUDA initialization: Unexpected
    # error from cudaGetDeviceCount(). ... Error 804: forward compatibility was attempted on non supported
    # HW", "CUDA initialization: Found no NVIDIA driver on your system"): no usable GPU here
    r"|\bCUDA initialization: "
)
UNSUPPORTED_WARNING = re.compile(r"\b\w*Warning\b|\sWARNING\s\d\d-\d\d ")


# --------------------------------------------------------------------------------------------------
# Facts: figures and particulars the analyzers read from their evidence for the remedies (which read
# ``Finding.facts``, never log text)
# --------------------------------------------------------------------------------------------------

#: context_too_long
FACT_DERIVED_MAX_LEN = re.compile(r"derived max_model_len \((?:[^)]{0,200}?=)?\s*(\d+)")
FACT_SERVED_CONTEXT = re.compile(
    r"maximum context length is (\d+)|model's (?:maximum )?context length(?: of)? \(?(\d+)"
    # V0's scheduler: "Input prompt (2501 tokens) is too long and exceeds limit of 2048"
    r"|too long and exceeds (?:the )?limit of (\d+)"
    # v0.6 .. v0.10's input check: "The decoder prompt (length 34144) is longer than the maximum model
    # length of 32768"
    r"|longer than the maximum model length of (\d+)"
)
FACT_USER_MAX_LEN = re.compile(r"User-specified max_model_len \((\d+)\)")
#: What the refused request needed: V1 "... for a total of at least 8193 tokens", V0 "However, you
#: requested 4500 tokens (4000 in the messages, 500 in the completion)".
FACT_REQUESTED_TOKENS = re.compile(
    r"for a total of (?:at least )?(\d+) tokens|However, you requested (\d+) tokens"
    r"|The input \((\d+) tokens\) is longer than|Input length \((\d+)\) exceeds"
    r"|Input prompt \((\d+) tokens\) is too long|prompt \(length (\d+)\) is longer than"
    # V1's input check, v0.8 ("Prompt length of 4178 is longer than the maximum model length of 4096.")
    r"|Prompt length of (\d+) is longer than"
)
#: auth_denied: what refused
FACT_DENIED_HUB = re.compile(r"gated|restricted|huggingface|401 Client|403 Client|hf_|\btoken", _I)
FACT_DENIED_BUCKET = re.compile(r"storage|bucket|gs://|/mnt/", _I)
FACT_DENIED_SECRET = re.compile(r"secret", _I)
#: engine_crash: a CUDA fault (graph capture is a frequent source: eager mode may avoid it)
FACT_CUDA_FAULT = re.compile(r"illegal memory access|CUDA error|cudaError")
#: runtime_oom: where after loading
FACT_OOM_IN_CUDA_GRAPHS = re.compile(r"capture_model|cuda_graph|CUDAGraph|capture_graph")
FACT_OOM_IN_SAMPLER = re.compile(r"sampler|max_num_seqs")
#: What the weights took once loaded ("Model loading took 15.4668 GiB memory", V0 "Loading model
#: weights took 1.5874 GB"), what the GPU holds (PyTorch's OOM: "GPU 0 has a total capacity of 15.92
#: GiB"), and the share vLLM may use ("'gpu_memory_utilization': 0.75", "gpu_memory_utilization=0.75").
FACT_WEIGHTS_GIB = re.compile(
    r"(?:Model loading|Loading model weights) took ([\d.]+) ?GiB|weights took ([\d.]+) GB"
)
FACT_WEIGHTS_PREFILTER = re.compile(r"loading took|weights took", _I)
#: The GPU's memory, as torch's OOM message gives it (2.0 ..: "GPU 0 has a total capacity of 15.59 GiB";
#: before: "(GPU 0; 10.73 GiB total capacity; ...)")
FACT_GPU_TOTAL_GIB = re.compile(
    r"total capacity of ([\d.]{1,12}) GiB|(?<![\d.])([\d.]{1,12}) GiB total capacity"
)
FACT_GPU_UTIL = re.compile(r"gpu_memory_utilization['\"]?\s*[:=]\s*([\d.]+)")
FACT_GPU_UTIL_PREFILTER = re.compile(r"gpu_memory_utilization")
#: unsupported_config: what is not supported
FACT_UNRECOGNIZED_ARGS = re.compile(r"unrecognized arguments: (.+)$", re.MULTILINE)
#: The flag a checkpoint's own setting contradicts (its config's quantization, against --quantization).
FACT_FLAG_CONTRADICTED = re.compile(
    r"does not match the quantization method specified in the `?quantization`?"
)
#: argparse refusing a flag's value ("vllm serve: error: argument --limit-mm-per-prompt: Value {image:0}
#: cannot be converted to <function loads ...>", "argument --dtype: invalid choice: 'bf32'", "argument
#: --port: invalid int value: 'x'", "argument --max-model-len: expected one argument").
FACT_REFUSED_VALUE = re.compile(
    r"error: argument (?P<flag>--[a-z][\w-]{1,60})(?:/-[\w-]{1,10})?: (?:invalid |Value .{0,400}? cannot be "
    r"converted|expected )"
)
FACT_PARALLEL_DIVISOR = re.compile(PARALLEL_DIVISOR + r" \((?P<size>\d{1,4})\)", _I)
FACT_NO_BF16 = re.compile(r"Bfloat16|bfloat16|bf16|use float16 instead")
#: A model type vLLM will not run in float16 (``_FLOAT16_NOT_SUPPORTED_MODELS`` in its config, which v0.11
#: enforces, vllm#28857: gemma2, gemma3, gemma3_text, plamo2: "Numerical instability. Please use bfloat16 or
#: float32 instead."; the planner's ``FLOAT16_REFUSED_TYPES`` by model type, for a spec), here by the
#: checkpoint's name (Gemma 1's "gemma-2b" and Gemma 3n are other types), and a launch or engine
#: configuration that serves float16 ("--dtype=half", "dtype=torch.float16", "'dtype': 'half'"). Releases
#: before the check ran the pair, and its answers are empty or wrong (vllm#15097, #17622): the server
#: runs, the configuration is what fails.
FACT_FLOAT16_REFUSED_MODEL = re.compile(r"\bgemma-?[23](?=[-_:\s'\"/,)]|$)|\bplamo-?2\b", _I)
FACT_FLOAT16_SERVED = re.compile(
    r"--dtype[= ](?:half|float16)\b|\bdtype['\"]?[=:] ?['\"]?(?:half|float16|torch\.float16)\b"
)
FACT_DTYPE_PREFILTER = re.compile(r"dtype")
FACT_MIN_CAPABILITY = re.compile(r"Min(?:imum)? capability: (\d+)|requires capability (\d+)")
#: The device itself refused, whatever it was asked to run ("GPUs with compute capability below 7.0 are
#: not supported."): no flag or checkpoint makes it run there (``DEVICE_REFUSED``, below the least figure).
FACT_DEVICE_REFUSED = re.compile(DEVICE_REFUSED, _I)
FACT_QUANTIZATION = re.compile(r"fp8|FP8|fp4|FP4|quantization")
FACT_KV_CACHE_DTYPE = re.compile(r"kv.?cache.?dtype|fp8_e|nvfp4", _I)
#: A GPU generation named as the least a kernel runs on ("FlashAttention only supports Ampere GPUs or
#: newer", "requires Hopper or later", "only supported on Ampere", "sm80+", "sm_90 or newer"), and where
#: each generation's compute capability starts.
FACT_MIN_ARCH = re.compile(
    r"\b(?P<arch>Volta|Turing|Ampere|Ada(?: Lovelace)?|Hopper|Blackwell)\b(?: architecture)?(?: GPUs?)?"
    r" (?:or|and) (?:newer|later|above)"
    # "mma -> mma layout conversion is only supported on Ampere" (Triton): that generation at the least
    r"|\bonly supported on (?P<only>Volta|Turing|Ampere|Ada(?: Lovelace)?|Hopper|Blackwell)\b"
    r"|\bsm_?(?P<sm>\d{2,3})(?:\+| (?:or|and) (?:newer|later|above))",
    _I,
)
ARCH_COMPUTE_CAPABILITY = {
    "volta": 7.0,
    "turing": 7.5,
    "ampere": 8.0,
    "ada": 8.9,
    "ada lovelace": 8.9,
    "hopper": 9.0,
    "blackwell": 10.0,
}
#: A FlashAttention support check that failed: vLLM's FlashAttention (FA2) runs on compute capability
#: 8.0 and up (vllm-flash-attn's ``fa_version_unsupported_reason``: "FA2 is only supported on devices
#: with compute capability >= 8").
#: A tensor a pre-quantized checkpoint carries and a 16-bit load does not know ("KeyError:
#: 'layers.0.mlp.down_proj.weight.absmax'"): the checkpoint is quantized and the flags do not say so.
#: Its suffix names the format: bitsandbytes keeps absmax / quant_state, GPTQ and AWQ qweight / qzeros
#: / scales, FP8 checkpoints weight_scale / input_scale.
FACT_QUANT_TENSOR = re.compile(
    r"KeyError: '[\w.]*\.(?P<suffix>absmax|quant_state|nested_absmax|quant_map|qweight|qzeros|g_idx"
    r"|weight_scale(?:_inv)?|input_scale)\b"
)
QUANT_TENSOR_METHOD = {
    "absmax": "bitsandbytes",
    "quant_state": "bitsandbytes",
    "nested_absmax": "bitsandbytes",
    "quant_map": "bitsandbytes",
    "weight_scale": "fp8",
    "weight_scale_inv": "fp8",
    "input_scale": "fp8",
}
FACT_FLASH_ATTENTION = re.compile(r"is_fa_version_supported|fa_version_unsupported|FlashAttention", _I)
FLASH_ATTENTION_MIN_CC = 8.0
#: Triton's FP8 (e4m3, "fp8e4nv") refused on this GPU ("type fp8e4nv not supported in this architecture.
#: The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')"): Triton's CUDA backend has it from sm_89 (Ada).
FACT_TRITON_FP8 = re.compile(r"fp8e4nv not supported in this architecture")
TRITON_FP8_MIN_CC = 8.9
#: The words of a flag's name that say nothing of its feature ("--enable-chunked-prefill" is about
#: "chunked prefill"), and the flags a failing check's words never implicate: they name what is served
#: or where, or the family has its own remedy for them (context length, dtype, parallelism, memory).
FLAG_FILLER_WORDS = frozenset(
    {"enable", "disable", "use", "num", "max", "min", "size", "the", "mode", "config"}
)
FLAGS_NEVER_IMPLICATED = frozenset(
    {
        "model",
        "tokenizer",
        "host",
        "port",
        "served_model_name",
        "download_dir",
        "trust_remote_code",
        "max_model_len",
        "dtype",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "gpu_memory_utilization",
        "api_key",
    }
)


# --------------------------------------------------------------------------------------------------
# For log compression (mcp_tools/logs.py): what to keep raw, tested on raw lines
# --------------------------------------------------------------------------------------------------

#: Root-cause signatures across vLLM versions and Cloud Run, in raw lines: kept first.
COMPRESS_SIGNAL = re.compile(
    r"out of memory|OutOfMemoryError|No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV cache"
    r"|larger than the available KV cache memory|estimated maximum model length"
    r"|is greater than the derived max_model_len|maximum context length is"
    r"|Memory limit of .* exceeded|oom[-_ ]?kill|\bKilled\b|exit code 137|signal 9|SIGKILL"
    r"|failed to start and listen on the port|probe failed|Startup probe|DEADLINE_EXCEEDED"
    r"|does not appear to have a file named|Repository Not Found|No such file or directory"
    r"|is not a local folder and is not a valid model identifier|RepositoryNotFoundError"
    r"|401 Client Error|403 Client Error|gated repo|is restricted|Permission denied|PERMISSION_DENIED"
    r"|Quota exceeded|QUOTA_EXCEEDED|ZONE_RESOURCE_POOL_EXHAUSTED|STOCKOUT|RESOURCE_EXHAUSTED"
    r"|not supported|only supported on GPUs|compute capability|unrecognized arguments|invalid choice"
    r"|are not supported for now|illegal memory access|NCCL error|EngineDeadError|Segmentation fault"
    r"|core dumped|CUDA error|Image .* not found|failed to pull|ErrImagePull|ImagePullBackOff"
    r"|manifest unknown|Container called exit|terminated on signal",
    _I,
)

#: vLLM's start-up figures in raw lines (what the planner and a person check first).
COMPRESS_STARTUP = re.compile(
    r"vLLM API server version|Initializing (?:a V1 |an )LLM engine|non-default args"
    r"|Loading (?:model )?weights took|Model loading took|Memory profiling|Available KV cache memory"
    r"|GPU KV cache size|# GPU blocks|GPU blocks:|Maximum concurrency for|max_model_len"
    r"|Graph capturing finished|init engine .* took|Starting vLLM API server|Application startup complete"
    r"|Resolved architecture|Using max model len",
    _I,
)

#: An exception line in a raw line (after any process tag or vLLM prefix).
COMPRESS_EXCEPTION = re.compile(
    r"(?:^|\]\s|\)\s)\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:?"
)


# --------------------------------------------------------------------------------------------------
# What each family's evidence says: a model naming a family must cite a line that says it
# --------------------------------------------------------------------------------------------------

FAMILY_WORDING: dict[str, tuple[re.Pattern[str], ...]] = {
    "weights_oom": (OOM,),
    "kv_cache_oom": (KV_SHORT, OOM, GPU_MEMORY_IN_USE),
    "runtime_oom": (OOM,),
    "context_too_long": (CONTEXT,),
    "host_memory_exceeded": (HOST_MEMORY_STRONG, HOST_MEMORY_WEAK),
    "startup_timeout": (STARTUP,),
    "model_not_found": (MODEL_NOT_FOUND, KIND_MISSING),
    "auth_denied": (AUTH, KIND_DENIED),
    "gpu_quota": (QUOTA,),
    "unsupported_config": (UNSUPPORTED, UNSUPPORTED_GENERIC),
    "overload": (OVERLOAD_STATS, OVERLOAD_PREEMPT, OVERLOAD_REJECT),
    "engine_crash": (CRASH, CRASH_DIED, EXCEPTION),
    "engine_hung": (HUNG_STALL, HUNG_NO_REPLY, HUNG_WAITING, HUNG_STATS),
    "image_pull": (IMAGE_PULL,),
}


#: What an NCCL error's "Last error:" says failed, when it is another family's cause: a shared-memory
#: segment the container's /dev/shm has no room for (host memory), a placement, network setting or
#: driver that does not fit this container (unsupported_config), a CUDA allocation that failed (GPU
#: memory, by phase), GPUs that cannot be had. The NCCL error is then that cause's report, not a crash
#: (graph/analyzers/engine_crash.py).
NCCL_DETAIL_CAUSES = (HOST_MEMORY_STRONG, UNSUPPORTED, OOM, QUOTA)
