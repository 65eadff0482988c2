"""What a benchmark run is asked to do: endpoint, load shape, bounds, SLOs, output folder."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from mcp_tools.bench.limits import MAX_CONCURRENCY, MAX_RATE
from mcp_tools.errors import UserError
from mcp_tools.numbers import check_number

#: The grid people already sweep (contexts 8..16,384 tokens, concurrency 1..2,048).
DEFAULT_CONTEXT_GRID = [8, 64, 256, 1024, 4096, 16384]
DEFAULT_CONCURRENCY_GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]


class SLO(BaseModel):
    """Service-level objectives a request must meet to count toward goodput (seconds; None = no bound)."""

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    itl_s: float | None = Field(default=None, gt=0)  # applies to the request's p99 inter-token latency
    e2e_s: float | None = Field(default=None, gt=0)

    def is_empty(self) -> bool:
        return all(v is None for v in (self.ttft_s, self.tpot_s, self.itl_s, self.e2e_s))

    def describe(self) -> str:
        parts = [
            f"{k}<={v * 1000:g}ms"
            for k, v in (
                ("ttft", self.ttft_s),
                ("tpot", self.tpot_s),
                ("itl", self.itl_s),
                ("e2e", self.e2e_s),
            )
            if v is not None
        ]
        return ", ".join(parts) or "none"


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|us)?\s*$")


def parse_duration_s(text: str, what: str) -> float:
    """``500ms`` / ``0.5s`` / ``0.5`` (seconds) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise UserError(f"{what}: {text!r} is not a duration (write e.g. 500ms or 0.5s)")
    value = float(check_number(m.group(1), what, lo=0, hi=86_400_000_000))
    unit = m.group(2) or "s"
    return value / 1000 if unit == "ms" else value / 1_000_000 if unit == "us" else value


def parse_slo(text: str | None) -> SLO:
    """``ttft=500ms,tpot=50ms`` -> SLO. Keys: ttft, tpot, itl, e2e."""
    if not text:
        return SLO()
    values: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "itl", "e2e"):
            raise UserError(
                f"--slo: {part.strip()!r} is not KEY=DURATION with KEY one of ttft, tpot, itl, e2e"
            )
        seconds = parse_duration_s(val, f"--slo {key}")
        if seconds <= 0:
            raise UserError(f"--slo {key}: must be above zero")
        values[f"{key}_s"] = seconds
    return SLO(**values)


def parse_int_list(text: str, what: str, hi: int = MAX_CONCURRENCY) -> list[int]:
    """``1,2,4`` or ``1..2048`` (powers of two between) or a mix -> sorted unique ints."""
    top = hi
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ".." in part:
                lo_s, hi_s = part.split("..", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo < 1 or hi < lo or hi > top:
                    raise ValueError
                v = lo
                while v <= hi:
                    out.add(v)
                    v *= 2
                out.add(hi)
            else:
                v = int(part)
                if not 1 <= v <= top:
                    raise ValueError
                out.add(v)
        except ValueError:
            raise UserError(
                f"{what}: {part!r} is not an integer from 1 to {top} or a range like 1..2048"
            ) from None
    if not out:
        raise UserError(f"{what}: give at least one value")
    return sorted(out)


def parse_float_list(text: str, what: str) -> list[float]:
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        out.append(float(check_number(part, what, lo=0, hi=MAX_RATE, lo_open=True)))
    if not out:
        raise UserError(f"{what}: give at least one value")
    return sorted(set(out))


class BenchConfig(BaseModel):
    """One benchmark run. A sweep is the product of ``context_lengths`` and the load levels."""

    url: str  # base URL of the OpenAI-compatible server (no /v1)
    model: str | None = None  # served model name; read from /v1/models when None
    endpoint: Literal["chat", "completions"] = "chat"
    mode: Literal["concurrency", "rate"] = "concurrency"
    concurrencies: list[int] = Field(default_factory=lambda: [1])
    rates: list[float] = Field(default_factory=list)  # requests/s, for mode == "rate"
    burstiness: float = Field(default=1.0, gt=0)  # gamma shape of inter-arrival times; 1 = Poisson
    max_concurrency: int | None = Field(default=None, ge=1)  # cap on in-flight requests in rate mode
    context_lengths: list[int] = Field(default_factory=lambda: [256])  # prompt tokens
    output_tokens: int = Field(default=128, ge=1)
    requests_per_point: int = Field(default=100, ge=1)
    seconds_per_point: float = Field(default=60.0, gt=0)
    warmup_requests: int = Field(default=4, ge=0)
    shared_prefix: bool = False
    exact_prompt_lengths: bool = True  # trim prompts with /tokenize when the server has it
    ignore_eos: bool = True  # vLLM extension: generate exactly output_tokens
    slo: SLO = Field(default_factory=SLO)
    request_timeout_s: float = Field(default=300.0, gt=0)
    error_budget: float = Field(default=0.05, ge=0, le=1)  # stop a sweep when a point's error rate is above
    stop_on_saturation: bool = True
    saturation_gain: float = Field(default=0.05, ge=0)  # < this relative throughput gain = saturated
    output_dir: Path = Path("bench-runs")
    label: str | None = None
    revision: str | None = None  # the serving revision, when the caller knows it
    seed: int | None = None
    write_output: bool = True

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v.endswith("/v1"):
            v = v[: -len("/v1")]
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"the URL must start with http:// or https://, not {v!r}")
        return v

    @model_validator(mode="after")
    def _levels(self) -> BenchConfig:
        if self.mode == "rate" and not self.rates:
            raise ValueError("rate mode needs at least one request rate")
        if self.mode == "concurrency" and not self.concurrencies:
            raise ValueError("concurrency mode needs at least one concurrency")
        if any(c < 1 for c in self.concurrencies) or any(c < 1 for c in self.context_lengths):
            raise ValueError("concurrencies and context lengths must be at least 1")
        self.concurrencies = sorted(set(self.concurrencies))
        self.context_lengths = sorted(set(self.context_lengths))
        self.rates = sorted(set(self.rates))
        return self

    @classmethod
    def from_params(cls, what: str, params: Mapping[str, Any], **values: Any) -> BenchConfig:
        """A run from a face's parameters by name (``gemma-sre bench``'s options, the MCP tool's
        arguments): each one named as a field and not None, then ``values`` (what the face computed:
        the URL, parsed lists). A bad value is one ``UserError`` naming ``what`` and the field."""
        given = {k: v for k, v in params.items() if k in cls.model_fields and v is not None}
        try:
            return cls.model_validate({**given, **values})
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "options"
            raise UserError(f"{what} {where}: {first['msg']}") from None

    def levels(self) -> list[float]:
        return (
            [float(r) for r in self.rates] if self.mode == "rate" else [float(c) for c in self.concurrencies]
        )

    def peak_in_flight(self) -> int:
        if self.mode == "concurrency":
            return max(self.concurrencies)
        if self.max_concurrency:
            return self.max_concurrency
        # rate mode without a cap: enough for the highest rate at a generous latency
        return min(4096, max(64, int(max(self.rates) * 30)))
