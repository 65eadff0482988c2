"""The one scripted OpenAI-compatible server of the tests (real HTTP on a free loopback port).

Models are tested at the wire: the real clients (ChatOpenAI, our VllmEndpoint, the REPL's streaming
client) talk HTTP to this server, which answers from a script and records every request.

One reply format, consumed in order (the last reply repeats):

* ``{"content": "..."}``: a text answer (``answer(obj)`` builds one from a JSON-able object);
* ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``: tool calls;
* ``{"error": {"status": 400, "message": "..."}}``: the server refuses the request;
* ``{"respond": fn}``: ``fn(request body)`` returns one of the above (a model that reads the prompt).

Both answer plainly or as a stream (SSE), as the request asks. A stream carries ``tokens_per_chunk``
words per chunk on purpose (a client that counts chunks as tokens is caught), waits ``ttft_s`` before
the first text and ``gap_s`` between chunks, streams tool calls as vLLM does (id and name first, then
the arguments), and reports usage only in a final chunk when ``stream_options.include_usage`` is asked.
Usage: ``prompt_tokens`` is 1000 + the number of the chat request (1001, 1002, ...), so a test can
tell which requests were counted; ``completion_tokens`` is the number of words answered.

    with ScriptedOpenAI([answer({...})], model="gemma-under-test") as srv:
        chat_model(srv.url)            # srv.url ends in /v1; srv.root is the bare host
        srv.requests                   # chat request bodies, in order
        srv.log                        # every request: {"path", "headers"}
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "gemma-4-12b-it"
REPLY = "The KV cache is starved; raise gpu_memory_utilization."  # the answer when no script is given
METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="gemma-4-12b-it"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="gemma-4-12b-it"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="gemma-4-12b-it"} 0.5
"""


def answer(obj: Any) -> dict[str, Any]:
    """A text reply carrying ``obj`` as JSON (what a diagnosis model answers)."""
    return {"content": json.dumps(obj)}


def diagnosis_reply(
    category: str = "weights_oom",
    summary: str = "The bf16 weights do not fit.",
    evidence: list[int] | None = None,
    confidence: float = 0.9,
) -> dict[str, Any]:
    """A model's diagnosis as a text reply (the SPEC section 4 shape; ``evidence``: cited line numbers)."""
    doc = {"category": category, "confidence": confidence, "summary": summary, "evidence": evidence or []}
    return answer(doc)


