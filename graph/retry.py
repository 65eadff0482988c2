"""Bounded retries with exponential backoff for calls to the outside world."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


def short_error(e: BaseException) -> str:
    """One line for a report: the class and the first line of the message, bounded."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = f"{e.__class__.__name__}: {msg}" if msg else e.__class__.__name__
    return text[:300]


def with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int = 3,
    base_delay_s: float = 0.5,
    max_delay_s: float = 8.0,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
) -> T:
    """``fn()``, tried up to ``attempts`` times with backoff; the last error propagates."""
    attempts = max(1, attempts)
    for i in range(attempts):
        try:
            return fn()
        except retry_on as e:
            if i == attempts - 1:
                raise
            delay = min(max_delay_s, base_delay_s * (2**i))
            log.info("%s failed (%s); retry %d/%d in %.2fs", what, short_error(e), i + 1, attempts - 1, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
