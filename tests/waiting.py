"""Waiting for state: poll a condition until it holds or a deadline passes (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _failure(what: str | Callable[[], str], timeout_s: float) -> AssertionError:
    return AssertionError(f"{what if isinstance(what, str) else what()} (waited {timeout_s:g} s)")


def wait_until(
    check: Callable[[], T | None],
    what: str | Callable[[], str],
    *,
    timeout_s: float = 60,
    every_s: float = 0.05,
) -> T:
    """``check()``'s first truthy value, polled every ``every_s`` seconds; after ``timeout_s`` an
    AssertionError naming ``what`` (a callable: what to say, read when it fails)."""
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s)
        time.sleep(every_s)
    return got


async def await_until(
    check: Callable[[], T | None],
    what: str | Callable[[], str],
    *,
    timeout_s: float = 60,
    every_s: float = 0.001,
) -> T:
    """``wait_until`` in an event loop: ``check()`` polled between ``asyncio.sleep(every_s)``."""
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s)
        await asyncio.sleep(every_s)
    return got
