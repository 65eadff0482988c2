# ruff: noqa: E501  (log lines are data: they keep the exact wording vLLM and Cloud Run print)
"""Rebuild the long incidents of the library: a root-cause line buried in thousands of lines of noise.

The noise is what a busy vLLM service on Cloud Run really prints (uvicorn access lines, the V1 engine's
periodic stats line, scanner 404s, harmless warnings, shutdown tracebacks). Output is deterministic (fixed
seed), so re-running the script reproduces the committed files byte for byte:

    python -m evals.tools.make_long_incidents [--out evals/incidents]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

SEED = 20260529
MAX_BYTES = 1_000_000

SERVICE: dict[str, Any] = {
    "name": "gemma-12b",
    "region": "us-central1",
    "gpu_type": "nvidia-l4",
    "gpu_count": 1,
    "cpu": 8,
    "memory": "32Gi",
    "image": "vllm/vllm-openai:v0.11.0",
    "args": ["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=16384", "--port=8080"],
    "min_instances": 1,
    "max_instances": 2,
    "concurrency": 8,
}

ALL_MUTATING = [
    "set_vllm_args",
    "set_model",
    "set_resources",
    "set_scaling",
    "set_probe",
    "rollback",
    "restart",
]


class Clock:
    def __init__(self, start: datetime) -> None:
        self.t = start

    def tick(self, rng: random.Random, lo: float = 0.05, hi: float = 2.0) -> datetime:
        self.t += timedelta(seconds=rng.uniform(lo, hi))
        return self.t


def _vllm_ts(t: datetime) -> str:
    return t.strftime("%m-%d %H:%M:%S")


def _entry(t: datetime, severity: str, text: str) -> dict[str, Any]:
    return {
        "timestamp": t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z",
        "severity": severity,
        "text": text,
    }


def noise_line(
    rng: random.Random, clock: Clock, *, running_hi: int = 4, tag: str = "(APIServer pid=1)"
) -> dict[str, Any]:
    """One line of ordinary traffic noise from a healthy serving instance (its API server's ``tag``)."""
    t = clock.tick(rng)
    r = rng.random()
    port = rng.randint(30000, 60999)
    if r < 0.62:
        return _entry(
            t,
            "INFO",
            f'{tag} INFO:     169.254.169.126:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        )
    if r < 0.80:
        run = rng.randint(0, running_hi)
        return _entry(
            t,
            "INFO",
            f"{tag} INFO {_vllm_ts(t)} [loggers.py:127] Engine 000: Avg prompt throughput: "
            f"{rng.uniform(80, 900):.1f} tokens/s, Avg generation throughput: {rng.uniform(10, 60):.1f} tokens/s, "
            f"Running: {run} reqs, Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(1, 25):.1f}%, "
            f"Prefix cache hit rate: {rng.uniform(10, 50):.1f}%",
        )
    if r < 0.88:
        return _entry(t, "INFO", f'{tag} INFO:     169.254.169.126:{port} - "GET /health HTTP/1.1" 200 OK')
    if r < 0.93:
        path = rng.choice(["/wp-login.php", "/.env", "/favicon.ico", "/admin", "/v1/engines"])
        return _entry(
            t,
            "INFO",
            f'{tag} INFO:     169.254.169.126:{port} - "GET {path} HTTP/1.1" 404 Not Found',
        )
    if r < 0.97:
        return _entry(
            t,
            "INFO",
            f'{tag} INFO:     169.254.169.126:{port} - "POST /v1/completions HTTP/1.1" 200 OK',
        )
    return _entry(
        t,
        "WARNING",
        "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is "
        "deprecated. Please install nvidia-ml-py instead.",
    )


def shutdown_traceback(clock: Clock, rng: random.Random, depth: int) -> list[dict[str, Any]]:
    """The long, loud and uninformative tail vLLM prints while it tears down after a failure."""
    lines: list[dict[str, Any]] = []
    frames = [
        ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", 1953, "run_server"),
        (
            "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py",
            1971,
            "run_server_worker",
        ),
        ("/usr/lib/python3.12/contextlib.py", 210, "__aenter__"),
        (
            "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py",
            178,
            "build_async_engine_client",
        ),
        ("/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", 212, "from_vllm_config"),
        (
            "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py",
            102,
            "make_async_mp_client",
        ),
        ("/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", 732, "launch_core_engines"),
        ("/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", 785, "wait_for_engine_startup"),
    ]
    t = clock.tick(rng, 0.5, 1.5)
    lines.append(_entry(t, "ERROR", "(APIServer pid=1) Traceback (most recent call last):"))
    for i in range(depth):
        f, ln, fn = frames[i % len(frames)]
        lines.append(
            _entry(t, "ERROR", f'(APIServer pid=1)   File "{f}", line {ln + i // len(frames)}, in {fn}')
        )
        lines.append(
            _entry(t, "ERROR", "(APIServer pid=1)     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
        )
    lines.append(
        _entry(
            t,
            "ERROR",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
        )
    )
    t = clock.tick(rng, 0.1, 0.5)
    lines.append(
        _entry(
            t,
            "WARNING",
            "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear "
            "to be 1 leaked shared_memory objects to clean up at shutdown",
        )
    )
    lines.append(_entry(t, "WARNING", "Container called exit(1)."))
    return lines


def _engine_oom_block(clock: Clock, rng: random.Random) -> list[dict[str, Any]]:
    t = clock.tick(rng, 5, 10)
    pid = "(EngineCore_DP0 pid=231)"
    out = [
        _entry(
            t,
            "INFO",
            f"(APIServer pid=1) INFO {_vllm_ts(t)} [api_server.py:1839] vLLM API server version 0.11.0",
        ),
        _entry(
            clock.tick(rng, 8, 12),
            "INFO",
            f"{pid} INFO {_vllm_ts(clock.t)} [gpu_model_runner.py:2602] Starting to load model "
            "/mnt/models/gemma-4-12B-it...",
        ),
    ]
    t = clock.tick(rng, 30, 40)
    out.append(
        _entry(
            t,
            "ERROR",
            f"{pid} ERROR {_vllm_ts(t)} [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "240.00 MiB. GPU 0 has a total capacity of 22.03 GiB of which 95.06 MiB is free. Including non-PyTorch "
            "memory, this process has 21.93 GiB memory in use.",
        )
    )
    return out


def _incident(
    slug: str,
    title: str,
    source: str,
    logs: list[dict[str, Any]],
    expected: dict[str, Any],
    service: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """One long incident: ``long-l4-<slug>``, its title after "Long log: ", its source after this
    generator's credit, the reference service unless ``service`` is given."""
    return {
        "id": f"long-l4-{slug}",
        "title": f"Long log: {title}",
        "source": f"Generated by evals/tools/make_long_incidents.py (seed {SEED}){source}",
        "service": service or dict(SERVICE),
        "logs": logs,
        **more,
        "expected": expected,
    }


def _expects(category: str, kinds: list[str], evidence: str, forbidden: list[str]) -> dict[str, Any]:
    return {
        "category": category,
        "remediation_kinds": kinds,
        "evidence": [evidence],
        "forbidden_kinds": forbidden,
    }


def build_weights_oom(rng: random.Random) -> dict[str, Any]:
    clock = Clock(datetime(2026, 7, 20, 9, 0, 0, tzinfo=UTC))
    logs = [noise_line(rng, clock) for _ in range(1800)]
    logs.append(
        _entry(
            clock.tick(rng),
            "NOTICE",
            "Starting new instance. Reason: DEPLOYMENT_ROLLOUT - Instance started due to traffic shifting between "
            "revisions due to deployment, traffic split adjustment, or deployment health check.",
        )
    )
    logs += _engine_oom_block(clock, rng)
    logs += shutdown_traceback(clock, rng, depth=60)
    logs += [noise_line(rng, clock) for _ in range(1400)]
    service = dict(
        SERVICE, args=["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384", "--port=8080"]
    )
    return _incident(
        "weights-oom-buried",
        "a bf16 rollout OOMs while loading weights, buried in 3,000 lines of traffic and a traceback",
        " from real vLLM V1 and Cloud Run wording (https://github.com/vllm-project/vllm/issues/28143)",
        logs,
        _expects(
            "weights_oom", ["set_model", "set_vllm_args"], "CUDA out of memory", ["restart", "set_scaling"]
        ),
        service,
    )


def build_engine_crash(rng: random.Random) -> dict[str, Any]:
    clock = Clock(datetime(2026, 7, 21, 14, 0, 0, tzinfo=UTC))
    logs = [noise_line(rng, clock) for _ in range(2600)]
    t = clock.tick(rng)
    pid = "(EngineCore_DP0 pid=206)"
    logs += [
        _entry(t, "ERROR", f"{pid} ERROR {_vllm_ts(t)} [core.py:790] EngineCore encountered a fatal error."),
        _entry(
            t,
            "ERROR",
            f"{pid} ERROR {_vllm_ts(t)} [core.py:790] torch.AcceleratorError: CUDA error: an illegal memory access "
            "was encountered",
        ),
        _entry(
            t,
            "ERROR",
            f"{pid} ERROR {_vllm_ts(t)} [core.py:790] CUDA kernel errors might be asynchronously reported at some "
            "other API call, so the stacktrace below might be incorrect.",
        ),
        _entry(
            t,
            "ERROR",
            f"(APIServer pid=1) ERROR {_vllm_ts(t)} [async_llm.py:480] AsyncLLM output_handler failed.",
        ),
        _entry(
            t,
            "ERROR",
            "(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
            "trace (above) for the root cause.",
        ),
    ]
    for _ in range(120):
        port = rng.randint(30000, 60999)
        logs.append(
            _entry(
                clock.tick(rng, 0.01, 0.1),
                "INFO",
                f'(APIServer pid=1) INFO:     169.254.169.126:{port} - "POST /v1/chat/completions HTTP/1.1" 500 '
                "Internal Server Error",
            )
        )
    logs += shutdown_traceback(clock, rng, depth=80)
    logs += [noise_line(rng, clock) for _ in range(1500)]
    return _incident(
        "engine-crash-buried",
        "an illegal memory access kills the engine mid-traffic, followed by 500s and a traceback",
        " from the wording of https://github.com/vllm-project/vllm/issues/28028",
        logs,
        _expects(
            "engine_crash",
            ["restart", "rollback", "escalate"],
            "illegal memory access",
            ["set_resources", "set_model"],
        ),
    )


def build_healthy(rng: random.Random) -> dict[str, Any]:
    clock = Clock(datetime(2026, 7, 22, 8, 0, 0, tzinfo=UTC))
    logs = [noise_line(rng, clock) for _ in range(4000)]
    return _incident(
        "healthy-noisy",
        "4,000 lines of a healthy service (access lines, stats, scanner 404s, deprecation warnings)",
        " from vLLM V1 log formats",
        logs,
        {"category": "healthy", "remediation_kinds": [], "forbidden_kinds": list(ALL_MUTATING)},
        metrics=(
            'vllm:num_requests_running{engine="0",model_name="gemma-4-12b"} 2.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="gemma-4-12b"} 0.0\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="gemma-4-12b"} 0.12\n'
            'vllm:num_preemptions_total{engine="0",model_name="gemma-4-12b"} 0.0\n'
        ),
    )


def build_host_memory(rng: random.Random) -> dict[str, Any]:
    clock = Clock(datetime(2026, 7, 23, 11, 0, 0, tzinfo=UTC))
    logs = [noise_line(rng, clock) for _ in range(1500)]
    logs += _engine_oom_block(clock, rng)[:2]
    t = clock.tick(rng, 20, 30)
    logs += [
        _entry(
            t,
            "ERROR",
            "Memory limit of 16384 MiB exceeded with 16502 MiB used. Consider increasing the memory limit, see "
            "https://cloud.google.com/run/docs/configuring/memory-limits",
        ),
        _entry(t, "WARNING", "Container terminated on signal 9."),
        _entry(
            clock.tick(rng, 60, 120),
            "ERROR",
            'Default STARTUP TCP probe failed 1 time consecutively for container "vllm-1" on port 8080. The '
            "instance was not started.",
        ),
    ]
    logs += [noise_line(rng, clock) for _ in range(1500)]
    return _incident(
        "host-memory-buried",
        "a new instance with 16Gi is killed for host memory while the old one keeps serving",
        "; Cloud Run wording from https://tappass-docs-internal.pages.dev/runbooks/oom-crashloop/",
        logs,
        _expects(
            "host_memory_exceeded",
            ["set_resources"],
            "Memory limit of 16384 MiB exceeded",
            ["set_probe", "restart"],
        ),
        dict(SERVICE, cpu=4, memory="16Gi"),
    )


BUILDERS: list[Callable[[random.Random], dict[str, Any]]] = [
    build_weights_oom,
    build_engine_crash,
    build_healthy,
    build_host_memory,
]


def render(doc: dict[str, Any]) -> str:
    """YAML with one log entry per line (a JSON flow mapping, which is valid YAML), like the hand-written files."""
    header = "# Generated by evals/tools/make_long_incidents.py; edit the generator, not this file.\n"
    logs = doc["logs"]
    rest = {k: v for k, v in doc.items() if k not in ("logs", "expected", "metrics")}
    rest["provenance"] = "composed"
    out = [header, yaml.safe_dump(rest, sort_keys=False, allow_unicode=True, width=100_000), "logs:\n"]
    out += [f"  - {json.dumps(e, ensure_ascii=False)}\n" for e in logs]
    tail = {k: doc[k] for k in ("metrics", "expected") if k in doc}
    out.append(yaml.safe_dump(tail, sort_keys=False, allow_unicode=True, width=100_000))
    return "".join(out)


def build_all() -> dict[str, str]:
    """Return {file name: YAML text} for every long incident; one RNG per incident, so each is stable."""
    out: dict[str, str] = {}
    for i, build in enumerate(BUILDERS):
        doc = build(random.Random(SEED + i))
        text = render(doc)
        if len(text.encode()) >= MAX_BYTES:
            raise ValueError(f"{doc['id']}: {len(text.encode())} bytes, over the {MAX_BYTES}-byte limit")
        out[f"{doc['id']}.yaml"] = text
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "incidents")
    args = ap.parse_args(argv)
    for name, text in build_all().items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"wrote {args.out / name} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
