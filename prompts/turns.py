"""A conversation as a chat template without system and tool roles takes it (Gemma 2 and 3).

Gemma 2's and 3's templates know two roles, ``user`` and ``model``, strictly alternating from the user:
Gemma 2 raises on a system message, both raise on a ``tool`` message or two turns of one role in a
row, and neither renders an assistant message's ``tool_calls``. ``alternating`` is the one place that
folds a conversation into that shape; the agent sends it so whenever the rules do not go as a system
message (``GEMMA_SRE_MODEL_SYSTEM_ROLE`` off, the default), the same switch that gives one user turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


def _text(content: Any) -> str:
    """A message's text (a content list keeps its text parts)."""
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content or []]
    return "\n".join(p for p in parts if p)


def tool_call_text(name: str, args: dict[str, Any] | None) -> str:
    """How a tool call reads inside the model's own turn."""
    return f"[tool call] {name}({json.dumps(args or {}, sort_keys=True, ensure_ascii=False)})"


def tool_result_text(name: str, content: str) -> str:
    """How a tool's result reads inside the next user turn."""
    return f"[tool result] {name}:\n{content}"


def alternating(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` as user / assistant turns strictly alternating, the user first: a system message
    becomes the start of the first user turn, an assistant's tool calls are written into its turn, a
    tool's result goes into the next user turn; consecutive texts of one role join into one turn
    (blank-line separated). A conversation that already alternates comes back unchanged."""
    names: dict[str, str] = {}
    turns: list[tuple[str, list[str]]] = []

    def add(role: str, text: str) -> None:
        if turns and turns[-1][0] == role:
            turns[-1][1].append(text)
        else:
            turns.append((role, [text]))

    for m in messages:
        if isinstance(m, AIMessage):
            calls = list(m.tool_calls or [])
            for call in calls:
                names[str(call.get("id"))] = call["name"]
            text = "\n".join(
                x for x in [_text(m.content), *(tool_call_text(c["name"], c.get("args")) for c in calls)] if x
            )
            add("assistant", text)
        elif isinstance(m, ToolMessage):
            name = m.name or names.get(str(m.tool_call_id)) or "tool"
            add("user", tool_result_text(name, _text(m.content)))
        elif isinstance(m, SystemMessage | HumanMessage):
            add("user", _text(m.content))
        else:
            raise TypeError(f"no turn for a {type(m).__name__}")
    return [
        HumanMessage("\n\n".join(texts)) if role == "user" else AIMessage("\n\n".join(texts))
        for role, texts in turns
    ]


__all__ = ["alternating", "tool_call_text", "tool_result_text"]
