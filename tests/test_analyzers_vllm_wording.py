# ruff: noqa: E501  (log lines are written whole, as vLLM prints them)
"""Every failure message vLLM has printed across its releases gets its category (issue 11).

``tests/data/vllm_messages.yaml`` holds the messages as vLLM's source raises or logs them, v0.4 ..
current (its header says how they were read). Each is rendered as it appears in a server's log, inside a
minimal start-up that reached the phase where vLLM raises it, in two shapes:

- ``logged``: the record as vLLM's logger prints it (``ERROR 05-29 19:12:40 [file.py:NN] ...``; a
  traceback printed through the logger, every line with the prefix, for a raise);
- ``bare``: a raise as a bare traceback on stderr, ending ``ValueError: ...`` (a log record in the other
  record format: V0's ``file.py:NN]`` for a V1 release, V1's ``[file.py:NN]`` for a V0 one).

The diagnosis of each must be the message's category. Severity is ``DEFAULT`` (the field says nothing):
the analyzers must read the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from graph.analyzers import run_analyzers
from graph.diagnosis import choose_root_cause
from graph.observation import Observation

DATA = Path(__file__).parent / "data" / "vllm_messages.yaml"
#: Read with libyaml where PyYAML has it (as ``mcp_tools.incident`` reads incidents): a tenth of the
#: pure-Python loader's time, which every worker would spend collecting.
MESSAGES: list[dict[str, Any]] = yaml.load(
    DATA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
)["messages"]

MODEL = "/mnt/models/gemma-3-12b-it"
API = "(APIServer pid=1) "
ENG = "(EngineCore_DP0 pid=212) "
PHASES = ["args", "config", "loading", "profiling", "kv_cache", "serving"]

# A start-up as V1 (v0.8 ..) prints it, by the phase each milestone enters: (process, file:line, text).
# A message of phase P follows the milestones of every phase up to P.
V1_LIFE: dict[str, list[tuple[str, str, str]]] = {
    "args": [
        ("", "__init__.py:216", "Automatically detected platform cuda."),
        (API, "api_server.py:1839", "vLLM API server version 0.11.0"),
        (API, "utils.py:233", f"non-default args: {{'model': '{MODEL}', 'max_model_len': 8192}}"),
    ],
    "config": [
        (
            ENG,
            "core.py:77",
            f"Initializing a V1 LLM engine (v0.11.0) with config: model='{MODEL}', dtype=torch.bfloat16, max_seq_len=8192",
        ),
    ],
    "loading": [(ENG, "gpu_model_runner.py:2602", f"Starting to load model {MODEL}...")],
    "profiling": [
        (ENG, "default_loader.py:267", "Loading weights took 85.31 seconds"),
        (ENG, "gpu_model_runner.py:2653", "Model loading took 8.6213 GiB and 87.112 seconds"),
    ],
    "kv_cache": [
        (ENG, "gpu_worker.py:298", "Available KV cache memory: 9.87 GiB"),
        (ENG, "kv_cache_utils.py:1087", "GPU KV cache size: 26,944 tokens"),
    ],
    "serving": [
        (ENG, "core.py:210", "init engine (profile, create kv cache, warmup model) took 61.05 seconds"),
        (API, "api_server.py:1971", "Starting vLLM API server 0 on http://0.0.0.0:8080"),
        (API, "", "INFO:     Application startup complete."),
        (API, "", 'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
    ],
}
# The same life as V0 (.. v0.7) prints it.
V0_LIFE: dict[str, list[tuple[str, str, str]]] = {
    "args": [
        ("", "api_server.py:585", "vLLM API server version 0.6.6"),
        ("", "api_server.py:586", f"args: Namespace(model='{MODEL}', max_model_len=8192)"),
    ],
    "config": [
        (
            "",
            "llm_engine.py:234",
            f"Initializing an LLM engine (v0.6.6) with config: model='{MODEL}', dtype=torch.bfloat16, max_seq_len=8192",
        ),
    ],
    "loading": [("", "model_runner.py:1094", f"Starting to load model {MODEL}...")],
    "profiling": [("", "model_runner.py:1099", "Loading model weights took 8.6213 GB")],
    "kv_cache": [("", "gpu_executor.py:83", "# GPU blocks: 1684, # CPU blocks: 2048")],
    "serving": [
        ("", "api_server.py:640", "Starting vLLM API server on http://0.0.0.0:8080"),
        ("", "", "INFO:     Application startup complete."),
        ("", "", 'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
    ],
}


def _record(v0: bool, proc: str, level: str, where: str, text: str) -> str:
    if not where:
        return f"{proc}{text}"
    if v0:
        return f"{proc}{level} 06-26 07:48:15 {where}] {text}"
    return f"{proc}{level} 05-29 19:12:40 [{where}] {text}"


def _life(m: dict[str, Any], v0: bool) -> list[str]:
    life = V0_LIFE if v0 else V1_LIFE
    out: list[str] = []
    for phase in PHASES[: PHASES.index(m["phase"]) + 1]:
        for proc, where, text in life[phase]:
            out.append(_record(v0, "" if v0 else proc, "INFO", where, text))
    return out


def _traceback(m: dict[str, Any]) -> list[str]:
    file, _, line = m["where"].partition("@")[0].rpartition(":")
    lines = m["message"].split("\n")
    return [
        "Traceback (most recent call last):",
        f'  File "/usr/local/lib/python3.12/dist-packages/{file}", line {line}, in {m["function"]}',
        f"    raise {m['exception'].rsplit('.', 1)[-1]}(",
        f"{m['exception']}: {lines[0]}",
        *lines[1:],
    ]


def render(m: dict[str, Any], form: str) -> list[str]:
    """The message's log: the start-up up to its phase, then the failure in the given shape."""
    v0 = bool(m.get("v0"))
    if form == "bare" and m["kind"] == "log":
        v0 = not v0  # the record in the other record format
    proc = "" if v0 else (API if m["phase"] == "serving" and m["category"] == "context_too_long" else ENG)
    path = m["where"].partition("@")[0]
    file, _, line = path.rpartition(":")
    where = f"{file.rsplit('/', 1)[-1]}:{line}"
    out = _life(m, v0)
    if m["kind"] == "log":
        for _ in range(int(m.get("repeat", 1))):
            out += [_record(v0, proc, m["level"], where, t) for t in m["message"].split("\n")]
        return out
    if form == "bare":
        return out + _traceback(m)
    return out + [_record(v0, proc, "ERROR", where, t) for t in _traceback(m)]


