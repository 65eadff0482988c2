# ruff: noqa: E501  (log lines are written whole, as the layers print them)
"""The failure wording of CUDA, NCCL and the wrappers and gateways around vLLM gets its category (issue 11).

``tests/data/stack_messages.yaml`` holds what the CUDA runtime (``cudaGetErrorString``, as torch raises
it), NCCL (``ncclGetErrorString`` and its WARN lines, as vLLM's pynccl and torch.distributed raise them),
the openai client, LiteLLM's proxy, KServe's huggingfaceserver, Xinference, Ray Serve and vLLM
production-stack's router print for a failure, read from their shipped binaries and sources (its header
says how). Each is rendered in the context it comes in:

- ``vllm``: inside a vLLM server's start-up that reached the message's phase, as the rendering of
  ``tests/test_analyzers_layer_wording.py`` (a logged and a bare traceback, a glog record, torch's
  UserWarning, or NCCL's WARN line before vLLM's raise);
- ``client``: the start-up up to the phase, then an application's (or the serving framework's) traceback
  ending ``<exception>: <message>``;
- ``gateway``: the start-up up to the phase, then the gateway's own log records, in its log format.

``repeat``: a refusal a gateway or client logs once per request (a 429 / 503) is rendered as the several
records it comes as: saturation is sustained, one refused request is not it.

Severity is ``DEFAULT`` everywhere: the analyzers must read the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_analyzers_layer_wording import ENG, _container_log, _start, _vllm, forms
from tests.test_analyzers_vllm_wording import PHASES, diagnosed

DATA = Path(__file__).parent / "data" / "stack_messages.yaml"
#: Read with libyaml where PyYAML has it (as ``mcp_tools.incident`` reads incidents): a tenth of the
#: pure-Python loader's time, which every worker would spend collecting.
MESSAGES: list[dict[str, Any]] = yaml.load(
    DATA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
)["messages"]
LAYERS = {"cuda", "nccl", "openai", "litellm", "kserve", "xinference", "ray_serve", "production_stack"}
SHAPES = {"vllm", "client", "gateway"}

_GATEWAY_PREFIX = {
    # litellm/_logging.py: "%(asctime)s - %(name)s:%(levelname)s: %(filename)s:%(lineno)s - %(message)s"
    "litellm": "2025-05-29 19:14:02,118 - LiteLLM Proxy:{level}: common_request_processing.py:2164 - "
    "litellm.proxy.proxy_server._handle_llm_api_exception(): Exception occured - "
    "litellm_call_id=5d2b3a4e-1c1f-4e8a-9a43-7a2d1c8e5f10 - ",
    # kserve/logging.py: "%(asctime)s.%(msecs)03d %(process)s %(name)s %(levelname)s [%(filename)s:%(funcName)s():%(lineno)s] %(message)s"
    "kserve": "2025-05-29 19:14:02.118 1 kserve {level} [engine_health.py:{function}():63] ",
    # ray/serve/_private/logging_utils.py ServeFormatter: "%(levelname)s %(asctime)s {component} {id} -- %(message)s"
    "serve": "(ServeController pid=4321) {level} 2025-05-29 19:14:02,118 controller 4321 -- ",
    # production-stack's src/vllm_router/log.py: "{colour}[%(asctime)s] %(levelname)s:{reset} %(message)s
    # {italic}(%(filename)s:%(lineno)d:%(name)s){reset}"
    "router": "\x1b[33;20m[2025-05-29 19:14:02,118] {level}:\x1b[0m ",
}
_GATEWAY_SUFFIX = {"router": " \x1b[3m({file}:vllm_router.service_discovery)\x1b[0m"}


def _client(m: dict[str, Any]) -> list[str]:
    text = m["message"].split("\n")
    traceback = [
        "Traceback (most recent call last):",
        '  File "/app/chat.py", line 41, in <module>',
        '    resp = client.chat.completions.create(model="gemma", messages=messages)',
        f"{m['exception']}: {text[0]}",
        *text[1:],
    ]
    return _container_log(m) + traceback * int(m.get("repeat", 1))


def _gateway(m: dict[str, Any]) -> list[str]:
    prefix = _GATEWAY_PREFIX[m["source"]].format(level=m["level"], function=m.get("function", ""))
    suffix = _GATEWAY_SUFFIX.get(m["source"], "").format(file=m.get("function", ""))
    first, *rest = m["message"].split("\n")
    return _container_log(m) + [prefix + first + suffix, *rest] * int(m.get("repeat", 1))


def stack_render(m: dict[str, Any], form: str) -> list[str]:
    """The message's log in the shape its layer prints it."""
    if m["shape"] == "vllm":
        return _vllm(m, form)
    return _client(m) if m["shape"] == "client" else _gateway(m)


