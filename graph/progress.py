"""Token progress: does the engine generate? A 1-token completion probe and the generation series.

``/health`` answers 200 from vLLM's API server while its engine core may be stuck, so neither the
observe step nor verify can take it as proof of progress. ``probe`` asks the endpoint for one token
(through ``mcp_tools.endpoint`` as every endpoint call goes), bounded by a short timeout, and records
what happened (``Probe``, kept in the observation). ``token_progress_ok`` is the check a fix of a
hung engine is verified by: a probe that returns a token in time and, when Cloud Monitoring's
generation-token series were read, a recent period with tokens generated.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from mcp_tools.monitoring import SeriesSet

#: The probe's prompt: any text; one token is asked for.
PROBE_PROMPT = "ok"
#: A generation rate at or under this (tokens/s) is no progress.
FLAT_TOKENS_PER_S = 0.05


class Probe(BaseModel):
    """One 1-token completion asked of the endpoint while observing."""

    ok: bool  # a completion came back in time
    timed_out: bool = False
    seconds: float = 0.0
    timeout_s: float = 0.0
    tokens: int | None = None  # completion tokens the server reported
    error: str | None = None  # one line, when it failed otherwise
    skipped: str | None = None  # why no probe was sent (ok and timed_out are then False)

    def line(self) -> str:
        if self.skipped:
            return f"probe: not sent ({self.skipped})"
        if self.ok:
            return f"probe: a 1-token completion answered in {self.seconds:.2f} s"
        if self.timed_out:
            return f"probe: a 1-token completion did not answer within {self.timeout_s:g} s"
        return f"probe: a 1-token completion failed ({self.error})"


def probe(ep: Any, timeout_s: float) -> Probe:
    """Ask ``ep`` (``graph.world.SyncEndpoint``) for one token within ``timeout_s``."""
    from mcp_tools.errors import short_error

    t0 = time.monotonic()
    try:
        reply = ep.chat([{"role": "user", "content": PROBE_PROMPT}], max_tokens=1, timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - every failure is recorded, none raised
        why = short_error(e)
        took = round(time.monotonic() - t0, 3)
        timed_out = "did not answer within" in why or "timeout" in why.lower() or took >= timeout_s * 0.95
        return Probe(ok=False, timed_out=timed_out, seconds=took, timeout_s=timeout_s, error=why[:200])
    stats = getattr(reply, "stats", None)
    tokens = getattr(stats, "completion_tokens", None)
    return Probe(ok=True, seconds=round(time.monotonic() - t0, 3), timeout_s=timeout_s, tokens=tokens)


def tokens_flowing(ss: SeriesSet | None, minutes: float) -> bool | None:
    """Whether any instance reporting now generated tokens in the last ``minutes`` (None: no series)."""
    if ss is None:
        return None
    from graph.slo import newest
    from mcp_tools.monitoring import _epoch

    series = ss.by_key("generation_tokens_rate")
    if not series:
        return None
    end = newest(ss)
    since = end - max(minutes * 60.0, ss.period_s)
    return any(p.v > FLAT_TOKENS_PER_S for s in series for p in s.points if _epoch(p.t) > since)


def token_progress_ok(
    ep: Any,
    *,
    timeout_s: float,
    series: SeriesSet | None = None,
    minutes: float = 3.0,
) -> tuple[bool, str]:
    """The engine makes progress: a 1-token probe answers with a token within ``timeout_s``, or
    ``series`` (read after the fix) show an instance generating tokens in the last ``minutes``.
    ``/health`` is not asked: it answers while a stuck engine makes nothing. Returns (ok, why)."""
    p = probe(ep, timeout_s)
    flowing = tokens_flowing(series, minutes)
    said = f"series: {'tokens' if flowing else 'no tokens'} generated in the last {minutes:g} min"
    if p.ok and p.tokens != 0:
        return True, p.line() + (f"; {said}" if flowing is not None else "")
    why = p.line() if not p.ok else "probe: the completion came back with no token generated"
    if flowing:
        return True, f"{said} (although {why})"
    return False, why + (f"; {said}" if flowing is not None else "")


def check_progress(world: Any, ep: Any, cfg: Any) -> tuple[bool, str]:
    """``token_progress_ok`` for the loop's verify step: the probe bounded by ``cfg.probe_timeout_s``
    (8 s when probes are off), the generation series of the last minutes when Monitoring is read."""
    from datetime import UTC, datetime

    minutes = cfg.slo.hung_minutes
    series = None
    if cfg.monitoring_wanted:
        try:
            from mcp_tools.monitoring import read_series

            series = read_series(
                cfg.service,
                settings=world.settings,
                policy=world.policy,
                keys=["generation_tokens_rate"],
                window_s=max(cfg.series_period_s * 2, minutes * 60.0),
                period_s=cfg.series_period_s,
                end=datetime.now(UTC),
            )
        except Exception:  # noqa: BLE001 - the probe still decides
            series = None
    return token_progress_ok(ep, timeout_s=cfg.probe_timeout_s or 8.0, series=series, minutes=minutes)
