"""vLLM serving flags: parse a ``vllm serve`` argument list into the ones the planner models."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.numbers import check_number

KV_CACHE_DTYPES = (
    "auto",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4",
    "bfloat16",
    "float16",
    "int8_per_token_head",
    "fp8_per_token_head",
)
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


class VllmFlags(BaseModel):
    """vLLM's flags in snake_case; ``None`` means vLLM's default (resolved by the planner)."""

    model: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    block_size: int = 16
    served_model_name: str | None = None
    # --limit-mm-per-prompt: items per prompt by modality ({"image": 0} skips the vision tower).
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=dict)
    extra: list[str] = Field(default_factory=list)  # flags we do not model, kept verbatim


_INT = {"max_model_len", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size", "block_size"}
_FLOAT = {"gpu_memory_utilization"}
_STR = {"model", "kv_cache_dtype", "quantization", "dtype", "served_model_name"}
_BOOL = {"enforce_eager"}
_ALIASES = {"tp": "tensor_parallel_size", "q": "quantization"}


#: The largest value an integer flag may take (no GPU holds more tokens or sequences).
MAX_INT_FLAG = 2**31 - 1


def _parse_int(flag: str, value: str) -> int:
    v = value.strip().lower().replace("_", "")
    mult = 1
    # vLLM accepts human-readable sizes for --max-model-len ("32k", "1M").
    if v and v[-1] in "km":
        mult = 1024 if v[-1] == "k" else 1024 * 1024
        v = v[:-1]
    what = f"--{flag.replace('_', '-')}"
    try:
        number = check_number(v, what) if "." in v else check_number(v, what, integer=True)
    except UserError:
        raise UserError(f"{what}: {value!r} is not an integer") from None
    return int(check_number(int(number * mult), what, hi=MAX_INT_FLAG, integer=True))


def _parse_mm_limits(value: str) -> dict[str, int]:
    """``--limit-mm-per-prompt`` as vLLM takes it: JSON (``{"image": 0}``, a modality may give
    ``{"count": N, ...}``) or the older ``image=0,video=1``."""
    what = "--limit-mm-per-prompt"
    text = value.strip()
    items: dict[str, object]
    if text.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"{what}: {value!r} is not valid JSON ({e.msg})") from None
        if not isinstance(loaded, dict):
            raise UserError(f"{what}: {value!r} is not a JSON object")
        items = loaded
    else:
        items = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, number = part.partition("=")
            if not sep:
                raise UserError(f"{what}: {part!r} is not modality=count")
            items[name.strip()] = number.strip()
    out: dict[str, int] = {}
    for name, raw in items.items():
        count = raw.get("count") if isinstance(raw, dict) else raw
        if isinstance(count, bool) or not isinstance(count, (int, str)):
            raise UserError(f"{what}: the count for {name!r} is not an integer")
        try:
            n = int(count)
        except ValueError:
            raise UserError(f"{what}: the count for {name!r} is not an integer") from None
        if n < 0:
            raise UserError(f"{what}: the count for {name!r} must not be negative")
        out[str(name)] = n
    return out


def _validate(flags: VllmFlags) -> VllmFlags:
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        v = getattr(flags, name)
        if v is not None and v <= 0:
            raise UserError(f"--{name.replace('_', '-')}: must be positive, got {v}")
    if flags.tensor_parallel_size <= 0:
        raise UserError(f"--tensor-parallel-size: must be positive, got {flags.tensor_parallel_size}")
    if flags.block_size <= 0:
        raise UserError(f"--block-size: must be positive, got {flags.block_size}")
    if not 0 < flags.gpu_memory_utilization <= 1:
        raise UserError(f"--gpu-memory-utilization: must be in (0, 1], got {flags.gpu_memory_utilization}")
    if flags.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise UserError(
            f"--kv-cache-dtype: {flags.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}"
        )
    if flags.dtype not in DTYPES:
        raise UserError(f"--dtype: {flags.dtype!r} is not one of {', '.join(DTYPES)}")
    return flags


def parse_vllm_args(args: Iterable[str] | str) -> VllmFlags:
    """Parse ``vllm serve`` arguments: ``--x=y`` and ``--x y``, booleans, ``vllm serve MODEL``
    positional, a single shell string. Flags the planner does not model are kept in ``extra``."""
    if isinstance(args, str):
        try:
            items = shlex.split(args)
        except ValueError as e:
            raise UserError(f"vLLM arguments: cannot split {args!r} ({e})") from e
    else:
        items = [str(a) for a in args]
    # Drop a leading "vllm serve" / "python -m vllm.entrypoints.openai.api_server".
    while (
        items
        and items[0] in ("vllm", "serve", "python", "python3", "-m")
        or (items and items[0].startswith("vllm.entrypoints"))
    ):
        items = items[1:]
    values: dict[str, object] = {}
    extra: list[str] = []
    i = 0
    while i < len(items):
        tok = items[i]
        if not tok.startswith("-"):
            if "model" not in values:
                values["model"] = tok
            else:
                extra.append(tok)
            i += 1
            continue
        body = tok.lstrip("-")
        inline: str | None = None
        if "=" in body:
            body, inline = body.split("=", 1)
        key = _ALIASES.get(body, body.replace("-", "_"))
        if key.startswith("no_") and key[3:] in _BOOL:
            values[key[3:]] = False
            i += 1
            continue
        if key in _BOOL:
            if inline is not None:
                values[key] = inline.strip().lower() in ("1", "true", "yes", "on")
            elif i + 1 < len(items) and items[i + 1].lower() in ("true", "false"):
                values[key] = items[i + 1].lower() == "true"
                i += 1
            else:
                values[key] = True
            i += 1
            continue
        if key in _INT | _FLOAT | _STR:
            if inline is None:
                if i + 1 >= len(items) or items[i + 1].startswith("--"):
                    raise UserError(f"--{body}: needs a value")
                inline = items[i + 1]
                i += 1
            if key in _INT:
                values[key] = _parse_int(key, inline)
            elif key in _FLOAT:
                values[key] = float(check_number(inline, f"--{body}"))
            else:
                values[key] = inline
            i += 1
            continue
        if key == "limit_mm_per_prompt" or key.startswith("limit_mm_per_prompt."):
            if inline is None:
                if i + 1 >= len(items) or items[i + 1].startswith("--"):
                    raise UserError(f"--{body}: needs a value")
                inline = items[i + 1]
                i += 1
            seen = values.get("limit_mm_per_prompt")
            limits: dict[str, int] = dict(seen) if isinstance(seen, dict) else {}
            if key == "limit_mm_per_prompt":
                limits.update(_parse_mm_limits(inline))
            else:  # --limit-mm-per-prompt.image 0
                limits.update(_parse_mm_limits(f"{body.split('.', 1)[1]}={inline}"))
            values["limit_mm_per_prompt"] = limits
            i += 1
            continue
        # Unknown flag: keep it verbatim, with its value if it has one.
        if inline is not None:
            extra.append(tok)
        elif i + 1 < len(items) and not items[i + 1].startswith("-"):
            extra.extend([tok, items[i + 1]])
            i += 1
        else:
            extra.append(tok)
        i += 1
    if "quantization" in values and str(values["quantization"]).lower() in ("none", "null", ""):
        values["quantization"] = None
    return _validate(VllmFlags(**values, extra=extra))  # type: ignore[arg-type]
