"""``gemma-sre eval``: replay recorded incidents through the diagnosis and score them (SPEC.md section 4)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from agent.params import bounded, model_url_option


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_(
        incidents: Path | None = typer.Option(
            None, "--incidents", help="Directory of incident YAML files (default: the built-in library)."
        ),
        mode: str = typer.Option("replay", "--mode", help="replay (from the files alone) or sandbox."),
        split: str = typer.Option(
            "all",
            "--split",
            help="Which part of the built-in library: all, composed, dev, blind, or real (dev + blind).",
        ),
        model_url: str | None = model_url_option("none"),
        repeat: int = typer.Option(
            1, "--repeat", parser=bounded(int, 1, 100), help="Run each incident K times (pass@k, pass-all-k)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document (SPEC.md section 4)."),
        report: Path | None = typer.Option(
            None, "--report", help="Also write a Markdown report to this file."
        ),
        diagnose: str | None = typer.Option(
            None,
            "--diagnose",
            help="Score another diagnoser, as MODULE:FUNCTION (default: graph.pipeline:assess_incident).",
        ),
    ) -> None:
        """Replay incidents, score diagnosis, remediation and safety; exit 1 when any case fails."""
        import json
        import sys

        from evals.harness import run_eval
        from mcp_tools.errors import UserError

        if mode not in ("replay", "sandbox"):
            raise UserError(f"--mode must be 'replay' or 'sandbox', not {mode!r}")
        model = _make_model(model_url) if model_url else None
        fn = _load_diagnoser(diagnose) if diagnose else None
        progress = _progress() if mode == "sandbox" or model is not None else None
        result = run_eval(
            incidents, mode=mode, model=model, repeat=repeat, diagnose=fn, split=split, on_case=progress
        )
        if report is not None:
            from evals.report import markdown_report

            try:
                report.write_text(markdown_report(result), encoding="utf-8")
            except OSError as e:
                raise UserError(
                    f"{report}: cannot write the report ({e.strerror or e.__class__.__name__})"
                ) from None
        for warning in result.warnings:
            typer.echo(f"warning: {warning}", err=True)
        if as_json:
            sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
        else:
            from rich.console import Console

            from evals.report import render_tables

            render_tables(result, Console())
            if report is not None:
                typer.echo(f"report written to {report}")
        # sys.exit, not typer.Exit: the CLI runs click with standalone_mode=False, which returns
        # (and so drops) a typer.Exit's code instead of exiting with it.
        sys.exit(0 if result.all_passed else 1)


def _progress() -> Callable[[Any], None]:
    """One line per finished case on stderr (stdout stays the table, or the one JSON document)."""
    import sys

    done = [0]

    def on_case(case: Any) -> None:
        done[0] += 1
        verdict = "error" if case.error else "pass" if case.pass_ else "FAIL"
        got = case.category or "-"
        runs = f", {case.passes}/{case.runs} runs passed" if (case.runs or 1) > 1 else ""
        print(f"  case {done[0]}: {case.id}: {verdict} ({got}, {case.seconds:.1f} s{runs})", file=sys.stderr)
        sys.stderr.flush()

    return on_case


def _make_model(url: str) -> object:
    """The diagnosing model behind an OpenAI-compatible URL (resolved when the diagnosis asks it)."""
    from mcp_tools.model_endpoint import endpoint_from_settings
    from mcp_tools.settings import get_settings

    return endpoint_from_settings(get_settings(), url)


def _load_diagnoser(spec: str) -> Callable[..., Any]:
    """``MODULE:FUNCTION`` -> the function; a bad spec is one clear error."""
    import importlib

    from mcp_tools.errors import UserError

    module_name, _, func_name = spec.partition(":")
    if not module_name or not func_name:
        raise UserError(f"--diagnose must be MODULE:FUNCTION, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(f"--diagnose {spec}: cannot import {module_name} ({e})") from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise UserError(f"--diagnose {spec}: {module_name} has no function {func_name}")
    return fn  # type: ignore[no-any-return]
