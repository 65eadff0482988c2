"""unsupported_config: a dtype, quantization, kernel, architecture or flag not supported here.

Wordings: "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4
GPU has compute capability 7.5."; "The quantization method fp8 is not supported for the current GPU.
Minimum capability: 89. Current capability: 75." (vllm-project/vllm#4327); "FP8 quantized models is
only supported on GPUs with compute capability >= 9.0"; "Failed to find a kernel that can implement
the WNA16 linear layer" (vllm-project/vllm#30602); "Model architectures ['X'] are not supported for
now"; argparse "unrecognized arguments: --foo" / "error: argument --x: invalid choice"
(googlecodelabs/feedback#1825); "CUDA error: no kernel image is available for execution on the device".
The GPU named in the spec is checked against the planner's support table as well.
"""

from __future__ import annotations

import re

from graph.analyzers.base import (
    Evidence,
    Finding,
    Line,
    LogView,
    finding,
    phase_of,
    ran_after,
    says_something,
    started_between,
    view,
)
from graph.observation import Observation
from mcp_tools.redact import redact, redact_args
from mcp_tools.spec_ops import flags, get_model
from mcp_tools.vocabulary import (
    ADMISSION_DENIED,
    ARCH_COMPUTE_CAPABILITY,
    ASKABLE_SWITCHES,
    BARE_EXCEPTION,
    CLIENT_ERROR_STATUS,
    EXCEPTION,
    EXCEPTION_PREFILTER,
    FACT_DEVICE_REFUSED,
    FACT_DTYPE_PREFILTER,
    FACT_FLAG_CONTRADICTED,
    FACT_FLASH_ATTENTION,
    FACT_FLOAT16_REFUSED_MODEL,
    FACT_FLOAT16_SERVED,
    FACT_KV_CACHE_DTYPE,
    FACT_MIN_ARCH,
    FACT_MIN_CAPABILITY,
    FACT_NO_BF16,
    FACT_PARALLEL_DIVISOR,
    FACT_QUANT_TENSOR,
    FACT_QUANTIZATION,
    FACT_REFUSED_VALUE,
    FACT_SETTING_FIGURE,
    FACT_TRITON_FP8,
    FACT_UNRECOGNIZED_ARGS,
    FLAG_FILLER_WORDS,
    FLAG_WORD,
    FLAGS_NEVER_IMPLICATED,
    FLASH_ATTENTION_MIN_CC,
    FRAME,
    KIND_ASKS_ENV,
    KIND_ASKS_SETTING,
    KIND_NO_DEVICE,
    QUANT_TENSOR_METHOD,
    REQUEST_NEEDS_FLAGS,
    REQUEST_REFUSED,
    SUPPORT_CHECK,
    TRITON_FP8_MIN_CC,
    UNSUPPORTED,
    UNSUPPORTED_DEVICE_WARNING,
    UNSUPPORTED_GENERIC,
    UNSUPPORTED_LAUNCH,
    UNSUPPORTED_WARNING,
    UP_PHASES,
    Phase,
)


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    refused = v.first(ADMISSION_DENIED)
    if refused is not None:  # nothing ran: the platform would not take the spec
        detail = _next_record(v, refused.n)
        return [
            finding(
                "unsupported_config",
                0.9,
                f"The platform's admission control refused the workload's spec (line {refused.n}): "
                f"{refused.text.strip()[:200]}",
                [refused, *([detail] if detail else [])],
                pattern=ADMISSION_DENIED,
                analyzer="unsupported_config",
                facts={"platform_refused": True},
            )
        ]
    # A start that got past it (fell back to another backend, and came up) was not stopped by it.
    hits = [
        ln
        for ln in v.grep(UNSUPPORTED)
        if not UNSUPPORTED_WARNING.search(ln.text) and ln.severity != "WARNING" and not ran_after(v, ln)
    ]
    # torch's warning that it has no kernels for this GPU, on a start that did not get past it
    hits += [ln for ln in v.grep(UNSUPPORTED_DEVICE_WARNING) if not ran_after(v, ln) and ln not in hits]
    # a kernel launch this GPU cannot serve, in a start that failed on it
    hits += [ln for ln in v.grep(UNSUPPORTED_LAUNCH) if _in_failed_start(v, ln.n) and ln not in hits]
    # no GPU (no platform at all) where the engine starts, whatever level the line is printed at ("No
    # platform detected" is INFO): an engine that never came up after it cannot run there
    hits += [ln for ln in v.grep(KIND_NO_DEVICE) if _in_failed_start(v, ln.n) and ln not in hits]
    if not hits:
        hits = [
            ln
            for ln in v.grep(UNSUPPORTED_GENERIC)
            if ln.said_error  # generic words: only a record that says it is an error, not its stream
            and not UNSUPPORTED_WARNING.search(ln.text)
            and v.phase_at(ln.n) < Phase.API_UP
        ]
    # A request the server refused and answered ("Error in applying chat template from request: System
    # role not supported") is the request's, not the configuration's.
    hits = [ln for ln in hits if not REQUEST_REFUSED.search(ln.text)]
    if hits:
        facts = facts_of(obs, "\n".join(ln.text for ln in hits[:3]))
        summary = (
            f"The engine found no GPU to run on (line {hits[0].n})."
            if facts.get("no_device")
            else f"A setting is not supported on this GPU / vLLM (line {hits[0].n})."
        )
        return [
            finding(
                "unsupported_config",
                0.9,
                summary,
                hits[:3],
                pattern=UNSUPPORTED,
                analyzer="unsupported_config",
                facts=facts,
            )
        ]
    checks = _failed_support_check(v)
    if checks:
        return [
            finding(
                "unsupported_config",
                0.8,
                f"The start failed in a check of what this build or GPU supports (line {checks[0].n}).",
                checks,
                pattern=SUPPORT_CHECK,
                analyzer="unsupported_config",
                facts=facts_of(obs, "\n".join(ln.text for ln in checks)),
            )
        ]
    return _from_spec(obs, v.total) or _float16_refused(v) or _request_needs_flags(v)


