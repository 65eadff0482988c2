"""mcp_tools.records: physical log lines to clean records (prefixes, colour, severity, hard wraps).

The lines are real shapes from public threads (vllm-project/vllm#12539 docker compose, #28143 V1
engine core, #15182 TP workers, #1160 Ray's raylet with syslog-escaped colour, #14452 interleaved
ranks) and from kubectl / uvicorn / glog output.
"""

from __future__ import annotations

import pytest

from graph.analyzers.base import LogView
from graph.observation import Observation
from mcp_tools.incident import LogLine
from mcp_tools.records import clean, continues, severity_of


@pytest.mark.parametrize(
    ("raw", "text", "proc", "level"),
    [
        (
            "deepseek  | (VllmWorkerProcess pid=269) INFO 01-28 22:58:07 weight_utils.py:251] Using model "
            "weights format ['*.safetensors']",
            "Using model weights format ['*.safetensors']",
            "VllmWorkerProcess pid=269",
            "INFO",
        ),
        (
            "(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [core.py:708]     "
            "self.model = self._init_model(",
            "self.model = self._init_model(",
            "EngineCore_DP0 pid=12473",
            "ERROR",
        ),
        (
            '(VllmWorker rank=5 pid=3073)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/worker/'
            'gpu_worker.py", line 136, in load_model',
            'File "/opt/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", '
            "line 136, in load_model",
            "VllmWorker rank=5 pid=3073",
            "",
        ),
        (
            "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.50it/s]"
            "INFO 05-01 10:00:00 [default_loader.py:262] Loading weights took 2.71 seconds",
            "Loading weights took 2.71 seconds",
            "",
            "INFO",
        ),
        (
            "> [rank0]: torch.OutOfMemoryError: CUDA out of memory.",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "rank0",
            "",
        ),
        (
            "\x1b[1;36m(VllmWorker TP0 pid=9)\x1b[0;0m WARNING 05-01 10:00:00 [utils.py:1] custom allreduce",
            "custom allreduce",
            "VllmWorker TP0 pid=9",
            "WARNING",
        ),
        (
            "#033[2m#033[33m(raylet)#033[0m node_manager.cc:3007: 2 Workers (tasks /",
            "node_manager.cc:3007: 2 Workers (tasks /",
            "raylet",
            "",
        ),
        (
            "2024-11-05T12:19:32.123456789Z INFO:     Started server process [1]",
            "Started server process [1]",
            "",
            "INFO",
        ),
        ("E0501 12:00:00.123456  1234 raylet.cc:12] Worker died", "Worker died", "", "ERROR"),
        ("Killed", "Killed", "", ""),
        # rsyslog / journalctl around a systemd unit's output (vllm-project/vllm#16030)
        (
            "Apr  3 17:38:57 langmodel52 langmodel[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m"
            " OSError: /root/.cache/xgrammar/xgrammar.so: cannot open shared object file",
            "OSError: /root/.cache/xgrammar/xgrammar.so: cannot open shared object file",
            "VllmWorker rank=3 pid=140343",
            "",
        ),
        (
            "Apr  3 17:38:57 langmodel52 langmodel[139935]: 2025-04-03 17:38:57,455 - "
            "vllm.v1.engine.core_client - CRITICAL - Got fatal signal from worker processes, shutting down.",
            "Got fatal signal from worker processes, shutting down.",
            "",
            "CRITICAL",
        ),
        ("a - b - c", "a - b - c", "", ""),
        # a line pasted as markdown inline code (vllm-project/vllm#44494)
        (
            "`(ApiServer_1 pid=359) AttributeError: 'Gemma4UnifiedVisionConfig' object has no attribute 'x'`",
            "AttributeError: 'Gemma4UnifiedVisionConfig' object has no attribute 'x'",
            "ApiServer_1 pid=359",
            "",
        ),
        ("```", "```", "", ""),  # dashes that are not a logger's columns stay words
        # the formats of the gateways and serving frameworks in front of vLLM, read from their source:
        # LiteLLM's (litellm/_logging.py 1.110), KServe's (kserve/logging.py 0.21), Ray Serve's (2.52)
        (
            "2025-05-29 19:14:02,118 - LiteLLM Proxy:ERROR: common_request_processing.py:2164 - "
            "litellm.proxy.proxy_server._handle_llm_api_exception(): Exception occured - x",
            "litellm.proxy.proxy_server._handle_llm_api_exception(): Exception occured - x",
            "",
            "ERROR",
        ),
        (
            "2025-05-29 19:14:02.118 1 kserve ERROR [engine_health.py:mark_failed():63] vLLM engine entered "
            "an unrecoverable state: x",
            "vLLM engine entered an unrecoverable state: x",
            "",
            "ERROR",
        ),
        (
            "(ServeController pid=4321) WARNING 2025-05-29 19:14:02,118 controller 4321 -- Deployment "
            "'LLMServer:gemma' in application 'default' has 1 replicas",
            "Deployment 'LLMServer:gemma' in application 'default' has 1 replicas",
            "ServeController pid=4321",
            "WARNING",
        ),
        # Triton Inference Server's model-status table (triton-inference-server/server#8578): a model
        # that did not load is an error record, its reason the words; a model that loaded stays a row
        (
            "| vllm  | 1       | UNAVAILABLE: Internal: TypeError: "
            "build_async_engine_client_from_engine_args() got an unexpected keyword argument "
            "'stat_loggers' |",
            "TypeError: build_async_engine_client_from_engine_args() got an unexpected keyword argument "
            "'stat_loggers'",
            "",
            "ERROR",
        ),
        ("| vllm  | 1       | READY  |", "| vllm  | 1       | READY  |", "", ""),
        # Cloud Logging's severity and RFC 3339 time before the payload (a console copy, vertex-ai-samples
        # #2620); DEFAULT says nothing, so the text decides
        (
            "ERROR 2024-01-10T09:30:29.874350070Z ValueError: max_num_batched_tokens (4096) is smaller than "
            "max_model_len (32768).",
            "ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768).",
            "",
            "ERROR",
        ),
        (
            "DEFAULT 2025-03-01T10:00:00Z Starting vLLM API server on http://0.0.0.0:8000",
            "Starting vLLM API server on http://0.0.0.0:8000",
            "",
            "",
        ),
        (
            "NOTICE 2025-03-01T10:00:00.5+00:00 Ready condition status changed",
            "Ready condition status changed",
            "",
            "INFO",
        ),
    ],
)
def test_clean_strips_prefixes_and_keeps_the_words(raw: str, text: str, proc: str, level: str) -> None:
    c = clean(raw)
    assert (c.text, c.proc, c.level) == (text, proc, level)