CASES = [pytest.param(m, form, id=f"{m['id']}-{form}") for m in MESSAGES for form in ("logged", "bare")]


def diagnosed(lines: list[str]) -> str:
    obs = Observation(id="wording", logs=[{"severity": "DEFAULT", "text": t} for t in lines])
    return choose_root_cause(run_analyzers(obs), obs).category


@pytest.mark.parametrize(("m", "form"), CASES)
def test_vllm_message_gets_its_category(m: dict[str, Any], form: str) -> None:
    lines = render(m, form)
    assert diagnosed(lines) == m["category"], "\n".join(lines)


def test_the_table_covers_every_family_vllm_reports() -> None:
    """The table has each family vLLM reports itself, and every entry names its source."""
    families = {m["category"] for m in MESSAGES}
    assert families >= {
        "weights_oom",
        "kv_cache_oom",
        "runtime_oom",
        "context_too_long",
        "model_not_found",
        "auth_denied",
        "unsupported_config",
        "engine_hung",
        "engine_crash",
        "overload",
    }
    for m in MESSAGES:
        assert m["phase"] in PHASES and m["kind"] in ("raise", "log"), m["id"]
        assert "@v" in m["where"] and m["tags"], m["id"]
        assert m["exception" if m["kind"] == "raise" else "level"], m["id"]


def test_a_worker_stopped_by_sigterm_is_not_the_crash() -> None:
    """V0 prints "Worker ... died, exit code: -15" for the workers it stops after what failed: with an
    exception no family explains before it, the diagnosis stays unknown (not a guessed engine_crash);
    the same worker dead of a segfault (-11) is the crash."""
    failed = [
        *(
            _record(True, "", "INFO", w, t)
            for _, w, t in V0_LIFE["args"] + V0_LIFE["config"] + V0_LIFE["loading"]
        ),
        # (not "'NoneType' object is not callable": that is an optional import left None, which
        # unsupported_config explains)
        "ERROR 02-14 03:51:44 engine.py:366] IndexError: list index out of range",
    ]
    stopped = "ERROR 02-14 03:51:45 multiproc_worker_utils.py:116] Worker VllmWorkerProcess pid 25666 died, exit code: -15"
    assert diagnosed([*failed, stopped]) == "unknown"
    assert diagnosed([*failed[:-1], stopped.replace("-15", "-11")]) == "engine_crash"
