"""The scheduler of one simulated vLLM server: a FIFO waiting queue, at most ``max_num_seqs``
running, KV accounting, preemption of the newest sequence when a token does not fit."""

from __future__ import annotations

import asyncio
from collections import deque

from sandbox.vllm_sim.config import SimConfig
from sandbox.vllm_sim.metrics import Metrics


class Seq:
    __slots__ = ("prompt_tokens", "max_tokens", "generated", "fut", "running", "queued", "epoch", "admitted")

    def __init__(self, prompt_tokens: int, max_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.generated = 0
        self.fut: asyncio.Future[None] | None = None
        self.running = False
        self.queued = False
        self.epoch = 0  # bumped on every preemption
        self.admitted = False


class Engine:
    """The scheduler: a FIFO waiting queue, at most ``max_num_seqs`` running, KV accounting, preemption.

    Single event loop, no threads: every method runs on the loop that serves the app.
    """

    def __init__(self, config: SimConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.waiting: deque[Seq] = deque()
        self.running: dict[int, Seq] = {}  # insertion order = admission order; last = newest
        self.kv_used = 0

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.config.kv_cache_tokens)

    def _admit(self) -> None:
        cap = self.config.kv_cache_tokens
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            need = seq.prompt_tokens + seq.generated + 1
            if self.running and self.kv_used + need > cap:
                break  # wait for KV to free up (an empty engine admits anyway: nothing to wait for)
            self.waiting.popleft()
            seq.queued = False
            self.running[id(seq)] = seq
            seq.running = True
            seq.admitted = True
            self.kv_used += seq.prompt_tokens + seq.generated
            if seq.fut is not None and not seq.fut.done():
                seq.fut.set_result(None)

    async def acquire(self, seq: Seq) -> bool:
        """Queue ``seq`` (at the back, or the front after a preemption) and wait until it runs.

        Returns True when it had to wait."""
        if not seq.running and not seq.queued:
            if seq.admitted:
                self.waiting.appendleft(seq)
            else:
                self.waiting.append(seq)
            seq.queued = True
            self._admit()
        if not seq.running:
            seq.fut = asyncio.get_running_loop().create_future()
            try:
                await seq.fut
            finally:
                seq.fut = None
            return True
        return False

    def _preempt(self, victim: Seq) -> None:
        del self.running[id(victim)]
        victim.running = False
        self.kv_used -= victim.prompt_tokens + victim.generated
        victim.epoch += 1
        victim.queued = True
        self.waiting.appendleft(victim)
        self.metrics.preemptions += 1

    def add_token(self, seq: Seq) -> bool:
        """Grow ``seq`` by one token; preempt the newest running sequences until it fits.

        Returns False when ``seq`` itself was preempted (no token produced).
        """
        cap = self.config.kv_cache_tokens
        while self.kv_used + 1 > cap and len(self.running) > 1:
            victim = self.running[next(reversed(self.running))]
            self._preempt(victim)
            if victim is seq:
                return False
        seq.generated += 1
        self.kv_used += 1
        return True

    def release(self, seq: Seq) -> None:
        if seq.running:
            del self.running[id(seq)]
            seq.running = False
            self.kv_used -= seq.prompt_tokens + seq.generated
        elif seq.queued:
            self.waiting.remove(seq)
            seq.queued = False
        self._admit()
