"""What every tool module shares: readable-plus-structured results, bounded text, one-line errors, and
the tool annotations (read-only or mutating)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from mcp_tools.errors import ExternalError, UserError

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 12_000

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=True)
MUTATING = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)


def bounded(text: str, limit: int = MAX_TEXT_CHARS, more: str = "") -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out and how to get it."""
    if len(text) <= limit:
        return text
    hint = f" {more}" if more else ""
    return text[:limit] + f"\n... [{len(text) - limit} more characters not shown.{hint}]"


def result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content plus readable text (bounded)."""
    return CallToolResult(
        content=[TextContent(type="text", text=bounded(text))],
        structuredContent=model.model_dump(mode="json"),
    )


def _one_line(e: BaseException) -> str:
    from mcp_tools.logs import redact

    msg = " ".join(str(e).split()) or e.__class__.__name__
    return redact(msg)[:600]


def tool_errors(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn any failure into one clear line (an MCP error result), never a traceback or a hang."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except (UserError, ExternalError) as e:
            raise ToolError(_one_line(e)) from None
        except ToolError:
            raise
        except TimeoutError:
            raise ToolError("timed out waiting for an outside service") from None
        except Exception as e:  # a bug of ours: log it (stderr), say what it was
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(f"internal error ({e.__class__.__name__}): {_one_line(e)}") from None

    # FastMCP reads the signature (including the return annotation) from the wrapped function.
    wrapper.__signature__ = inspect.signature(fn, eval_str=True)  # type: ignore[attr-defined]
    return wrapper