@pytest.mark.parametrize(
    ("raw", "field", "severity"),
    [
        ("INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0", "ERROR", "INFO"),  # stderr
        ("Traceback (most recent call last):", "DEFAULT", "ERROR"),
        ("ValueError: No available memory for the cache blocks.", "DEFAULT", "ERROR"),
        ("Killed", "DEFAULT", "ERROR"),
        ("  warnings.warn(", "DEFAULT", "WARNING"),
        ("Deploying container to Cloud Run service [gemma]", "DEFAULT", "DEFAULT"),
        ("Deploying container to Cloud Run service [gemma]", "NOTICE", "NOTICE"),
    ],
)
def test_severity_comes_from_the_text_before_the_field(raw: str, field: str, severity: str) -> None:
    assert severity_of(clean(raw), field) == severity


def test_a_hard_wrapped_record_is_joined_and_each_physical_line_stays_citable() -> None:
    lines = [
        "#033[2m#033[33m(raylet)#033[0m [DATE] (raylet) node_manager.cc:3007: 2 Workers (tasks /",
        " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node "
        "(ID: abd4",
        "e281968fd76aa200d56e4529fd1c1cd4373840, IP: 10.0.167.26) over the last time period.",
        "Killed",
    ]
    v = LogView(Observation(logs=[LogLine(text=t) for t in lines]))
    head = v.lines[0]
    assert [n for n, _ in head.cont] == [2, 3]
    assert "Workers (tasks / actors) killed due to memory pressure" in head.text
    assert v.lines[1].text.startswith("actors) killed")  # still a line of its own
    assert v.lines[3].cont == () and v.lines[3].text == "Killed"  # a sentence of its own is not joined


def test_a_gateways_records_after_a_long_line_are_records_of_their_own() -> None:
    """LiteLLM's records (their level after the logger's name) follow vLLM's long stats lines in one
    stream: each is a record, not the hard-wrapped rest of the line before it."""
    stats = (
        "(EngineCore_DP0 pid=212) INFO 05-29 19:14:10 [loggers.py:123] Engine 000: Avg prompt throughput: "
        "812.4 tokens/s, Avg generation throughput: 301.2 tokens/s, Running: 48 reqs, Waiting: 7 reqs"
    )
    gateway = (
        "2025-05-29 19:14:02,118 - LiteLLM Proxy:ERROR: common_request_processing.py:2164 - litellm.proxy."
        "proxy_server._handle_llm_api_exception(): Exception occured - litellm.ServiceUnavailableError: x"
    )
    v = LogView(Observation(logs=[LogLine(text=t) for t in (stats, gateway, gateway)]))
    assert [ln.cont for ln in v.lines] == [(), (), ()]
    assert [ln.severity for ln in v.lines[1:]] == ["ERROR", "ERROR"]


def test_lines_that_start_something_of_their_own_are_never_joined() -> None:
    long = "x" * 81  # not a terminal width
    for cur in (
        "Traceback (most recent call last):",
        '  File "/x.py", line 1, in f',
        "ValueError: bad",
        "Container called exit(1).",  # upper-case start after a line not cut at a terminal width
        "INFO 05-01 10:00:00 [x.py:1] next record",
        # the warnings module's own header (a path, a line number, the category)
        "/usr/local/lib/python3.12/site-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml",
    ):
        assert not continues(clean(long), clean(cur)), cur
    # entries with their own timestamps or a structured payload are separate records
    v = LogView(
        Observation(
            logs=[
                LogLine(text=long, timestamp="2026-01-01T00:00:00Z"),
                LogLine(text="and more", timestamp="2026-01-01T00:00:01Z"),
            ]
        )
    )
    assert v.lines[0].cont == ()


def test_the_record_after_a_glued_progress_bar_loses_its_own_tag_and_compose_column() -> None:
    bar = "Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:21<00:00,  3.12it/s]"
    c = clean(f"{bar}(EngineCore_DP0 pid=1234) vllm  | (APIServer pid=1) ValueError: GGUF model x")
    assert (c.text, c.proc, c.glued) == ("ValueError: GGUF model x", "APIServer pid=1", True)
