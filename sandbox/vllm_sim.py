"""A simulated vLLM OpenAI-compatible endpoint: vLLM's wire format, synthetic replies, honest physics.

The sandbox mounts one of these per ready Cloud Run revision; tests and the benchmark engine talk to
it with real clients. Everything a client can observe follows vLLM (v0.9 - v0.11 wording):

- ``GET /health`` (200, empty), ``GET /v1/models`` (the served model; ``owned_by`` says the replies are
  synthetic), ``POST /v1/chat/completions`` and ``POST /v1/completions`` (SSE streaming with
  ``data: [DONE]``, ``stream_options.include_usage``; non-streaming with ``usage``), ``POST /tokenize``,
  ``GET /metrics`` (Prometheus text with vLLM's metric names).
- Tokenization is deterministic and cheap (:func:`tokenize`, about one token per word or per 4
  characters) and the same function drives ``/tokenize``, ``usage`` and the max-model-len check, so a
  client may rely on ``/tokenize`` being exact. Chat prompts go through a Gemma-style template.
- Physics: at most ``max_num_seqs`` sequences decode at once, the rest wait; KV usage is the sum of
  (prompt + generated) tokens over running sequences divided by ``kv_cache_tokens``; when a new token
  does not fit, the newest running sequence is preempted (it re-queues and recomputes its prefill).
  TTFT = queueing + ``ttft_base_s`` + ``prefill_s_per_token`` x prompt tokens, then one token every
  ``itl_s``, scheduled against absolute deadlines so latencies do not drift.
- ``zero_latency`` skips every sleep and answers a streaming request with its whole SSE body in one
  write: it measures clients, not the server.

Run it standalone: ``python -m sandbox.vllm_sim --port 8000 [--zero-latency]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
import zlib
from bisect import bisect_left
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sandbox.faults import Fault, FaultInjector

logger = logging.getLogger(__name__)

OWNED_BY = "gemma-sre-sandbox"
SYNTHETIC_NOTE = "Simulated vLLM endpoint (gemma-sre sandbox): replies are synthetic text, not model output."
VOCAB_SIZE = 262_144  # Gemma's vocabulary size; token ids are hashes modulo this

# ---------------------------------------------------------------------------------------------- config


class SimConfig(BaseModel):
    """What the simulated server looks like and how fast it is."""

    served_model_name: str
    max_model_len: int = Field(gt=0)
    max_num_seqs: int = Field(default=256, gt=0)
    kv_cache_tokens: int = Field(gt=0)  # total KV capacity in tokens (the capacity planner's figure)
    ttft_base_s: float = Field(default=0.05, ge=0)  # fixed part of time-to-first-token
    prefill_s_per_token: float = Field(default=0.0, ge=0)  # prefill cost per prompt token
    itl_s: float = Field(default=0.02, ge=0)  # decode time per token for one sequence
    zero_latency: bool = False  # no sleeps at all (for measuring clients)
    time_scale: float = Field(default=1.0, gt=0)  # >1 makes the clock faster (sleeps shorter)
    container_concurrency: int | None = Field(default=None, gt=0)  # above this in flight: HTTP 429
    revision: str | None = None


# ------------------------------------------------------------------------------------------ tokenizer

_TOKEN_RE = re.compile(r"\s*\S{1,4}")
_BOS = "<bos>"


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings: each is optional leading whitespace plus 1-4 non-space chars.

    Trailing whitespace is not a token. Concatenating the pieces gives back ``text`` (minus trailing
    whitespace), so a reply built from pieces re-tokenizes to the same count.
    """
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def token_ids(pieces: Iterable[str]) -> list[int]:
    return [zlib.crc32(p.encode()) % VOCAB_SIZE for p in pieces]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)