def _request_needs_flags(v: LogView) -> list[Finding]:
    """A request refused because the server was not started with the flags its feature needs (the
    refusal names them, in an error or a client's 4xx): the serving configuration lacks a feature the
    clients use. A record cut after it is read whole."""
    for ln in v.grep(REQUEST_NEEDS_FLAGS):
        m = REQUEST_NEEDS_FLAGS.search(ln.text)
        if m is None or not (ln.said_error or CLIENT_ERROR_STATUS.search(ln.text)):
            continue
        flags = FLAG_WORD.findall(m.group("flags"))
        return [
            finding(
                "unsupported_config",
                0.8,
                f"Requests are refused because the server was not started with {' and '.join(flags)} "
                f"(line {ln.n}): the clients use a feature this serving configuration does not enable.",
                [ln],
                pattern=REQUEST_NEEDS_FLAGS,
                analyzer="unsupported_config",
                facts={"request_needs_flags": flags},
            )
        ]
    return []


def _float16_refused(v: LogView) -> list[Finding]:
    """The last launch or configuration line serves, in float16, a model type vLLM refuses in float16
    in later releases (``FACT_FLOAT16_REFUSED_MODEL``), and nothing in the log failed after it: the server
    runs, and what it answers is what is wrong. Placed after the log's last line, so any failure the
    log shows comes first."""
    ln = v.last(FACT_FLOAT16_SERVED, prefilter=FACT_DTYPE_PREFILTER)
    m = FACT_FLOAT16_REFUSED_MODEL.search(ln.text) if ln is not None else None
    if ln is None or m is None or v.first(EXCEPTION, after=ln.n, prefilter=EXCEPTION_PREFILTER):
        return []
    f = finding(
        "unsupported_config",
        0.6,
        f"Line {ln.n} serves {m.group(0)} in float16, which later vLLM releases refuse for this model type "
        "(numerical instability: empty or wrong answers); it runs in bfloat16 or float32.",
        [ln],
        pattern=FACT_FLOAT16_SERVED,
        analyzer="unsupported_config",
        specific=False,
        facts={"float16_refused": m.group(0)},
    )
    f.first_line = f.last_line = v.total + 1
    return [f]


def _next_record(v: LogView, n: int) -> Line | None:
    """The next line after ``n`` from the same process that is not a caret underline or blank."""
    proc = v.lines[n - 1].proc
    return next((ln for ln in v.lines[n:] if not ln.head and ln.proc == proc and says_something(ln)), None)


def _failed_support_check(v: LogView) -> list[Line]:
    """A traceback that ends in a support check: its deepest frame is the check and no exception with
    a message follows (the paste was cut there), or it asserts support and raised a bare
    AssertionError. The lines cited: the check, and the exception when there is one. Only a start's
    check: one raised after the engine was ready (a request's ``supports_tool_choice``), or by a start
    that another completed after, refused a request or was retried, not this configuration."""
    for ln in v.grep(SUPPORT_CHECK):
        if not _in_failed_start(v, ln.n):
            continue
        nxt = _next_record(v, ln.n)
        frame = FRAME.match(ln.text)
        if frame is not None:
            if not SUPPORT_CHECK.search(frame.group("fn")):
                continue
            # the call into the check (the source line before the frame), the check's own source
            # line, and what follows it: an end of the traceback, a bare exception, or another record
            call = [c for c in v.window(ln.n, 3)[:-1] if c.proc == ln.proc and v.is_source(c.n)][-1:]
            after = _next_record(v, nxt.n) if nxt is not None and v.is_source(nxt.n) else nxt
            if after is None or BARE_EXCEPTION.match(after.text):
                return [*call, ln] + ([nxt] if nxt is not None else []) + ([after] if after else [])
            if not (FRAME.match(after.text) or EXCEPTION.match(after.text)):
                return [*call, ln] + ([nxt] if nxt is not None else [])
        elif (
            ln.text.lstrip().startswith("assert ")
            and v.is_source(ln.n)
            and nxt is not None
            and BARE_EXCEPTION.match(nxt.text)
        ):
            return [ln, nxt]
    return []


