"""A chat model that may call read-only tools for a bounded number of steps before it answers.

``ToolLoopModel(model, tools, loop, max_steps)`` looks like a chat model to the diagnosis code
(``invoke(messages) -> AIMessage``), but each ``invoke`` lets the model call the bound tools, feeds
the (redacted, bounded) results back, and returns the model's final answer. The MCP sessions the
tools use live on ``loop`` (one event loop, sessions opened once); ``invoke`` is called from another
thread and runs the steps there. A tool the model names that was not bound is refused, never run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 4000
FINAL_NUDGE = "Tool budget used up. Answer now with the diagnosis JSON only; do not call tools."


def _tool_text(result: Any) -> str:
    from mcp_tools.logs import redact

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


async def run_tool_loop(model: Any, tools: list[Any], messages: list[Any], *, max_steps: int) -> Any:
    """The model's final AIMessage after at most ``max_steps`` rounds of tool calls."""
    from langchain_core.messages import HumanMessage, ToolMessage

    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools) if tools else model
    history = list(messages)
    for step in range(1, max(0, max_steps) + 1):
        ai = await bound.ainvoke(history)
        calls = getattr(ai, "tool_calls", None) or []
        if not calls:
            return ai
        history.append(ai)
        for call in calls:
            name = call.get("name", "")
            tool = by_name.get(name)
            if tool is None:
                content = f"error: {name!r} is not an available tool (only read-only tools are bound)"
            else:
                try:
                    content = _tool_text(await tool.ainvoke(call.get("args") or {}))
                except Exception as e:  # a failing tool is information for the model, not a crash
                    content = f"error: {e.__class__.__name__}: {str(e)[:300]}"
            log.info("tool %s called by the model (step %d)", name, step)
            history.append(ToolMessage(content=content, tool_call_id=call.get("id") or name, name=name))
    history.append(HumanMessage(content=FINAL_NUDGE))
    return await model.ainvoke(history)


class ToolLoopModel:
    """A synchronous chat-model face over ``run_tool_loop`` on the loop that owns the MCP sessions."""

    def __init__(self, model: Any, tools: list[Any], loop: asyncio.AbstractEventLoop, max_steps: int) -> None:
        self.model = model
        self.tools = tools
        self.loop = loop
        self.max_steps = max_steps
        self.model_name = str(getattr(model, "model_name", None) or getattr(model, "model", "model"))

    def invoke(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        msgs = messages if isinstance(messages, list) else [messages]
        fut = asyncio.run_coroutine_threadsafe(
            run_tool_loop(self.model, self.tools, msgs, max_steps=self.max_steps), self.loop
        )
        return fut.result()

    async def ainvoke(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        msgs = messages if isinstance(messages, list) else [messages]
        return await run_tool_loop(self.model, self.tools, msgs, max_steps=self.max_steps)
