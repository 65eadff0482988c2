"""Many callers at once, as many processes or connections would be."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def at_once(fn: Callable[[int], T], n: int = 8) -> list[T]:
    """Run ``fn(0) .. fn(n - 1)`` on ``n`` threads released together; their results, in no order."""
    start = threading.Barrier(n)
    results: list[T] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        start.wait()
        out = fn(i)
        with lock:
            results.append(out)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results