def _in_failed_start(v: LogView, n: int) -> bool:
    """Line ``n`` is in a start that never completed: before the engine was ready (as far as its
    milestones or stack say; a paste of the traceback alone says nothing), and no start completed
    after it (``base.failed_in_startup``, which also takes a phase-less paste)."""
    return phase_of(v, n) < Phase.ENGINE_READY and started_between(v, after=n, phases=UP_PHASES) is None


def facts_of(obs: Observation, text: str) -> dict[str, object]:
    """What is not supported, as the remedies need it, from the failing record's ``text`` (also for a
    failure the server's life classified, ``graph.diagnosis``, whose wording no pattern names)."""
    facts: dict[str, object] = {}
    m = FACT_UNRECOGNIZED_ARGS.search(text)
    if m:
        words = m.group(1).split()[:20]
        facts["unrecognized_flags"] = [a.split("=")[0] for a in words if a.startswith("--")]
        # words that are no flag and no flag's value (that may be a key): a positional the command line
        # repeats (``vllm serve`` written again after an image whose entrypoint already is it)
        stray = [
            redact(a[:80])
            for i, a in enumerate(words)
            if not a.startswith("-") and not (i and words[i - 1].startswith("-") and "=" not in words[i - 1])
        ]
        if stray:
            facts["unrecognized_words"] = stray[:6]
    r = FACT_REFUSED_VALUE.search(text)
    if r and r.group("flag").lstrip("-").replace("-", "_") not in FLAGS_NEVER_IMPLICATED:
        facts["refused_value_flag"] = r.group("flag")
    elif FACT_FLAG_CONTRADICTED.search(text):  # the checkpoint says its quantization: the flag is not needed
        facts["refused_value_flag"] = "--quantization"
    if FACT_NO_BF16.search(text):
        facts["no_bfloat16"] = True
    c = FACT_MIN_CAPABILITY.search(text)
    a = FACT_MIN_ARCH.search(text)
    if c:
        facts["min_compute_capability"] = int(c.group(1) or c.group(2)) / 10
    elif a:
        arch, sm = a.group("arch") or a.group("only"), a.group("sm")
        facts["min_compute_capability"] = ARCH_COMPUTE_CAPABILITY[arch.lower()] if arch else int(sm) / 10
    elif FACT_FLASH_ATTENTION.search(text):
        facts["min_compute_capability"] = FLASH_ATTENTION_MIN_CC
    elif FACT_TRITON_FP8.search(text):
        facts["min_compute_capability"] = TRITON_FP8_MIN_CC
    refused = FACT_DEVICE_REFUSED.search(text)
    if refused:
        least = float(refused.group(1))
        facts["device_refused"] = True
        facts["min_compute_capability"] = max(least, float(facts.get("min_compute_capability") or 0))  # type: ignore[arg-type]
    if FACT_QUANTIZATION.search(text):
        facts["quantization"] = True
    if FACT_KV_CACHE_DTYPE.search(text):
        facts["kv_cache_dtype"] = True
    if KIND_NO_DEVICE.search(text):
        facts["no_device"] = True
    q = FACT_QUANT_TENSOR.search(text)
    if q:  # GPTQ's and AWQ's tensors are the same names: the checkpoint's name tells them apart
        ref = (get_model(obs.service.args) if obs.service else None) or ""
        by_name = next((m for m in ("awq", "gptq") if m in ref.lower()), None)
        method = QUANT_TENSOR_METHOD.get(q.group("suffix")) or by_name
        if method:
            facts["checkpoint_quantization"] = method
    d = FACT_PARALLEL_DIVISOR.search(text)
    if d:
        facts["parallel_divisor"] = {
            "flag": f"--{d.group('which').lower()}-parallel-size",
            "total": int(d.group("total")),
            "size": int(d.group("size")),
        }
    named = implicated_flags(obs.service.args if obs.service else [], text)
    if named:
        facts["implicated_flags"] = named
    asked = asked_setting(text)
    if asked:
        facts["asked_setting"] = asked
    e = KIND_ASKS_ENV.search(text)
    if e:
        facts["asked_env"] = {"name": e.group("env"), "value": e.group("value").rstrip(".")}
    return facts


