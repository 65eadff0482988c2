"""One check for every number a person gives (a flag, a setting, a list item, a tool argument).

NaN and infinity are refused everywhere; so is a value outside the documented range. The message
is one line that names what was given (``--repeat``, ``GEMMA_SRE_MCP_CONFIRM_TTL_S``) and the range.
``agent/params.py`` wraps it as a click parameter type for the CLI's options; the settings use
pydantic's own bounds (``allow_inf_nan=False``, ``gt``/``le``).
"""

from __future__ import annotations

import math

from mcp_tools.errors import UserError


def _fmt(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def describe_range(lo: float | None, hi: float | None, *, lo_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f"{'above' if lo_open else 'from'} {_fmt(lo)} {'and at most' if lo_open else 'to'} {_fmt(hi)}"
    if lo is not None:
        return f"{'above' if lo_open else 'at least'} {_fmt(lo)}"
    if hi is not None:
        return f"at most {_fmt(hi)}"
    return "a finite number"


def check_number(
    value: float | int | str,
    what: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
) -> float | int:
    """``value`` (a number, or text to read as one) when finite and in range; else a ``UserError``."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text) if not integer or not text.lstrip("+-").isdigit() else int(text)
        except ValueError:
            raise UserError(f"{what}: {text!r} is not {kind}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{what}: {value!r} is not {kind}")
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise UserError(f"{what}: {value!r} is not {kind}")
        value = int(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{what}: {value} is not a finite number")
    low = lo is not None and (value <= lo if lo_open else value < lo)
    if low or (hi is not None and value > hi):
        raise UserError(
            f"{what}: {_fmt(value)} is out of range (must be {describe_range(lo, hi, lo_open=lo_open)})"
        )
    return value
