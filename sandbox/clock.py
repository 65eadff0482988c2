"""The sandbox clock: simulated time that runs faster than real time while something is starting.

``now()`` starts at the real wall-clock time when the clock is made. While a revision is starting
(``fast_until(t)`` was called with a simulated deadline still ahead), simulated time advances
``time_scale`` seconds per real second, so ``--time-scale 60`` turns a three-minute cold start into
three real seconds; otherwise it advances at the real rate. So the sandbox clock runs ahead of the
real one only by the start-ups it fast-forwarded (a few minutes per rollout), not by
``time_scale`` x the session. Every timestamp the sandbox hands out is simulated time; entries stay
inside the 24-hour ``timestamp>=`` window the Python logging client adds to filters without one, and
an upper bound at the real "now" is read as the sandbox's now (see ``LogStore``). ``GET
/_sandbox/clock`` tells the time.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    def __init__(self, time_scale: float = 60.0, start: datetime | None = None) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, not {time_scale}")
        self.time_scale = float(time_scale)
        self._anchor_real = time.monotonic()
        self._anchor_sim = (start or datetime.now(UTC)).timestamp()
        self._fast_until = float("-inf")
        self._lock = threading.Lock()

    def _now_locked(self, real: float) -> float:
        dr = real - self._anchor_real
        s0 = self._anchor_sim
        if s0 >= self._fast_until:
            return s0 + dr
        fast_real = (self._fast_until - s0) / self.time_scale
        if dr <= fast_real:
            return s0 + dr * self.time_scale
        return self._fast_until + (dr - fast_real)

    def _reanchor(self) -> None:
        real = time.monotonic()
        self._anchor_sim = self._now_locked(real)
        self._anchor_real = real

    def now_s(self) -> float:
        """Simulated POSIX seconds."""
        with self._lock:
            return self._now_locked(time.monotonic())

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_s(), UTC)

    def fast_until(self, sim_deadline: float) -> None:
        """Run at ``time_scale`` until simulated time reaches ``sim_deadline`` (deadlines only extend)."""
        with self._lock:
            self._reanchor()
            self._fast_until = max(self._fast_until, sim_deadline)

    @property
    def fast(self) -> bool:
        return self.now_s() < self._fast_until

    def advance(self, sim_seconds: float) -> None:
        """Jump the clock forward (tests, and scenarios that pre-age the world)."""
        with self._lock:
            self._reanchor()
            self._anchor_sim += sim_seconds

    def real_seconds(self, sim_seconds: float) -> float:
        """How long ``sim_seconds`` of simulated time takes in real time while fast-forwarding."""
        return sim_seconds / self.time_scale


def rfc3339(ts: float) -> str:
    """Google's timestamp wire format (UTC, microseconds, 'Z')."""
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Parse the timestamp spellings clients send: RFC 3339 with 'Z', '+00:00' or '+0000', or a date."""
    s = text.strip()
    if not s:
        raise ValueError("empty timestamp")
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    # '+0000' (what google-cloud-logging's 24-hour default filter sends) -> '+00:00'
    if len(s) >= 5 and s[-5] in "+-" and s[-4:].isdigit() and ":" not in s[-5:]:
        s = s[:-2] + ":" + s[-2:]
    # Python accepts at most 6 fractional digits; Google sends up to 9.
    if "." in s:
        head, _, rest = s.partition(".")
        digits = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            digits += rest[i]
            i += 1
        s = f"{head}.{(digits[:6] or '0')}{rest[i:]}"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def duration_s(text: str) -> float:
    """A protobuf Duration in JSON ('240s', '1.5s')."""
    s = text.strip()
    if not s.endswith("s"):
        raise ValueError(f"not a duration: {text!r}")
    return float(s[:-1])


__all__ = ["SimClock", "duration_s", "parse_time", "rfc3339", "timedelta"]
