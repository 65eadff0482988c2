"""diagnose: the deterministic analyzers first, then the model when one is reachable.

``graph.diagnosis.diagnose`` runs the analyzers, asks the model (when given an endpoint) with the
compressed, redacted context and validates its answer. This node takes the endpoint a face passed in
(``Configuration.model``) or resolves the configured one (``mcp_tools.model_endpoint``: the primary,
then the fallback, whichever answers) and gives the model read-only MCP tools (``graph.tools``) on
sessions opened once for the whole diagnosis. With no model configured or reachable, the analyzers'
diagnosis stands and the notes say so.

The model works inside what is left of the cycle's deadline (``Configuration.cycle_deadline_s``):
the endpoint is resolved and each call and tool call timed out within it, the whole model-assisted
diagnosis is given at most that long, and past it the analyzers' diagnosis stands. An observation
that could not read the logs is not sent to a model at all (``graph.diagnosis.diagnose``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import SREState, event
from mcp_tools.errors import short_error

log = logging.getLogger(__name__)

TOOL_CALL_TIMEOUT_S = 60.0

#: With less of the cycle's deadline left than this, the model is not asked.
MODEL_MIN_S = 5.0


def resolve_endpoint(cfg: Configuration, *, budget_s: float | None = None) -> tuple[Any, str | None]:
    """(the model endpoint or None, why there is none); ``budget_s`` bounds the endpoint's timeout."""
    if not cfg.use_model:
        return None, "model disabled for this run"
    if cfg.model is not None:
        return cfg.model, None
    if not (cfg.model_url or cfg.fallback_model_url):
        return None, "no model configured"
    from mcp_tools.model_endpoint import resolve_model_endpoint

    s = cfg.settings()
    try:
        endpoint = resolve_model_endpoint(
            [u for u in (cfg.model_url, cfg.fallback_model_url) if u],
            api_key=s.model_api_key,
            model_name=cfg.model_name,
            timeout_s=min(s.model_timeout_s, budget_s) if budget_s is not None else s.model_timeout_s,
        )
    except Exception as e:
        return None, f"model client could not be set up: {short_error(e)}"
    if endpoint is None:
        return None, "no model endpoint answered (the model may be the patient)"
    return endpoint, None


def _sync_tool(tool: Any, loop: asyncio.AbstractEventLoop, deadline: Any = None) -> Any:
    """A sync face for an async MCP tool: calls run on ``loop``, which owns the MCP session; each
    waits at most ``TOOL_CALL_TIMEOUT_S``, or what is left of ``deadline``."""
    from langchain_core.tools import StructuredTool

    def call(**kwargs: Any) -> Any:
        limit = TOOL_CALL_TIMEOUT_S
        if deadline is not None:
            limit = min(limit, deadline.check(f"tool {tool.name}"))
        fut = asyncio.run_coroutine_threadsafe(tool.ainvoke(kwargs), loop)
        return fut.result(timeout=limit)

    return StructuredTool.from_function(
        func=call, name=tool.name, description=tool.description or tool.name, args_schema=tool.args_schema
    )


def diagnose_with_tools(cfg: Configuration, run: Any, deadline: Any = None) -> Any:
    """``run(tools)`` in a worker thread while this thread's event loop serves the MCP sessions."""
    from graph.tools import read_only_tools

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        async with read_only_tools(cfg) as tools:
            sync_tools = [_sync_tool(t, loop, deadline) for t in tools] + list(cfg.tools or [])
            return await asyncio.to_thread(run, sync_tools)

    return asyncio.run(main())


class _OutOfTime(Exception):
    pass


def within(seconds: float, fn: Any) -> Any:
    """``fn()`` in a daemon thread, waited for at most ``seconds`` (``_OutOfTime`` past them).

    Every call inside has its own timeout, so a thread given up on ends on its own; the cycle does
    not wait for it."""
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    t = threading.Thread(target=target, name="gemma-sre-model-diagnosis", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise _OutOfTime(f"not finished within the {seconds:.0f} s left of the cycle's deadline")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def key_evidence(diag: Any) -> Any:
    """The evidence line the summary names ("... (line 35) ..."), else the first one."""
    import re

    if not diag.evidence:
        return None
    named = {int(n) for n in re.findall(r"\bline (\d+)", diag.summary or "")}
    for ev in diag.evidence:
        if ev.line in named:
            return ev
    return diag.evidence[0]


def failed_rollout_note(obs: Any) -> str | None:
    """What a healthy diagnosis says about a failed deploy that never took the traffic (None: none)."""
    failed = obs.failed_rollout
    if not failed:
        return None
    return (
        f"The latest deploy, revision {failed}, failed to start and takes no traffic; "
        f"{obs.serving_revision} serves all of it, so that failure is history, not an open incident, "
        "and no rollback is needed. The service's template is still the failed revision's: update "
        "your deploy config, or the next revision made from it fails the same way."
    )


def diagnose_node(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.diagnosis import diagnose
    from graph.observation import Observation

    cfg = Configuration.from_runnable_config(config)
    obs = Observation.model_validate(state["observation"])
    deadline = cfg.deadline()
    left = deadline.remaining()
    endpoint: Any = None
    if obs.blind_to("logs") is not None:
        why_not: str | None = "the logs could not be read"
    elif cfg.use_model and left < MODEL_MIN_S:
        why_not = f"no time left for a model (the cycle's deadline of {cfg.cycle_deadline_s:g} s)"
    else:
        endpoint, why_not = resolve_endpoint(cfg, budget_s=left)
    diag = None
    if endpoint is not None:

        def run(tools: list[Any]) -> Any:
            return diagnose(obs, model=endpoint, tools=tools, max_steps=cfg.max_tool_steps)

        try:
            diag = within(
                deadline.remaining(),
                lambda: diagnose_with_tools(cfg, run, deadline) if cfg.max_tool_steps > 0 else run([]),
            )
        except Exception as e:  # the model failed or ran out of time: the analyzers still diagnose
            why_not = f"model-assisted diagnosis failed: {short_error(e)}"
            log.warning("%s", why_not)
            diag = None
    if diag is None:
        diag = diagnose(obs)
        if why_not:
            diag.notes = [*diag.notes, f"analyzers only: {why_not}"]
    rollout = failed_rollout_note(obs)
    if rollout and diag.category == "healthy":
        diag.summary = f"{diag.summary} {rollout}"
    msg = f"{diag.category} (confidence {diag.confidence:.2f})"
    if obs.unread:
        msg += f"; not read: {', '.join(u.source for u in obs.unread)}"
    msg += f"; model: {diag.model_used or why_not or 'none'}"
    cited = key_evidence(diag)
    if cited is not None:  # last, and whole: a record cut mid-token reads as another record
        msg += f"; citing {f'line {cited.line}' if cited.line > 0 else 'no log line'}: {cited.text}"
    return {"diagnosis": diag.model_dump(mode="json"), "timeline": event("diagnose", msg)}
