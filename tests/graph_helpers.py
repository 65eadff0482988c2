"""Helpers for the graph tests: a local OpenAI-compatible server with scripted replies.

The model is tested at the wire: the real ChatOpenAI client talks HTTP to this server, which answers
from a script and records every request (so tests can check what a model was sent and offered).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedOpenAI:
    """``/v1/models`` and ``/v1/chat/completions`` answering from ``replies`` in order.

    A reply is ``{"content": "..."}`` or ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``.
    When the script runs out, the last reply repeats.
    """

    def __init__(self, replies: list[dict[str, Any]], model: str = "gemma-4-12b-it") -> None:
        self.replies = list(replies)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._i = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/v1/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                outer.requests.append(body)
                reply = outer.next_reply()
                msg: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
                finish = "stop"
                if reply.get("tool_calls"):
                    msg["tool_calls"] = [
                        {
                            "id": f"call_{len(outer.requests)}_{i}",
                            "type": "function",
                            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
                        }
                        for i, c in enumerate(reply["tool_calls"])
                    ]
                    finish = "tool_calls"
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": outer.model,
                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def next_reply(self) -> dict[str, Any]:
        reply = self.replies[min(self._i, len(self.replies) - 1)]
        self._i += 1
        return reply

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ScriptedOpenAI:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
