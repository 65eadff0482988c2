"""What every tool module shares: readable-plus-structured results, bounded text, one-line errors, and
the tool annotations (read-only or mutating)."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import math
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from mcp_tools.errors import ExternalError, UserError

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 12_000

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=True)
MUTATING = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)


@functools.cache
def plain_defaults(generator: type[GenerateJsonSchema]) -> type[GenerateJsonSchema]:
    """``generator`` writing the defaults that are plain JSON values (None, booleans, integers, strings,
    finite floats) as they are: pydantic builds a ``TypeAdapter`` for each default it writes (about a
    fifth of a result schema's time), and for these its answer is the value itself. Any other default
    (an enum, a list, a model, an infinite float) is still pydantic's to write."""

    class _PlainDefaults(generator):  # type: ignore[valid-type,misc]
        def encode_default(self, dft: Any) -> Any:
            kind = type(dft)
            if dft is None or kind in (bool, int, str) or (kind is float and math.isfinite(dft)):
                return dft
            return super().encode_default(dft)

    return _PlainDefaults


class ResultModel(BaseModel):
    """The structured result of a tool. FastMCP asks each tool's result model for its JSON schema when
    the tool is registered; this one's is pydantic's own, built sooner (``plain_defaults``)."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # Only the generator is swapped; every other argument is passed as given, so the signature
        # follows the installed pydantic's (``union_format`` exists from 2.12, the floor is 2.9).
        if len(args) >= 3:
            args = (*args[:2], plain_defaults(args[2]), *args[3:])
        else:
            kwargs["schema_generator"] = plain_defaults(kwargs.get("schema_generator", GenerateJsonSchema))
        return super().model_json_schema(*args, **kwargs)


_SCHEMAS: dict[tuple[Any, ...], dict[str, Any]] = {}


class SharedResult(ResultModel):
    """The structured result of several tools. pydantic builds a model's JSON schema anew each time it
    is asked; this one is built once per class (and arguments) and each caller gets its own copy, so
    the server starts sooner."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        key = (cls, args, tuple(sorted(kwargs.items())))
        schema = _SCHEMAS.get(key)
        if schema is None:
            schema = _SCHEMAS[key] = super().model_json_schema(*args, **kwargs)
        return copy.deepcopy(schema)


def check_range(name: str, value: float, lo: float, hi: float) -> None:
    """A tool argument outside ``lo``..``hi`` (inclusive) is one clear error that names it."""
    if not lo <= value <= hi:
        raise UserError(f"{name} must be from {lo} to {hi}, not {value}")


def bounded(text: str, limit: int = MAX_TEXT_CHARS, more: str = "") -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out and how to get it."""
    if len(text) <= limit:
        return text
    hint = f" {more}" if more else ""
    return text[:limit] + f"\n... [{len(text) - limit} more characters not shown.{hint}]"


#: Result fields that are meant for the caller and must pass redaction untouched (the short-lived,
#: single-use confirmation token of a two-step mutation is not a credential).
KEEP_FIELDS = frozenset({"confirmation_token"})


def result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content plus readable text (bounded), with secrets redacted from both: a service's
    env, a log line or a model's answer may carry one, and no secret leaves through a tool."""
    from mcp_tools.redact import redact_data

    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=bounded(_redact_keeping(text, data)))],
        structuredContent=redact_data(data, KEEP_FIELDS),
    )


def _redact_keeping(text: str, data: dict[str, Any]) -> str:
    """``redact(text)`` with the values of ``KEEP_FIELDS`` left whole: the text around each is redacted
    on its own (a placeholder in their place would itself read as ``confirmation_token=<secret>``)."""
    from mcp_tools.redact import redact

    kept = sorted({v for k in KEEP_FIELDS if isinstance(v := data.get(k), str) and v}, key=len, reverse=True)
    if not kept:
        return redact(text)
    pieces = re.split("(" + "|".join(map(re.escape, kept)) + ")", text)
    return "".join(p if i % 2 else redact(p) for i, p in enumerate(pieces))


def _one_line(e: BaseException) -> str:
    from mcp_tools.redact import redact

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

    # FastMCP reads the signature (including the return annotation) from the wrapped function; every
    # parameter gets its description there (mcp_tools.server.params).
    from mcp_tools.server.params import described

    sig = inspect.signature(fn, eval_str=True)
    wrapper.__signature__ = described(fn, sig)  # type: ignore[attr-defined]
    return wrapper


def tool(
    mcp: FastMCP, annotations: ToolAnnotations, *, aliases: dict[str, str] | None = None
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Register an async function as a tool whose failures are one line (``tool_errors``), under its own
    name and under each alias (``{name: description}``) the existing tooling uses."""

    def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        wrapped = tool_errors(fn)
        mcp.add_tool(wrapped, annotations=annotations)
        for name, description in (aliases or {}).items():
            mcp.add_tool(wrapped, name=name, description=description, annotations=annotations)
        return wrapped

    return register
