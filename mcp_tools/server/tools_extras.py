"""The GCP extras (plain functions in mcp_tools.extras), registered as tools, and the server's own
save_hf_token (it can also ask for the token through elicitation)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import typing
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.extras.secrets import SavedSecret, TokenNotSetError
from mcp_tools.server.core import result, tool, tool_errors
from mcp_tools.server.state import ServerState
from mcp_tools.settings import Policy


def _is_options(p: inspect.Parameter) -> bool:
    """A parameter that is a dataclass of options (``extras.VllmServing``)."""
    return isinstance(p.annotation, type) and dataclasses.is_dataclass(p.annotation)


def _spread(p: inspect.Parameter) -> list[inspect.Parameter]:
    """A parameter as the tool's arguments: a dataclass of options becomes one argument per field,
    with the field's type and default; any other stays as it is."""
    if not _is_options(p):
        return [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)]
    hints = typing.get_type_hints(p.annotation)
    return [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(p.annotation)
    ]


def _as_tool(fn: Callable[..., BaseModel], *, text: Callable[[Any], str]) -> Callable[..., Any]:
    """An async MCP tool around a blocking extras function (run in a thread), same parameters, those
    of a dataclass parameter spread out (``_spread``) and gathered again for the call."""
    sig = inspect.signature(fn, eval_str=True)
    out_type = sig.return_annotation
    # each options parameter and its fields' names, worked out once
    grouped = {
        p.name: (p.annotation, [f.name for f in dataclasses.fields(p.annotation)])
        for p in sig.parameters.values()
        if _is_options(p)
    }

    async def run(**kwargs: Any) -> Any:
        for name, (options, fields) in grouped.items():
            kwargs[name] = options(**{f: kwargs.pop(f) for f in fields if f in kwargs})
        res = await asyncio.to_thread(fn, **kwargs)
        return result(res, text(res))

    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    run.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[q for p in sig.parameters.values() for q in _spread(p)],
        return_annotation=Annotated[CallToolResult, out_type],
    )
    return tool_errors(run)


def register(mcp: FastMCP, state: ServerState) -> None:
    """The extras with their own readable renderings and hints (mcp_tools.extras.mcp_register); the
    server's own save_hf_token (it can also ask through elicitation) and error handling."""
    from mcp_tools import extras
    from mcp_tools.extras.mcp_register import EXTRAS_TOOLS

    for fn, _model, render, hints in EXTRAS_TOOLS:
        if fn.__name__ == "save_hf_token":
            continue
        mcp.add_tool(_as_tool(fn, text=render), name=fn.__name__, annotations=hints)

    @mcp.resource(extras.TEMPLATE_URI, name="vllm-deployment-template", mime_type="application/yaml")
    def vllm_deployment_template() -> str:
        """Cloud Run service YAML for vLLM on an L4, with documented ${PARAMETERS}."""
        return str(extras.vllm_deployment_template().text)

    if state.policy is not Policy.READ_ONLY:  # it writes a secret
        _register_save_hf_token(mcp)


class _TokenForm(BaseModel):
    token: str = Field(description="Hugging Face access token (hf_...); stored in Secret Manager only")


def _register_save_hf_token(mcp: FastMCP) -> None:
    from mcp_tools import extras

    @tool(mcp, ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True))
    async def save_hf_token(
        ctx: Context,
        secret_id: str = "hf-token",
        from_env: str | None = "HF_TOKEN",
        from_file: str | None = None,
        project: str | None = None,
    ) -> Annotated[CallToolResult, SavedSecret]:
        """Store the Hugging Face token in Secret Manager (a new version of secret_id). The token is read
        from the environment variable from_env or the file from_file, never passed as an argument; when
        neither has it and the client supports elicitation, the user is asked for it directly. The token
        is never returned or logged."""
        try:
            res = await asyncio.to_thread(
                extras.save_hf_token, secret_id, from_env=from_env, from_file=from_file, project=project
            )
        except TokenNotSetError:
            if from_file is not None or not _can_elicit(ctx):
                raise
            res = await _save_elicited_token(ctx, secret_id, project)
        return result(res, f"saved {res.version} (token read from {res.source}; not shown)")


def _can_elicit(ctx: Context) -> bool:
    from mcp.types import ClientCapabilities, ElicitationCapability

    try:
        return bool(
            ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability()))
        )
    except Exception:  # no session details: do not ask
        return False


async def _save_elicited_token(ctx: Context, secret_id: str, project: str | None) -> Any:
    """Ask the user (MCP elicitation), hand the answer to save_hf_token through a private temp file."""
    import shutil
    import tempfile

    from mcp_tools import extras

    answer = await ctx.elicit(
        "Paste your Hugging Face access token. It goes to Secret Manager only; the model never sees it.",
        _TokenForm,
    )
    if answer.action != "accept" or answer.data is None:
        raise UserError("no token given: export it in an environment variable or name a file (from_file)")
    tmp = tempfile.mkdtemp(prefix="gemma-sre-")
    try:
        path = os.path.join(tmp, "token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(answer.data.token)
        res = await asyncio.to_thread(extras.save_hf_token, secret_id, from_file=path, project=project)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res.model_copy(update={"source": "the MCP client (elicitation)"})