def free_port() -> int:
    """A loopback port nothing listens on (for "unreachable" tests and servers run as processes)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SimClock:
    """Simulated time for timing tests: the server's waits advance it, the client reads it.

    Replace the client's clock with the instance (``monkeypatch.setattr(module, "perf_counter",
    clock)``) and give it to the server (``ScriptedOpenAI(..., clock=clock)``). The server moves time
    on only after the client has read the clock since the server's last write, so every piece is
    stamped with exactly the simulated time it was sent at: the measured TTFT / ITL are the injected
    ones whatever the machine's load (the truth is known, not estimated).
    """

    def __init__(self) -> None:
        self.now = 1000.0
        self._reads = 0
        self._mark = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self._reads += 1
            return self.now

    def sent(self) -> None:
        """The server is about to write a piece: the next read after this one stamps it."""
        with self._lock:
            self._mark = self._reads

    async def sleep(self, seconds: float, timeout_s: float = 30.0) -> None:
        from tests.waiting import await_until

        def read_since() -> bool:
            with self._lock:
                return self._reads > self._mark

        await await_until(read_since, "the client reading the simulated clock", timeout_s=timeout_s)
        with self._lock:
            self.now += seconds


class ScriptedOpenAI:
    """``/v1/models``, ``/v1/chat/completions``, ``/health`` and ``/metrics`` answering from a script."""

    def __init__(
        self,
        replies: list[dict[str, Any]] | None = None,
        *,
        model: str = MODEL,
        tokens_per_chunk: int = 3,
        ttft_s: float = 0.0,
        gap_s: float = 0.0,
        clock: SimClock | None = None,
        max_model_len: int | None = None,
    ) -> None:
        self.replies = list(replies or [{"content": REPLY}])
        self.model = model
        self.max_model_len = max_model_len  # listed in /v1/models when set, as vLLM does
        self.tokens_per_chunk = tokens_per_chunk
        self.ttft_s = ttft_s
        self.gap_s = gap_s
        self.clock = clock
        self.health_status = 200
        self.requests: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.root = ""
        self.url = ""
        self._stop: Callable[[], None] | None = None

    # --- the script ---------------------------------------------------------------------------------

    def _next(self) -> dict[str, Any]:
        return self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]

    def _usage(self, completion_tokens: int) -> dict[str, int]:
        prompt = 1000 + len(self.requests)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        }

    def _calls(self, reply: dict[str, Any]) -> list[dict[str, Any]]:
        n = len(self.requests)
        return [
            {
                "id": c.get("id") or f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
            }
            for i, c in enumerate(reply.get("tool_calls") or [])
        ]

    async def _wait(self, seconds: float) -> None:
        if self.clock is not None:
            await self.clock.sleep(seconds)
        elif seconds:
            await asyncio.sleep(seconds)

    # --- the app ------------------------------------------------------------------------------------

    def app(self) -> Starlette:
        def record(request: Request) -> None:
            self.log.append({"path": request.url.path, "headers": dict(request.headers)})

        async def health(request: Request) -> Response:
            record(request)
            return Response(status_code=self.health_status)

        async def models(request: Request) -> Response:
            record(request)
            entry: dict[str, Any] = {"id": self.model, "object": "model"}
            if self.max_model_len is not None:
                entry["max_model_len"] = self.max_model_len
            return JSONResponse({"object": "list", "data": [entry]})

        async def metrics(request: Request) -> Response:
            record(request)
            return PlainTextResponse(METRICS)

        async def chat(request: Request) -> Response:
            record(request)
            body = await request.json()
            self.requests.append(body)
            reply = self._next()
            if "respond" in reply:
                reply = reply["respond"](body)
            if "error" in reply:  # {"error": {"status": 400, "message": "..."}}: the server refuses
                err = reply["error"]
                return JSONResponse(
                    {"error": {"message": err.get("message", "bad request"), "type": "BadRequestError"}},
                    status_code=int(err.get("status", 400)),
                )
            calls = self._calls(reply)
            text = str(reply.get("content") or "")
            words = text.split(" ") if text else []
            tokens = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
            usage = self._usage(len(tokens))
            finish = "tool_calls" if calls else "stop"
            if not body.get("stream"):
                await self._wait(self.ttft_s)  # a slow model answers late whether it streams or not
                message: dict[str, Any] = {"role": "assistant", "content": text if not calls else None}
                if calls:
                    message["tool_calls"] = calls
                return JSONResponse(
                    {
                        "id": f"chatcmpl-{len(self.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": self.model,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": usage,
                    }
                )
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

            def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, use: Any = None) -> str:
                d: dict[str, Any] = {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": self.model,
                    "choices": []
                    if delta is None
                    else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
                if use:
                    d["usage"] = use
                if self.clock is not None:
                    self.clock.sent()
                return f"data: {json.dumps(d)}\n\n"

            async def gen() -> Any:
                yield chunk({"role": "assistant", "content": ""})
                await self._wait(self.ttft_s)
                if calls:
                    for i, c in enumerate(calls):
                        head = {"index": i, "id": c["id"], "type": "function"}
                        name = {"name": c["function"]["name"], "arguments": ""}
                        yield chunk({"tool_calls": [{**head, "function": name}]})
                        args = {"arguments": c["function"]["arguments"]}
                        yield chunk({"tool_calls": [{"index": i, "function": args}]})
                    yield chunk({}, "tool_calls")
                else:
                    n = max(1, self.tokens_per_chunk)
                    for i in range(0, len(tokens), n):
                        if i:
                            await self._wait(self.gap_s)
                        last = i + n >= len(tokens)
                        yield chunk({"content": "".join(tokens[i : i + n])}, "stop" if last else None)
                    if not tokens:
                        yield chunk({}, "stop")
                if include_usage:
                    yield chunk(None, use=usage)
                yield "data: [DONE]\n\n"

            return StreamingResponse(gen(), media_type="text/event-stream")

        return Starlette(
            routes=[
                Route("/health", health),
                Route("/v1/models", models),
                Route("/metrics", metrics),
                Route("/v1/chat/completions", chat, methods=["POST"]),
            ]
        )

    # --- serving ------------------------------------------------------------------------------------

    def start(self) -> ScriptedOpenAI:
        served = _Served.lend(self.app())
        self.root, self._stop = served.root, served.give_back
        self.url = self.root + "/v1"
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Served:
    """One uvicorn server of the process, lent to one ``ScriptedOpenAI`` at a time.

    A script's app is per test; the server under it is not. A test that ends gives its server back
    and the next one answers on the same URL, so the clients that are cached per base URL
    (langchain-openai keeps one pair of httpx clients per URL, each loading the CA bundle: 20 to 45 ms
    of CPU) are built once per server, not once per test. Between two lendings nobody's script
    answers: a request then gets a 503, never another test's reply."""

    _idle: list[_Served] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        from sandbox.serve import start_in_thread

        self.app: Starlette | None = None
        self.root, _stop = start_in_thread(self)  # lives as long as the process (a daemon thread)

    @classmethod
    def lend(cls, app: Starlette) -> _Served:
        with cls._lock:
            served = cls._idle.pop() if cls._idle else None
        if served is None:
            served = cls()
        served.app = app
        return served

    def give_back(self) -> None:
        self.app = None
        with self._lock:
            self._idle.append(self)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        app = self.app
        if app is not None:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            await PlainTextResponse("no script is being served", status_code=503)(scope, receive, send)