CASES = [pytest.param(m, form, id=f"{m['id']}-{form}") for m in MESSAGES for form in forms(m)]


@pytest.mark.parametrize(("m", "form"), CASES)
def test_stack_message_gets_its_category(m: dict[str, Any], form: str) -> None:
    lines = stack_render(m, form)
    assert diagnosed(lines) == m["category"], "\n".join(lines)


def test_the_table_covers_every_layer_and_names_its_source() -> None:
    assert {m["layer"] for m in MESSAGES} == LAYERS
    for layer in LAYERS:
        assert sum(m["layer"] == layer for m in MESSAGES) >= 3, layer
    assert len({m["id"] for m in MESSAGES}) == len(MESSAGES)
    for m in MESSAGES:
        assert m["phase"] in PHASES and m["shape"] in SHAPES, m["id"]
        assert m["where"] and m["tags"] and m["template"] and m["message"], m["id"]
        assert "@" in m["where"], m["id"]  # a file or binary at a named version


def _raised(phase: str, exception_line: str, *rest: str) -> list[str]:
    """A start-up up to ``phase``, then a bare traceback ending in ``exception_line``."""
    return [
        *_start(phase),
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2890, in profile_run',
        "    hidden_states = self._dummy_run(self.max_num_tokens)",
        exception_line,
        *rest,
    ]


@pytest.mark.parametrize(
    ("said", "category"),
    [
        # Triton's launcher raises the driver's own text (cuGetErrorString: the same table as the runtime's)
        (
            "RuntimeError: Triton Error [CUDA]: forward compatibility was attempted on non supported HW",
            "unsupported_config",
        ),
        (
            "RuntimeError: Triton Error [CUDA]: the provided PTX was compiled with an unsupported toolchain.",
            "unsupported_config",
        ),
        ("RuntimeError: Triton Error [CUDA]: PTX JIT compiler library not found", "unsupported_config"),
        ("RuntimeError: Triton Error [CUDA]: too many resources requested for launch", "unsupported_config"),
        ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered", "engine_crash"),
        # the error's name alone, as a C++ check prints it
        ("RuntimeError: CUDA error: cudaErrorSystemDriverMismatch", "unsupported_config"),
        ("RuntimeError: CUDA error: cudaErrorDevicesUnavailable", "gpu_quota"),
    ],
)
def test_cuda_runtime_words_name_the_family_whatever_raises_them(said: str, category: str) -> None:
    """The CUDA runtime's words for a GPU, driver or kernel this place cannot use are unsupported_config
    (a GPU held by another process is gpu_quota) whoever relays them; a fault in a kernel stays a crash."""
    assert diagnosed(_raised("profiling", said)) == category


