"""A free-form question to the model, with read-only tools, streamed.

The model is the one the loop diagnoses with (``GEMMA_SRE_MODEL_URL``, else ``VLLM_BASE_URL``). It
gets our server's read-only tools (the capacity planner, metrics, logs, service state) on one
in-memory MCP session, a bounded number of tool rounds, and the figures of the REPL's last
``/bench`` and ``/capacity``. The answer streams token by token; afterwards the REPL states which
tools the figures came from, as recorded here (not as the model claims), and says so plainly when no
tool was called and the answer contains numbers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 4

NO_MODEL = (
    "A free-form question needs a model: set GEMMA_SRE_MODEL_URL (or VLLM_BASE_URL) to an "
    "OpenAI-compatible vLLM endpoint, e.g. export GEMMA_SRE_MODEL_URL=http://127.0.0.1:8000. "
    "Every /command works without one (/help)."
)

SYSTEM = """You are gemma-sre, an SRE assistant for vLLM served on Cloud Run GPUs and GKE GPU nodes.
Answer the operator's question briefly and concretely.
Rules:
- Every number you state (memory, tokens, latency, throughput, concurrency) must come from a tool
  result in this conversation or from the REPL figures below. Call a tool to get it; never estimate.
- After each figure, name its source in brackets, e.g. [plan_capacity] or [/bench].
- You can only read; you cannot change the service. To change it, tell the operator to use /plan.
"""


class NoModelError(Exception):
    """No model is configured, or it does not answer."""


class Answer(BaseModel):
    text: str
    model: str
    tools_used: list[str] = Field(default_factory=list)
    rounds: int = 0

    def sources_note(self) -> str:
        if self.tools_used:
            return "figures from: " + ", ".join(dict.fromkeys(self.tools_used))
        if re.search(r"\d", self.text):
            return "no tool was called: any figure above is the model's own, not computed"
        return "no tool was called"


MAX_TOOL_RESULT_CHARS = 4000


def _tool_text(result: Any) -> str:
    """A tool result as text for the model: content blocks joined, secrets redacted, bounded."""
    from mcp_tools.redact import redact

    if isinstance(result, str):
        text = result
    elif isinstance(result, list):  # content blocks from langchain-mcp-adapters
        parts = []
        for block in result:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(json.dumps(block, default=str))
        text = "\n".join(parts)
    else:
        text = json.dumps(result, default=str)
    text = redact(text)
    if len(text) > MAX_TOOL_RESULT_CHARS:
        text = (
            text[:MAX_TOOL_RESULT_CHARS] + f"\n[... {len(text) - MAX_TOOL_RESULT_CHARS} more characters cut]"
        )
    return text


def _context(repl_figures: dict[str, Any]) -> str:
    if not repl_figures:
        return ""
    return "\nREPL figures (from the REPL's own tools):\n" + json.dumps(repl_figures, default=str)[:6000]


def answer_question(
    question: str,
    cfg: Any,
    *,
    emit: Callable[[str], None],
    repl_figures: dict[str, Any] | None = None,
    model: Any = None,
) -> Answer:
    """Ask the model; stream the answer through ``emit``. Raises ``NoModelError`` with what to do."""
    if model is None:
        from graph.diagnosis import chat_model
        from mcp_tools.model_endpoint import model_urls, resolve_from_settings

        s = cfg.settings()
        urls = model_urls(s, primary=cfg.model_url)
        if not urls:
            raise NoModelError(NO_MODEL)
        ep = resolve_from_settings(s, primary=cfg.model_url)
        if ep is None:
            raise NoModelError(
                f"no model at {' or '.join(urls)} answers /v1/models; "
                "check GEMMA_SRE_MODEL_URL / VLLM_BASE_URL / GEMMA_SRE_FALLBACK_MODEL_URL"
            )
        ep.max_tokens = None  # a free-form answer: as long as it needs
        import openai

        from mcp_tools.endpoint import tls_context

        # The question's own connections, closed with its event loop: each question runs in a loop of
        # its own, and langchain-openai's default async client is kept per base URL for the whole
        # process, so the next question would reuse a connection of a closed loop.
        http = openai.DefaultAsyncHttpxClient(verify=tls_context())
        try:
            model = chat_model(ep, http_async_client=http)
        except BaseException:
            asyncio.run(http.aclose())
            raise
        return asyncio.run(_closing(http, _answer(question, cfg, model, emit, repl_figures or {})))
    return asyncio.run(_answer(question, cfg, model, emit, repl_figures or {}))


async def _closing(http: Any, answering: Coroutine[Any, Any, Answer]) -> Answer:
    try:
        return await answering
    finally:
        await http.aclose()


async def _answer(
    question: str, cfg: Any, model: Any, emit: Callable[[str], None], figures: dict[str, Any]
) -> Answer:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    from graph.diagnosis import as_sent
    from graph.tools import read_only_tools

    system_role = cfg.settings().model_system_role  # off: user / model turns only (Gemma 2 and 3)
    name = str(getattr(model, "model_name", None) or "model")
    history: list[Any] = [
        SystemMessage(content=SYSTEM + f"\nService in focus: {cfg.service or 'none'}." + _context(figures)),
        HumanMessage(content=question),
    ]
    used: list[str] = []
    async with read_only_tools(cfg) as tools:
        by_name = {t.name: t for t in tools}
        bound = model.bind_tools(tools) if tools else model
        text_parts: list[str] = []
        for rounds in range(1, MAX_TOOL_ROUNDS + 2):
            runnable = bound if rounds <= MAX_TOOL_ROUNDS else model  # last round: no tools
            agg: Any = None
            async for chunk in runnable.astream(as_sent(history, system_role=system_role)):
                agg = chunk if agg is None else agg + chunk
                piece = chunk.content if isinstance(chunk.content, str) else ""
                if piece:
                    text_parts.append(piece)
                    emit(piece)
            calls = list(getattr(agg, "tool_calls", None) or []) if agg is not None else []
            if not calls:
                return Answer(text="".join(text_parts), model=name, tools_used=used, rounds=rounds)
            history.append(agg)
            for call in calls:
                tname = call.get("name", "")
                tool = by_name.get(tname)
                if tool is None:
                    content = f"error: {tname!r} is not an available tool (only read-only tools are bound)"
                else:
                    try:
                        content = _tool_text(await tool.ainvoke(call.get("args") or {}))
                        used.append(tname)
                    except Exception as e:
                        content = f"error: {e.__class__.__name__}: {str(e)[:300]}"
                log.info("tool %s called for a REPL question", tname)
                history.append(ToolMessage(content=content, tool_call_id=call.get("id") or tname, name=tname))
    return Answer(text="".join(text_parts), model=name, tools_used=used, rounds=MAX_TOOL_ROUNDS + 1)