def asked_setting(text: str) -> dict[str, object] | None:
    """The setting a check asks to raise or lower, and to what, from its own figures: "max_tokens_per_mm_item
    (2496) is larger than max_num_batched_tokens (2048). Please increase max_num_batched_tokens" asks for
    ``--max-num-batched-tokens 2496`` (the largest other figure it compares, above the setting's own; the
    smallest below it for a decrease). A switch it asks to turn on ("set the option
    `trust_remote_code=True`") is ``{"flag": "--trust-remote-code", "to": True}``. None when it asks for
    something else or gives no such figure."""
    m = KIND_ASKS_SETTING.search(text)
    if m is None:
        return None
    name = m.group("name").lstrip("-").replace("-", "_").lower()
    if name in ASKABLE_SWITCHES and m.group("verb").lower() in _SWITCH_ON:
        return {"flag": "--" + name.replace("_", "-"), "to": True}  # a switch: turned on
    if m.group("verb").lower() not in _RAISE | _LOWER or name not in _SIZES:
        return None
    figures = [(f.group("name").lower(), int(f.group("value"))) for f in FACT_SETTING_FIGURE.finditer(text)]
    own = next((v for n, v in figures if n == name), None)
    others = [v for n, v in figures if n != name]
    if own is None or not others:
        return None
    to = max(others) if m.group("verb").lower() in _RAISE else min(others)
    if (to > own) != (m.group("verb").lower() in _RAISE) or to == own or not 0 < to <= _LARGEST:
        return None  # (a figure no engine takes, a hostile line's, is no fact to act on)
    return {"flag": "--" + name.replace("_", "-"), "to": to}


#: The engine's sizes a check may ask to change (by their engine-argument names), and the largest
#: figure taken for one.
_SIZES = frozenset({"max_num_batched_tokens", "max_model_len", "max_num_seqs", "max_seq_len_to_capture"})
_LARGEST = 10_000_000
#: The verbs (their stems, as ``KIND_ASKS_SETTING`` reads them) that ask for a larger or a smaller figure.
_RAISE = frozenset({"increas", "rais"})
_LOWER = frozenset({"decreas", "reduc", "lower"})
_SWITCH_ON = frozenset({"set", "enabl", "pass", "specify"})


def implicated_flags(args: list[str], text: str) -> list[str]:
    """The flags the service sets that a failing check names: by its feature's words ("chunked prefill"
    for ``--enable-chunked-prefill``, "kv cache dtype") or by its value ("awq" for
    ``--quantization=awq``). Turning such a flag off is the smallest change that can make the check
    pass. Flags naming what is served, or that another family's remedy sizes, are never named."""
    said = " " + re.sub(r"[\W_]+", " ", text.lower()) + " "
    out = []
    for flag, value in flags(args).items():
        name = flag.lstrip("-").replace("-", "_")
        if name in FLAGS_NEVER_IMPLICATED:
            continue
        words = [w for w in name.split("_") if w not in FLAG_FILLER_WORDS]
        phrases = [" ".join(words)] if words else []
        # a word-like value (not a path, a number or a boolean)
        if (
            isinstance(value, str)
            and re.fullmatch(r"[A-Za-z][\w.-]{2,}", value)
            and value.lower() not in ("true", "false", "auto", "none")
        ):
            phrases.append(re.sub(r"[\W_]+", " ", value.lower()))
        if any(f" {p} " in said for p in phrases if p):
            out.append(flag)
    return out


def _from_spec(obs: Observation, total: int) -> list[Finding]:
    """No log says so, but the spec asks the GPU for something it cannot do (planner's support table)."""
    svc = obs.service
    if svc is None or not svc.gpu_type or not svc.args or not obs.logs:
        return []
    try:
        from mcp_tools.capacity import parse_vllm_args, plan_capacity

        flags = parse_vllm_args(svc.args)
        if not flags.model:
            return []
        plan = plan_capacity(
            flags.model, gpu=svc.gpu_type, gpu_count=svc.gpu_count, flags=flags, suggest=False
        )
    except Exception:  # noqa: BLE001 - an unknown model or GPU is not evidence of anything
        return []
    if plan.binding_constraint != "unsupported":
        return []
    f = Finding(
        category="unsupported_config",
        confidence=0.6,
        summary="The service spec asks for something this GPU does not support: "
        + "; ".join(plan.unsupported),
        evidence=[Evidence(line=0, text="spec: " + " ".join(redact_args(svc.args))[:300])],
        analyzer="unsupported_config",
        first_line=total + 1,
        last_line=total + 1,
        specific=False,
    )
    return [f]
