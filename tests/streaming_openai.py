"""A scripted OpenAI-compatible server that streams (SSE), tool calls included, for the REPL tests.

Replies are consumed in order: ``{"content": "..."}`` streams the text a few words per chunk (with
``delay_s`` between chunks), ``{"tool_calls": [{"name": ..., "arguments": {...}}]}`` streams the
calls as vLLM does (id and name first, then the arguments). Every request body is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "gemma-4-12b-it"


class StreamScript:
    def __init__(self, replies: list[dict[str, Any]], *, delay_s: float = 0.0) -> None:
        self.replies = list(replies)
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self._i = 0

    def next(self) -> dict[str, Any]:
        r = self.replies[min(self._i, len(self.replies) - 1)]
        self._i += 1
        return r


def make_app(script: StreamScript) -> Starlette:
    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        reply = script.next()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            d = {
                "id": "chatcmpl-s",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(d)}\n\n"

        async def gen() -> Any:
            yield chunk({"role": "assistant", "content": ""})
            if reply.get("tool_calls"):
                for i, c in enumerate(reply["tool_calls"]):
                    head = {"index": i, "id": f"call_{len(script.requests)}_{i}", "type": "function"}
                    yield chunk({"tool_calls": [{**head, "function": {"name": c["name"], "arguments": ""}}]})
                    args = json.dumps(c.get("arguments") or {})
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]})
                yield chunk({}, "tool_calls")
            else:
                words = str(reply.get("content", "")).split(" ")
                for j in range(0, len(words), 2):
                    if script.delay_s:
                        await asyncio.sleep(script.delay_s)
                    piece = " ".join(words[j : j + 2]) + (" " if j + 2 < len(words) else "")
                    yield chunk({"content": piece})
                yield chunk({}, "stop")
            yield "data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(
        routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])]
    )


@contextmanager
def serve_stream(script: StreamScript) -> Iterator[str]:
    """The scripted server on a loopback port: yields its base URL (without /v1)."""
    from sandbox.serve import start_in_thread

    url, stop = start_in_thread(make_app(script))
    try:
        yield url
    finally:
        stop()