def test_an_nccl_error_takes_the_cause_its_last_error_names_and_only_that() -> None:
    """torch.distributed's NCCL error is the report of what its "Last error:" says failed: a CUDA
    allocation (NCCL's "Cuda failure 2 'out of memory'") after the weights loaded is runtime_oom; a
    fault it names ("an illegal memory access") is no other family's, so the error stays the crash."""
    head = "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"
    explain = "ncclUnhandledCudaError: Call to CUDA function failed."
    oom = _raised("profiling", head, explain, "Last error:", "Cuda failure 2 'out of memory'")
    assert diagnosed(oom) == "runtime_oom"
    fault = _raised(
        "profiling", head, explain, "Last error:", "Cuda failure 'an illegal memory access was encountered'"
    )
    assert diagnosed(fault) == "engine_crash"
    # without NCCL's detail the same error names no cause: the crash
    assert diagnosed(_raised("profiling", head, explain)) == "engine_crash"


STATS = (
    f"{ENG}INFO 05-29 19:14:10 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation "
    "throughput: 301.2 tokens/s, Running: 48 reqs, Waiting: 7 reqs, GPU KV cache usage: 71.2%, Prefix cache hit rate: 12.0%"
)


@pytest.mark.parametrize(
    "refusal",
    [
        "openai.RateLimitError: Error code: 429 - Rate limit exceeded: 120 requests per minute for model gemma",
        "openai.InternalServerError: Error code: 503",
        _GATEWAY_PREFIX["litellm"].format(level="ERROR")
        + "litellm.ServiceUnavailableError: ServiceUnavailableError: Hosted_vllmException - Service Unavailable",
    ],
)
def test_refusals_a_client_or_gateway_relays_count_as_rejections(refusal: str) -> None:
    """A 429 / 503 as the openai client or LiteLLM relays it is a rejected request: with a queue in vLLM's
    own stats (one sign alone), the server is saturated; the queue alone is not enough."""
    served = [*_start("serving"), STATS]
    assert diagnosed(served) != "overload"
    assert diagnosed(served + [refusal] * 6) == "overload"


@pytest.mark.parametrize(
    "record",
    [
        _GATEWAY_PREFIX["litellm"].format(level="ERROR")
        + "litellm.Timeout: APITimeoutError - Request timed out. Error_str: Request timed out.",
        "ERROR 2025-05-29 19:14:02,118 app.py:88 chat failed: openai.APIConnectionError: Connection error.",
        "2025-05-29 19:14:02,118 - router - ERROR - call failed: litellm.exceptions.APIConnectionError: "
        "APIConnectionError: Hosted_vllmException - Connection error.",
    ],
)
def test_a_failed_call_to_the_server_quoted_in_a_record_is_never_healthy(record: str) -> None:
    """A model client's exception quoted inside another program's record says a call to the server
    failed: after a completed start it is unknown (the record does not say why), not healthy; the
    client's name in a record that reports no failure proves nothing."""
    up = _start("serving")
    assert (
        diagnosed([*up, "INFO 2025-05-29 19:14:02,118 app.py:12 using the openai client 3.57.0"]) == "healthy"
    )
    assert diagnosed([*up, record]) == "unknown"


@pytest.mark.parametrize(
    "record",
    [
        _GATEWAY_PREFIX["router"].format(level="WARNING") + "gemma at http://10.52.0.7:8000 not healthy!",
        _GATEWAY_PREFIX["router"].format(level="ERROR")
        + "Failed to get model info from http://10.52.0.7:8000/v1/models: Server disconnected",
        "2025-05-29 19:14:02,118 - LiteLLM Router:WARNING: router.py:5120 - No healthy deployments available for model gemma",
    ],
)
def test_a_router_saying_its_backend_is_down_is_never_healthy(record: str) -> None:
    """A router's words that the server it routes to is unhealthy, unreachable or absent are a failure
    whatever vLLM's own log shows (another replica's start, an earlier answer); the same router saying
    the backend is healthy is not."""
    up = _start("serving")
    fine = _GATEWAY_PREFIX["router"].format(level="INFO") + "gemma at http://10.52.0.7:8000 is healthy"
    assert diagnosed([*up, fine]) == "healthy"
    assert diagnosed([*up, record]) == "unknown"
