"""A small scripted OpenAI-compatible server for tests (real HTTP on a loopback port).

Streams several tokens per chunk on purpose, so a client that counts chunks as tokens is caught, and
reports usage only in the final chunk when ``stream_options.include_usage`` is asked for, as vLLM does.
Records the headers of every request so tests can check authentication.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "gemma-4-12b-it"
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


class Script:
    def __init__(self) -> None:
        self.reply = "The KV cache is starved; raise gpu_memory_utilization."
        self.tokens_per_chunk = 3
        self.ttft_s = 0.05
        self.gap_s = 0.01
        self.health_status = 200
        self.requests: list[dict[str, Any]] = []


def make_app(script: Script) -> Starlette:
    def record(request: Request, body: Any = None) -> None:
        script.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})

    async def health(request: Request) -> Response:
        record(request)
        return Response(status_code=script.health_status)

    async def models(request: Request) -> Response:
        record(request)
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def metrics(request: Request) -> Response:
        record(request)
        return PlainTextResponse(METRICS)

    async def chat(request: Request) -> Response:
        body = await request.json()
        record(request, body)
        words = script.reply.split(" ")
        tokens = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"]) + 5
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": prompt_tokens + len(tokens),
        }
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": script.reply},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def gen() -> Any:
            def chunk(delta: dict[str, Any], finish: str | None = None, use: Any = None) -> str:
                d: dict[str, Any] = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": body["model"],
                    "choices": [] if use else [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                if use:
                    d["usage"] = use
                return f"data: {json.dumps(d)}\n\n"

            yield chunk({"role": "assistant", "content": ""})
            await asyncio.sleep(script.ttft_s)
            n = script.tokens_per_chunk
            for i in range(0, len(tokens), n):
                if i:
                    await asyncio.sleep(script.gap_s)
                last = i + n >= len(tokens)
                yield chunk({"content": "".join(tokens[i : i + n])}, "stop" if last else None)
            if include_usage:
                yield chunk({}, use=usage)
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(script: Script | None = None) -> Iterator[tuple[str, Script]]:
    """Serve the scripted app on a loopback port in a thread: yields (base_url, script)."""
    script = script or Script()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(make_app(script), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", script
    finally:
        server.should_exit = True
        thread.join(timeout=5)
