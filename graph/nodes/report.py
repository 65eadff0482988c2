"""report: the outcome, and the Markdown and JSON reports under ``<state_dir>/reports/``.

A report is written only when the cycle found something: a fault (any diagnosis but ``healthy``), a
plan, a decision or an outcome of a change. A quiet healthy cycle (watch mode runs one per interval)
writes none: its outcome is still in the state and the checkpoint. Nor does a run configured with
``write_report=False`` (a watch cycle's read-only look at an incident another thread already reports).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.nodes.approve import thread_id_of
from graph.report import outcome_of, render_json, render_markdown, report_basename
from graph.state import Outcome, SREState, event


def found_something(state: SREState, status: str) -> bool:
    """True when a cycle has something to report (an incident, a plan, a decision, an outcome)."""
    if status != "healthy":
        return True
    plan = state.get("plan") or {}
    return bool(plan.get("steps") or state.get("approval") or state.get("applied"))


def write_report(state: SREState, outcome: Outcome, cfg: Configuration, thread_id: str) -> dict[str, str]:
    """The Markdown and JSON reports of a finished cycle's ``state`` under ``<state_dir>/reports/``:
    their paths. Also for a watch cycle's read-only look whose incident turned out to be new."""
    directory = cfg.state_path / "reports"
    directory.mkdir(parents=True, exist_ok=True)
    base = report_basename(cfg.service, thread_id, int(state.get("cycle") or 0))
    md_path = directory / f"{base}.md"
    json_path = directory / f"{base}.json"
    md_path.write_text(render_markdown(state, outcome), encoding="utf-8")
    json_path.write_text(json.dumps(render_json(state, outcome), indent=2) + "\n", encoding="utf-8")
    return {"markdown": str(md_path), "json": str(json_path)}


def report(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    outcome = outcome_of(state, cfg.policy)
    final = event("report", f"{outcome.status}: {outcome.summary}")
    if not cfg.write_report or not found_something(state, outcome.status):
        return {"outcome": outcome.model_dump(mode="json"), "report": {}, "timeline": final}
    full: SREState = {**state, "timeline": [*(state.get("timeline") or []), *final]}  # type: ignore[typeddict-item]
    return {
        "outcome": outcome.model_dump(mode="json"),
        "report": write_report(full, outcome, cfg, thread_id_of(config)),
        "timeline": final,
    }
