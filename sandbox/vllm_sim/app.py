"""The ASGI app of one simulated vLLM server: vLLM's endpoints and wire format, Cloud Run's
concurrency gate, and injected faults acted out."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
import zlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sandbox.faults import Fault, FaultInjector, wait_disconnect
from sandbox.vllm_sim.config import OWNED_BY, SYNTHETIC_NOTE, SimConfig
from sandbox.vllm_sim.engine import Engine, Seq
from sandbox.vllm_sim.metrics import Metrics, SimCollector
from sandbox.vllm_sim.tokenizer import (
    BOS,
    apply_chat_template,
    count_tokens,
    synthetic_reply,
    token_ids,
    tokenize,
)

logger = logging.getLogger(__name__)


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
        self.metrics = Metrics()
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
            path = scope["path"]
            if scope["method"] == "POST" and path in _HOT_PATHS:  # skip routing on the hot path
                request = Request(scope, receive)
                response = await self._generate_endpoint(request, chat=path == "/v1/chat/completions")
                await response(scope, receive, send)
                return
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
            await wait_disconnect(request, fault.seconds)
            return None  # the client left, or the hang ended: carry on normally
        return self._drop_now(request)

    async def _faulted(self, request: Request) -> Response | None:
        """The response an injected fault on this path gives instead of the endpoint's; None when there is
        none (no fault, or a hang that ended)."""
        fault = self._fault(request.url.path)
        return None if fault is None else await self._act_out(fault, request)

    def _drop_now(self, request: Request) -> Response:
        """Close the connection without any response when the server's transport is reachable
        (served directly by uvicorn); otherwise send the headers and cut the body."""
        transport = request.scope.get("gemma_sre.transport")  # set by an outer sandbox app, if any
        if transport is None:
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
        if (resp := await self._faulted(request)) is not None:
            return resp
        return Response(status_code=200)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": "0.11.0+sim"})

    async def models(self, request: Request) -> Response:
        if (resp := await self._faulted(request)) is not None:
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
        if (resp := await self._faulted(request)) is not None:
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
                text = BOS + text
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
        registry.register(SimCollector(self.config.served_model_name, self.metrics, self.engine))
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
                text = BOS + prompt
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
        seq = Seq(req.prompt_tokens, req.max_tokens)
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
                    prefill = cfg.ttft_factor * (
                        cfg.ttft_base_s + cfg.prefill_s_per_token * (seq.prompt_tokens + seq.generated)
                    )
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

    @staticmethod
    def _prefix(req: _Request, rid: str, created: int) -> bytes:
        """The bytes every plain token chunk of this request starts with (built once per request)."""
        obj = "chat.completion.chunk" if req.chat else "text_completion"
        head = f'data: {{"id":"{rid}","object":"{obj}","created":{created},"model":{json.dumps(req.model)},'
        return (head + '"choices":[{"index":0,' + ('"delta":{"content":' if req.chat else '"text":')).encode()

    def _chunk(
        self,
        req: _Request,
        rid: str,
        created: int,
        piece: str | None,
        finish: str | None,
        n: int,
        prefix: bytes | None = None,
    ) -> bytes:
        if prefix is not None and piece is not None and finish is None and not req.continuous_usage:
            enc = _PIECE_JSON.get(piece)
            if enc is None:
                enc = _PIECE_JSON[piece] = json.dumps(piece).encode()
            return prefix + enc + (_CHAT_TAIL if req.chat else _TEXT_TAIL)
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
        prefix = self._prefix(req, rid, created)
        if req.chat:
            yield self._chunk(req, rid, created, None, None, 0)
        async for piece in self._decode(req, arrival):
            if drop_after is not None and n >= drop_after:
                raise _InjectedDrop("injected drop mid-stream")
            n += 1
            finish = "length" if n == req.max_tokens else None
            yield self._chunk(req, rid, created, piece, finish, n, prefix)
        yield self._final_chunks(req, rid, created, n)

    def _instant(self, req: _Request, rid: str, created: int, drop_after: int | None) -> Response:
        """Zero-latency mode: account the request in one step and send the whole reply at once."""
        m = self.metrics
        n = req.max_tokens
        m.prompt_tokens += req.prompt_tokens
        m.generation_tokens += n
        m.ttft.observe(0.0)
        m.itl.observe(0.0, n - 1)
        m.e2e.observe(0.0)
        m.queue.observe(0.0)
        m.success["length"] += 1
        reply = synthetic_reply(req.seed, n)
        if not req.stream:
            return JSONResponse(self._full_body(req, rid, created, "".join(reply), n, "length"))
        chunks = []
        prefix = self._prefix(req, rid, created)
        if req.chat:
            chunks.append(self._chunk(req, rid, created, None, None, 0))
        limit = n if drop_after is None else min(n, drop_after)
        for i in range(limit):
            finish = "length" if i == n - 1 else None
            chunks.append(self._chunk(req, rid, created, reply[i], finish, i + 1, prefix))
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


_PIECE_JSON: dict[str, bytes] = {}
_HOT_PATHS = frozenset(("/v1/chat/completions", "/v1/completions"))
_CHAT_TAIL = b'},"logprobs":null,"finish_reason":null}]}\n\n'
_TEXT_TAIL = b',"logprobs":null,"finish_reason":null}]}\n\n'


def create_vllm_app(config: SimConfig, faults: FaultInjector | None = None) -> ASGIApp:
    """The ASGI app of one simulated vLLM server. Use :class:`VllmSim` directly when you also need its
    engine, metrics or in-flight count (``sim = VllmSim(config, faults); sim.app``)."""
    return VllmSim(config, faults).app
