"""Fault injection shared by the sandbox's emulated endpoints.

A :class:`FaultInjector` holds a list of armed faults. An endpoint calls :meth:`FaultInjector.take`
once per request with the names it answers to (its path, its revision, ...); the first armed fault
whose target matches is consumed and returned, and the endpoint acts it out:

- ``status``: answer with that HTTP status (and an error body) instead of doing the work;
- ``hang``: send nothing until the client gives up (or ``seconds`` pass, then answer normally);
- ``drop``: close the connection: mid-stream for a streaming request, without any response otherwise;
- ``slow``: not per request: the next revision that starts serving under the target (a service id
  or a revision name) is ``factor`` times slower to its first token (a fix that passes ``/health``
  but regresses TTFT). Taken when the revision's simulated server is built (:meth:`FaultInjector.slowdown`).

A target is one name, ``*``, or names joined by ``+`` (``rev-00001-abc+/v1/completions``): such a
fault matches only a request that answers to every one of them (one revision's generation, not its
``/health``: a stuck engine).

Everything is plain data guarded by a lock, so the sandbox may arm faults from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from starlette.requests import Request

FaultKind = Literal["status", "hang", "drop", "slow"]

#: The kinds an endpoint acts out per request (``slow`` is taken when a revision starts serving).
REQUEST_KINDS = ("status", "hang", "drop")

#: Matches every request.
ANY = "*"


class Fault(BaseModel):
    """One armed fault. ``remaining`` None means it fires until cleared."""

    target: str = ANY
    kind: FaultKind
    status: int = 503
    remaining: int | None = 1
    seconds: float | None = None  # hang: give up hanging after this long (None: until the client leaves)
    after_tokens: int | None = None  # drop: tokens streamed before the connection is cut (None: half)
    factor: float = 1.0  # slow: how many times slower the revision's time to first token is
    fired: int = Field(default=0)


class FaultInjector:
    """Armed faults, consumed by endpoints per request. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def inject(
        self,
        target: str = ANY,
        kind: FaultKind = "status",
        status: int = 503,
        count: int | None = 1,
        *,
        seconds: float | None = None,
        after_tokens: int | None = None,
        factor: float = 1.0,
    ) -> Fault:
        """Arm a fault for the next ``count`` matching requests (``None``: until :meth:`clear`); a
        ``slow`` fault for the next ``count`` revisions that start serving under ``target``."""
        if kind not in (*REQUEST_KINDS, "slow"):
            raise ValueError(f"fault kind must be status, hang, drop or slow, not {kind!r}")
        if kind == "slow" and not 1.0 <= factor <= 100.0:
            raise ValueError(f"a slow fault's factor must be from 1 to 100, not {factor}")
        if count is not None and count < 1:
            raise ValueError(f"fault count must be at least 1 (or None for unlimited), not {count}")
        if kind == "status" and not 100 <= status <= 599:
            raise ValueError(f"fault status must be an HTTP status code, not {status}")
        fault = Fault(
            target=target,
            kind=kind,
            status=status,
            remaining=count,
            seconds=seconds,
            after_tokens=after_tokens,
            factor=factor,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self, target: str | None = None) -> None:
        """Disarm every fault (or only those armed for ``target``)."""
        with self._lock:
            self._faults = [f for f in self._faults if target is not None and f.target != target]

    def pending(self) -> list[Fault]:
        with self._lock:
            return [f.model_copy() for f in self._faults]

    def take(self, names: Iterable[str], kinds: Iterable[str] = REQUEST_KINDS) -> Fault | None:
        """The first armed fault of one of ``kinds`` whose target is ``*`` or one of ``names``,
        consumed once; else None."""
        if not self._faults:  # fast path without the lock: the common case is nothing armed
            return None
        wanted = set(names)
        allowed = set(kinds)
        with self._lock:
            for i, f in enumerate(self._faults):
                if f.kind in allowed and (f.target == ANY or f.target in wanted or _all_of(f.target, wanted)):
                    f.fired += 1
                    if f.remaining is not None:
                        f.remaining -= 1
                        if f.remaining <= 0:
                            del self._faults[i]
                    return f.model_copy()
        return None

    def slowdown(self, service: str, revision: str) -> float:
        """The TTFT factor of a revision that starts serving now: 1.0 unless a ``slow`` fault is armed
        for its service, its name or ``*`` (consumed as a request's fault is)."""
        f = self.take((service, revision), kinds=("slow",))
        return f.factor if f is not None else 1.0


def _all_of(target: str, names: set[str]) -> bool:
    return "+" in target and all(part in names for part in target.split("+"))


GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")


def stall_generation(faults: FaultInjector, revision: str) -> list[Fault]:
    """A stuck engine on ``revision``: its completions hang (no token, ever) while ``/health`` and
    ``/metrics`` still answer. A new revision (a restart) is not affected."""
    return [faults.inject(f"{revision}+{p}", "hang", count=None) for p in GENERATION_PATHS]


async def wait_disconnect(request: Request, seconds: float | None) -> None:
    """Act out a ``hang``: send nothing until the client leaves (or ``seconds`` pass)."""

    async def _until_gone() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_until_gone(), timeout=seconds)