def apply_chat_template(messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
    """A Gemma-style chat template (system folds into user turns as Gemma's template does)."""
    parts = [_BOS]
    for m in messages:
        role = str(m.get("role", "user"))
        role = "model" if role == "assistant" else "user" if role in ("system", "developer") else role
        parts.append(f"<start_of_turn>{role}\n{_content_text(m.get('content'))}<end_of_turn>\n")
    if add_generation_prompt:
        parts.append("<start_of_turn>model\n")
    return "".join(parts)


# Every word is at most 4 characters, so " word" is exactly one token.
_REPLY_WORDS: tuple[str, ...] = (
    "the", "sim", "says", "this", "is", "a", "test", "of", "load", "path", "and", "each", "word", "one",
    "so", "you", "can", "them", "with", "ease", "kv", "hit", "rate", "ok", "fine", "all", "good", "more",
    "data", "here", "we", "go", "next", "step", "wait",
)  # fmt: skip


def synthetic_reply(seed: int, n_tokens: int) -> list[str]:
    """``n_tokens`` deterministic token pieces (each one token) for a request with this seed."""
    words = _REPLY_WORDS
    k = len(words)
    x = seed & 0xFFFFFFFF
    out = []
    for _ in range(n_tokens):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        out.append(" " + words[x % k])
    return out


# ------------------------------------------------------------------------------------------- metrics

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


class _Hist:
    """A cheap histogram (vLLM's bucket bounds) that can record one value n times at once."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        if n <= 0:
            return
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            acc += c
            out.append((repr(float(bound)), float(acc)))
        out.append(("+Inf", float(self.count)))
        return out


class _Metrics:
    def __init__(self) -> None:
        self.ttft = _Hist(TTFT_BUCKETS)
        self.itl = _Hist(ITL_BUCKETS)
        self.e2e = _Hist(E2E_BUCKETS)
        self.queue = _Hist(E2E_BUCKETS)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success: dict[str, int] = {"length": 0, "stop": 0, "abort": 0}


# -------------------------------------------------------------------------------------------- engine


class _Seq:
    __slots__ = ("prompt_tokens", "max_tokens", "generated", "fut", "running", "queued", "epoch", "admitted")

    def __init__(self, prompt_tokens: int, max_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.generated = 0
        self.fut: asyncio.Future[None] | None = None
        self.running = False
        self.queued = False
        self.epoch = 0  # bumped on every preemption
        self.admitted = False


class Engine:
    """The scheduler: a FIFO waiting queue, at most ``max_num_seqs`` running, KV accounting, preemption.

    Single event loop, no threads: every method runs on the loop that serves the app.
    """

    def __init__(self, config: SimConfig, metrics: _Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.waiting: deque[_Seq] = deque()
        self.running: dict[int, _Seq] = {}  # insertion order = admission order; last = newest
        self.kv_used = 0

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.config.kv_cache_tokens)

    def _admit(self) -> None:
        cap = self.config.kv_cache_tokens
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            need = seq.prompt_tokens + seq.generated + 1
            if self.running and self.kv_used + need > cap:
                break  # wait for KV to free up (an empty engine admits anyway: nothing to wait for)
            self.waiting.popleft()
            seq.queued = False
            self.running[id(seq)] = seq
            seq.running = True
            seq.admitted = True
            self.kv_used += seq.prompt_tokens + seq.generated
            if seq.fut is not None and not seq.fut.done():
                seq.fut.set_result(None)

    async def acquire(self, seq: _Seq) -> bool:
        """Queue ``seq`` (at the back, or the front after a preemption) and wait until it runs.

        Returns True when it had to wait."""
        if not seq.running and not seq.queued:
            if seq.admitted:
                self.waiting.appendleft(seq)
            else:
                self.waiting.append(seq)
            seq.queued = True
            self._admit()
        if not seq.running:
            seq.fut = asyncio.get_running_loop().create_future()
            try:
                await seq.fut
            finally:
                seq.fut = None
            return True
        return False

    def _preempt(self, victim: _Seq) -> None:
        del self.running[id(victim)]
        victim.running = False
        self.kv_used -= victim.prompt_tokens + victim.generated
        victim.epoch += 1
        victim.queued = True
        self.waiting.appendleft(victim)
        self.metrics.preemptions += 1

    def add_token(self, seq: _Seq) -> bool:
        """Grow ``seq`` by one token; preempt the newest running sequences until it fits.

        Returns False when ``seq`` itself was preempted (no token produced).
        """
        cap = self.config.kv_cache_tokens
        while self.kv_used + 1 > cap and len(self.running) > 1:
            victim = self.running[next(reversed(self.running))]
            self._preempt(victim)
            if victim is seq:
                return False
        seq.generated += 1
        self.kv_used += 1
        return True

    def release(self, seq: _Seq) -> None:
        if seq.running:
            del self.running[id(seq)]
            seq.running = False
            self.kv_used -= seq.prompt_tokens + seq.generated
        elif seq.queued:
            self.waiting.remove(seq)
            seq.queued = False
        self._admit()


# ----------------------------------------------------------------------------------------------- app


class _InjectedDrop(ConnectionAbortedError):
    """Raised to make uvicorn cut a connection on purpose (an injected 'drop')."""

    injected_fault = True


def _error(message: str, err_type: str, status: int) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": err_type, "param": None, "code": status}}, status_code=status
    )


def _bad_request(message: str) -> JSONResponse:
    return _error(message, "BadRequestError", 400)


class _Request(BaseModel):
    """The parsed, validated request: what the engine needs."""

    chat: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    prompt_tokens: int
    max_tokens: int
    seed: int
    model: str


class VllmSim:
    """One simulated vLLM server: config, engine, metrics, faults and the Starlette app."""

    def __init__(self, config: SimConfig, faults: FaultInjector | None = None) -> None:
        self.config = config
        self.faults = faults or FaultInjector()
        self.metrics = _Metrics()
        self.engine = Engine(config, self.metrics)
        self.in_flight = 0
        self.rejected_429 = 0
        self._names = tuple(n for n in (config.revision, config.served_model_name) if n)
        routes = [
            Route("/health", self.health, methods=["GET"]),
            Route("/ping", self.health, methods=["GET", "POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/tokenize", self.tokenize_endpoint, methods=["POST"]),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
            Route("/version", self.version, methods=["GET"]),
        ]
        starlette = Starlette(routes=routes)
        starlette.state.sim = self
        self._starlette = starlette

    @property
    def app(self) -> VllmSim:
        """The ASGI app (the sim itself is an ASGI-3 callable)."""
        return self

    # -- Cloud Run's concurrency gate (outermost, cheap) ------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._starlette(scope, receive, send)
            return
        cc = self.config.container_concurrency
        if cc is not None and self.in_flight >= cc:
            self.rejected_429 += 1
            body = b"The request was aborted because there was no available instance."
            await send(
                {
                    "type": "http.response.start",
                    "status": 429,
                    "headers": [
                        (b"content-type", b"text/plain"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        self.in_flight += 1
        scope["gemma_sre.raw_send"] = send
        scope["gemma_sre.arrival"] = asyncio.get_running_loop().time()
        try:
            await self._starlette(scope, receive, send)
        finally:
            self.in_flight -= 1

    # -- faults -------------------------------------------------------------------------------------

    def _fault(self, path: str) -> Fault | None:
        return self.faults.take((path, *self._names))

    async def _act_out(self, fault: Fault, request: Request) -> Response | None:
        """Act out a fault that fires before any response. Returns the response to send, or None."""
        if fault.kind == "status":
            return _error(f"Injected fault: HTTP {fault.status}", "ServiceUnavailableError", fault.status)
        if fault.kind == "hang":
            await self._wait_disconnect(request, fault.seconds)
            return None  # the client left, or the hang ended: carry on normally
        return self._drop_now(request)

    @staticmethod
    async def _wait_disconnect(request: Request, seconds: float | None) -> None:
        async def _until_gone() -> None:
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    return

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_until_gone(), timeout=seconds)

    def _drop_now(self, request: Request) -> Response:
        """Close the connection without any response when the server's transport is reachable
        (served directly by uvicorn); otherwise send the headers and cut the body."""
        raw_send = request.scope.get("gemma_sre.raw_send")
        transport = getattr(getattr(raw_send, "__self__", None), "transport", None)
        if transport is not None and hasattr(transport, "close"):
            transport.close()  # later writes to a closed transport are discarded
            return Response(status_code=500)
        return self._dropped_response()

    def _dropped_response(self) -> Response:
        """A response whose body raises after the headers went out, so the connection is cut."""

        async def _body() -> AsyncIterator[bytes]:
            raise _InjectedDrop("injected drop")
            yield b""  # pragma: no cover - makes this an async generator

        return StreamingResponse(_body(), media_type="text/event-stream")

    # -- simple endpoints ---------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        fault = self._fault(request.url.path)
        if fault is not None:
            resp = await self._act_out(fault, request)
            if resp is not None:
                return resp
        return Response(status_code=200)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": "0.11.0+sim"})

    async def models(self, request: Request) -> Response:
        fault = self._fault(request.url.path)
        if fault is not None:
            resp = await self._act_out(fault, request)
            if resp is not None:
                return resp
        name = self.config.served_model_name
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": OWNED_BY,
            "root": name,
            "parent": None,
            "max_model_len": self.config.max_model_len,
            "permission": [],
            "synthetic": True,
            "note": SYNTHETIC_NOTE,
        }
        if self.config.revision:
            card["revision"] = self.config.revision
        return JSONResponse({"object": "list", "data": [card]})

    async def tokenize_endpoint(self, request: Request) -> Response:
        fault = self._fault(request.url.path)
        if fault is not None:
            resp = await self._act_out(fault, request)
            if resp is not None:
                return resp
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as e:
            return _bad_request(f"Invalid JSON body: {e}")
        if "messages" in body:
            msgs = body["messages"]
            if not isinstance(msgs, list):
                return _bad_request("'messages' must be a list")
            text = apply_chat_template(msgs, bool(body.get("add_generation_prompt", True)))
        elif "prompt" in body:
            text = str(body["prompt"])
            if body.get("add_special_tokens", True):
                text = _BOS + text
        else:
            return _bad_request("Either 'prompt' or 'messages' is required")
        pieces = tokenize(text)
        out: dict[str, Any] = {
            "count": len(pieces),
            "max_model_len": self.config.max_model_len,
            "tokens": token_ids(pieces),
            "token_strs": pieces if body.get("return_token_strs") else None,
        }
        return JSONResponse(out)

    async def metrics_endpoint(self, request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from prometheus_client.registry import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_SimCollector(self))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # -- generation ---------------------------------------------------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate_endpoint(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._generate_endpoint(request, chat=False)

    def _parse(self, body: Any, chat: bool) -> _Request | JSONResponse:
        if not isinstance(body, dict):
            return _bad_request("The request body must be a JSON object")
        model = body.get("model") or self.config.served_model_name
        if model != self.config.served_model_name:
            return _error(f"The model `{model}` does not exist.", "NotFoundError", 404)
        n = body.get("n", 1)
        if n not in (1, None):
            return _bad_request("n must be 1 on this simulated server")
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                return _bad_request("'messages' must be a non-empty list")
            text = apply_chat_template(msgs, bool(body.get("add_generation_prompt", True)))
            prompt_tokens = count_tokens(text)
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
                prompt = prompt[0]
            if isinstance(prompt, str):
                text = _BOS + prompt
                prompt_tokens = count_tokens(text)
            elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                text = " ".join(map(str, prompt))
                prompt_tokens = len(prompt)
            else:
                return _bad_request("'prompt' must be a string or a list of token ids (one prompt only)")
            max_tokens = body.get("max_tokens")
        mml = self.config.max_model_len
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            return _bad_request(f"max_tokens must be at least 1, got {max_tokens}.")
        if max_tokens is None:
            if prompt_tokens >= mml:
                return _bad_request(
                    f"This model's maximum context length is {mml} tokens. However, your request has "
                    f"{prompt_tokens} input tokens. Please reduce the length of the input messages."
                )
            max_tokens = mml - prompt_tokens
        elif prompt_tokens + max_tokens > mml:
            return _bad_request(
                f"This model's maximum context length is {mml} tokens. However, you requested "
                f"{max_tokens + prompt_tokens} tokens ({prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or completion."
            )
        opts = body.get("stream_options") or {}
        return _Request(
            chat=chat,
            stream=bool(body.get("stream", False)),
            include_usage=bool(opts.get("include_usage", False)),
            continuous_usage=bool(opts.get("continuous_usage_stats", False)),
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            seed=zlib.crc32(text.encode()),
            model=model,
        )

    async def _generate_endpoint(self, request: Request, chat: bool) -> Response:
        fault = self._fault(request.url.path)
        try:
            body = json.loads(await request.body())
        except ValueError as e:
            return _bad_request(f"Invalid JSON body: {e}")
        parsed = self._parse(body, chat)
        if isinstance(parsed, JSONResponse):
            return parsed
        req = parsed
        drop_after: int | None = None
        if fault is not None:
            if fault.kind == "drop":
                if not req.stream:
                    return self._drop_now(request)
                drop_after = fault.after_tokens if fault.after_tokens is not None else req.max_tokens // 2
            else:
                resp = await self._act_out(fault, request)
                if resp is not None:
                    return resp
        arrival = request.scope.get("gemma_sre.arrival") or asyncio.get_running_loop().time()
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if self.config.zero_latency:
            return self._instant(req, rid, created, drop_after)
        if req.stream:
            return StreamingResponse(
                self._stream(req, rid, created, drop_after, arrival),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        pieces: list[str] = []
        finish = "length"
        async for piece in self._decode(req, arrival):
            pieces.append(piece)
        return JSONResponse(self._full_body(req, rid, created, "".join(pieces), len(pieces), finish))

    # the request's life in the engine: yields one token piece at a time, as it is produced
    async def _decode(self, req: _Request, arrival: float) -> AsyncIterator[str]:
        cfg = self.config
        eng = self.engine
        m = self.metrics
        scale = cfg.time_scale
        loop = asyncio.get_running_loop()
        reply = synthetic_reply(req.seed, req.max_tokens)
        seq = _Seq(req.prompt_tokens, req.max_tokens)
        m.prompt_tokens += req.prompt_tokens
        last_token_t = 0.0
        finished = False
        try:
            waited = await eng.acquire(seq)
            m.queue.observe((loop.time() - arrival) * scale if waited else 0.0)
            # without queueing, the first prefill is timed from the request's arrival at the server
            first_start: float | None = None if waited else arrival
            next_t = 0.0
            epoch = seq.epoch
            need_prefill = True
            while seq.generated < seq.max_tokens:
                if not seq.running:  # preempted: wait to run again, then recompute the prefill
                    await eng.acquire(seq)
                    need_prefill = True
                if seq.epoch != epoch:
                    epoch = seq.epoch
                    need_prefill = True
                if need_prefill:
                    prefill = cfg.ttft_base_s + cfg.prefill_s_per_token * (seq.prompt_tokens + seq.generated)
                    start = loop.time() if first_start is None else first_start
                    first_start = None
                    next_t = start + prefill / scale
                    need_prefill = False
                else:
                    next_t += cfg.itl_s / scale
                delay = next_t - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not seq.running or seq.epoch != epoch or not eng.add_token(seq):
                    continue
                now = loop.time()
                if seq.generated == 1:
                    m.ttft.observe((now - arrival) * scale)
                else:
                    m.itl.observe((now - last_token_t) * scale)
                last_token_t = now
                m.generation_tokens += 1
                yield reply[seq.generated - 1]
            finished = True
        finally:
            eng.release(seq)
            if finished:
                m.success["length"] += 1
                m.e2e.observe((loop.time() - arrival) * scale)
            else:
                m.success["abort"] += 1

    def _usage(self, req: _Request, completion_tokens: int) -> dict[str, Any]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        }

    def _full_body(
        self, req: _Request, rid: str, created: int, text: str, n: int, finish: str
    ) -> dict[str, Any]:
        choice: dict[str, Any]
        if req.chat:
            choice = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "reasoning_content": None,
                    "content": text,
                    "tool_calls": [],
                },
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            obj = "text_completion"
        return {
            "id": rid,
            "object": obj,
            "created": created,
            "model": req.model,
            "choices": [choice],
            "usage": self._usage(req, n),
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }

    def _chunk(
        self, req: _Request, rid: str, created: int, piece: str | None, finish: str | None, n: int
    ) -> bytes:
        if req.chat:
            delta: dict[str, Any] = (
                {"role": "assistant", "content": ""} if piece is None else {"content": piece}
            )
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            obj = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": finish}
            obj = "text_completion"
        if finish is not None:
            choice["stop_reason"] = None
        data: dict[str, Any] = {
            "id": rid,
            "object": obj,
            "created": created,
            "model": req.model,
            "choices": [choice],
        }
        if req.include_usage and req.continuous_usage:
            data["usage"] = self._usage(req, n)
        return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    def _final_chunks(self, req: _Request, rid: str, created: int, n: int) -> bytes:
        out = b""
        if req.include_usage:
            obj = "chat.completion.chunk" if req.chat else "text_completion"
            data = {
                "id": rid, "object": obj, "created": created, "model": req.model, "choices": [],
                "usage": self._usage(req, n),
            }  # fmt: skip
            out += b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
        return out + b"data: [DONE]\n\n"

    async def _stream(
        self, req: _Request, rid: str, created: int, drop_after: int | None, arrival: float
    ) -> AsyncIterator[bytes]:
        n = 0
        if req.chat:
            yield self._chunk(req, rid, created, None, None, 0)
        async for piece in self._decode(req, arrival):
            if drop_after is not None and n >= drop_after:
                raise _InjectedDrop("injected drop mid-stream")
            n += 1
            finish = "length" if n == req.max_tokens else None
            yield self._chunk(req, rid, created, piece, finish, n)
        yield self._final_chunks(req, rid, created, n)

    def _instant(self, req: _Request, rid: str, created: int, drop_after: int | None) -> Response:
        """Zero-latency mode: account the request in one step and send the whole reply at once."""
        m = self.metrics
        eng = self.engine
        n = req.max_tokens
        m.prompt_tokens += req.prompt_tokens
        m.generation_tokens += n
        m.ttft.observe(0.0)
        m.itl.observe(0.0, n - 1)
        m.e2e.observe(0.0)
        m.queue.observe(0.0)
        m.success["length"] += 1
        peak = req.prompt_tokens + n
        if peak > eng.config.kv_cache_tokens - eng.kv_used and eng.running:
            m.preemptions += 1
        reply = synthetic_reply(req.seed, n)
        if not req.stream:
            return JSONResponse(self._full_body(req, rid, created, "".join(reply), n, "length"))
        chunks = []
        if req.chat:
            chunks.append(self._chunk(req, rid, created, None, None, 0))
        limit = n if drop_after is None else min(n, drop_after)
        for i in range(limit):
            chunks.append(self._chunk(req, rid, created, reply[i], "length" if i == n - 1 else None, i + 1))
        if drop_after is not None:
            first = b"".join(chunks)

            async def _cut() -> AsyncIterator[bytes]:
                yield first
                raise _InjectedDrop("injected drop mid-stream")

            return StreamingResponse(_cut(), media_type="text/event-stream")
        chunks.append(self._final_chunks(req, rid, created, n))
        return Response(
            b"".join(chunks), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )


class _SimCollector:
    """Builds vLLM's metric families from the sim's state at scrape time (prometheus_client formats them)."""

    def __init__(self, sim: VllmSim) -> None:
        self.sim = sim

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        sim = self.sim
        m = sim.metrics
        eng = sim.engine
        labels = ["model_name"]
        lv = [sim.config.served_model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(lv, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(lv, value)
            return c

        def hist(name: str, doc: str, h: _Hist) -> HistogramMetricFamily:
            f = HistogramMetricFamily(name, doc, labels=labels)
            f.add_metric(lv, buckets=h.buckets(), sum_value=h.sum)
            return f

        yield gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", len(eng.running)
        )
        yield gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(eng.waiting)
        )
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", eng.kv_usage)
        yield gauge(
            "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", eng.kv_usage
        )
        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", m.preemptions
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", m.generation_tokens)
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=["model_name", "finished_reason"],
        )
        for reason, v in m.success.items():
            success.add_metric([*lv, reason], v)
        yield success
        yield hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
        yield hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl)
        yield hist(
            "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", m.itl
        )
        yield hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e)
        yield hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase.", m.queue)


def create_vllm_app(config: SimConfig, faults: FaultInjector | None = None) -> ASGIApp:
    """The ASGI app of one simulated vLLM server. Use :class:`VllmSim` directly when you also need its
    engine, metrics or in-flight count (``sim = VllmSim(config, faults); sim.app``)."""
    return VllmSim(config, faults).app


# ------------------------------------------------------------------------------------------ __main__


def main(argv: list[str] | None = None) -> None:
    import argparse

    import uvicorn

    p = argparse.ArgumentParser(prog="python -m sandbox.vllm_sim", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default="sim-model")
    p.add_argument("--max-model-len", type=int, default=16384)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--kv-cache-tokens", type=int, default=200_000)
    p.add_argument("--ttft-base-s", type=float, default=0.05)
    p.add_argument("--prefill-s-per-token", type=float, default=0.0)
    p.add_argument("--itl-s", type=float, default=0.02)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--container-concurrency", type=int, default=None)
    p.add_argument("--zero-latency", action="store_true")
    a = p.parse_args(argv)
    cfg = SimConfig(
        served_model_name=a.served_model_name,
        max_model_len=a.max_model_len,
        max_num_seqs=a.max_num_seqs,
        kv_cache_tokens=a.kv_cache_tokens,
        ttft_base_s=a.ttft_base_s,
        prefill_s_per_token=a.prefill_s_per_token,
        itl_s=a.itl_s,
        time_scale=a.time_scale,
        container_concurrency=a.container_concurrency,
        zero_latency=a.zero_latency,
    )
    logging.basicConfig(level=logging.WARNING)
    uvicorn.run(
        VllmSim(cfg).app, host=a.host, port=a.port, log_level="warning", access_log=False, backlog=4096
    )


if __name__ == "__main__":
    main()
