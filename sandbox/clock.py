"""The sandbox clock: simulated time that can run faster than real time.

``now()`` starts at the real wall-clock time when the clock is made and then advances
``time_scale`` simulated seconds per real second, so ``--time-scale 60`` turns a three-minute
cold start into three real seconds. Every timestamp the sandbox hands out (resource times, log
entries) is simulated time. Because the clock starts at "now", entries stay inside the 24-hour
``timestamp>=`` window the Python logging client adds to filters without one; a client that puts a
real-time *upper* bound on a query should read the sandbox clock (``GET /_sandbox/clock``) instead.
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
        self._lock = threading.Lock()

    def now_s(self) -> float:
        """Simulated POSIX seconds."""
        with self._lock:
            return self._anchor_sim + (time.monotonic() - self._anchor_real) * self.time_scale

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_s(), UTC)

    def advance(self, sim_seconds: float) -> None:
        """Jump the clock forward (tests, and scenarios that pre-age the world)."""
        with self._lock:
            self._anchor_sim += sim_seconds

    def real_seconds(self, sim_seconds: float) -> float:
        """How long ``sim_seconds`` of simulated time takes in real time."""
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
