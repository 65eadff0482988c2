"""Bounded numbers for the CLI's options: one mechanism for every numeric flag.

``typer.Option(1, "--repeat", parser=bounded(int, 1, 100))``: NaN, infinity, non-numbers and values
out of range are one usage error (exit 2, one line) that names the flag and the range; the check is
``mcp_tools.numbers.check_number``, the one the settings, list parsers and tool arguments use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from mcp_tools.errors import UserError
from mcp_tools.numbers import check_number


def bounded(
    kind: type, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
) -> Callable[[Any], Any]:
    """A typer ``parser`` for an ``int``/``float`` option within [lo, hi] (``lo_open``: above lo)."""

    def parse(value: Any) -> Any:
        if value is None:
            return None
        try:
            return check_number(value, "value", lo=lo, hi=hi, lo_open=lo_open, integer=kind is int)
        except UserError as e:
            raise typer.BadParameter(str(e).removeprefix("value: ")) from None

    return parse


def http_url(value: Any) -> Any:
    """A typer ``parser`` for an option that names an http(s) endpoint (``--model-url``, ``--url``)."""
    if value is None or value == "":
        return None
    from mcp_tools.settings import check_http_url

    try:
        return check_http_url(str(value), "value")
    except UserError as e:
        raise typer.BadParameter(str(e).removeprefix("value: ")) from None


# -- options several commands take, each declared once (its flag, its check, its help) ---------------


def approver_option() -> Any:
    """``--approver``: who decides, beside the OS user name (run, demo, repl, approve, reject)."""
    return typer.Option(None, "--approver", help="A name noted beside your OS user name on the decision.")


def policy_option() -> Any:
    """``--policy``: how far the loop may go on its own (run, watch, repl)."""
    return typer.Option(
        None, "--policy", help="read-only, suggest, approve (default) or auto (GEMMA_SRE_POLICY)."
    )


def model_url_option(default: str) -> Any:
    """``--model-url``: the diagnosing model; ``default`` says what is used without it."""
    return typer.Option(
        None,
        "--model-url",
        parser=http_url,
        help=f"OpenAI-compatible endpoint of the diagnosing model (default: {default}).",
    )


def time_scale_option(default: float, flag: str) -> Any:
    """The sandbox's clock: simulated seconds per real second (``sandbox``, ``bench --sandbox``)."""
    return typer.Option(
        default,
        flag,
        parser=bounded(float, 0, 10_000, lo_open=True),
        help="Sandbox clock: simulated seconds per real second.",
    )


def zero_latency_option(flag: str) -> Any:
    """The sandbox's endpoints answer without any delay (``sandbox``, ``bench --sandbox``)."""
    return typer.Option(False, flag, help="Sandbox endpoints answer without any delay.")
