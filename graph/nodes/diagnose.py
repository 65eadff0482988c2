"""diagnose: the deterministic analyzers first, then the model when one is reachable.

The model (``Configuration.model``, or built by ``Configuration.model_factory`` from the configured
endpoints) gets the compressed, redacted context and the findings, and may call read-only MCP tools
for a bounded number of steps (``graph.tools``, ``graph.toolloop``). When no model is configured or
reachable, or its answer does not validate, the analyzers' diagnosis stands and says so.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.retry import short_error
from graph.state import SREState, event

log = logging.getLogger(__name__)


def resolve_model(cfg: Configuration) -> tuple[Any, str | None]:
    """(chat model or None, why there is none)."""
    if not cfg.use_model:
        return None, "model disabled for this run"
    if cfg.model is not None:
        return cfg.model, None
    if not (cfg.model_url or cfg.fallback_model_url):
        return None, "no model configured"
    try:
        module, _, attr = cfg.model_factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
        model = factory(cfg)
    except Exception as e:
        return None, f"model client could not be built: {short_error(e)}"
    if model is None:
        return None, "the model endpoint is not reachable"
    return model, None


def _with_tools(cfg: Configuration, model: Any, run: Any) -> Any:
    """Run ``run(model_with_tools)`` in a worker thread while this thread's loop serves the MCP sessions."""
    from graph.toolloop import ToolLoopModel
    from graph.tools import read_only_tools

    async def main() -> Any:
        async with read_only_tools(cfg) as tools:
            extra = list(cfg.tools or [])
            wrapped = ToolLoopModel(model, [*tools, *extra], asyncio.get_running_loop(), cfg.max_tool_steps)
            return await asyncio.to_thread(run, wrapped)

    return asyncio.run(main())


def diagnose_node(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.diagnosis import diagnose
    from graph.observation import Observation

    cfg = Configuration.from_runnable_config(config)
    obs = Observation.model_validate(state["observation"])
    model, why_not = resolve_model(cfg)
    diag = None
    if model is not None:
        try:
            if cfg.max_tool_steps > 0:
                diag = _with_tools(cfg, model, lambda m: diagnose(obs, model=m))
            else:
                diag = diagnose(obs, model=model)
        except Exception as e:  # MCP tools or the model failed: the analyzers still diagnose
            why_not = f"model-assisted diagnosis failed: {short_error(e)}"
            log.warning("%s", why_not)
            diag = None
    if diag is None:
        diag = diagnose(obs, model=None)
        if why_not:
            diag.notes = [*diag.notes, f"analyzers only: {why_not}"]
    msg = f"{diag.category} (confidence {diag.confidence:.2f})"
    if diag.evidence:
        first = diag.evidence[0]
        msg += f", citing line {first.line}: {first.text[:160]}"
    msg += f"; model: {diag.model_used or why_not or 'none'}"
    return {
        "diagnosis": diag.model_dump(mode="json"),
        "findings": [],
        "timeline": event("diagnose", msg),
    }
