"""What one simulated vLLM instance looks like under a given offered load: the numbers Cloud Monitoring
would have recorded, from the revision's serving config (``SimConfig``: the capacity planner's KV
tokens, ``--max-num-seqs``, decode speed) and a scenario's ``Timeline`` (offered load over time, a
slow leak, a stuck engine, a hot instance).

The load model is a closed loop, as the sandbox's own load generator drives it: ``offered``
clients each keep one request in flight. Cloud Run admits at most ``containerConcurrency`` per
instance (the rest get 429); vLLM runs at most ``max_num_seqs`` and at most what the KV cache holds
(the rest wait; a batch that outgrows the cache preempts); decode slows a little as the batch grows;
throughput follows from the batch and the per-request service time, queueing time from Little's law.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sandbox.vllm_sim.config import SimConfig

#: Prompt and output length of the simulated traffic (tokens).
PROMPT_TOKENS = 600
OUTPUT_TOKENS = 256
#: Cloud Run's default request timeout: a stuck request ends as a 504 after this long.
REQUEST_TIMEOUT_S = 300.0
#: The vLLM default the sandbox's engines run with.
GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class Timeline:
    """How a scenario's world changes over (simulated) time. Times are relative to ``anchor_s``, the
    sandbox's "now" when the scenario was built (``at(now)`` fixes it): the ramp ends there and the
    engine got stuck ``stuck_for_s`` before it, so the history a reader asks for holds them, and a
    revision that starts later (a restart) is not stuck."""

    base_load: float = 0.0  # offered concurrency (clients) at the start
    ramp_to: float | None = None  # offered concurrency reached at the anchor (linear over ramp_s)
    ramp_s: float = 1800.0
    leak_per_hour: float = 0.0  # host memory utilization growth per hour of an instance's life
    memory_base: float = 0.35
    stuck_for_s: float | None = None  # the engine stopped making progress this long before the anchor
    instances: int = 1
    weights: tuple[float, ...] = field(default=())  # share of the load per instance (default: even)
    prompt_tokens: int = PROMPT_TOKENS
    output_tokens: int = OUTPUT_TOKENS
    anchor_s: float | None = None  # simulated POSIX seconds (None: whatever "now" is when sampled)

    def at(self, now_s: float) -> Timeline:
        return replace(self, anchor_s=now_s)

    def offered(self, t: float, now_s: float) -> float:
        age = (self.anchor_s if self.anchor_s is not None else now_s) - t
        if self.ramp_to is None or age >= self.ramp_s:
            return self.base_load
        frac = 1.0 - max(0.0, age) / self.ramp_s
        return self.base_load + (self.ramp_to - self.base_load) * frac

    def share(self, i: int) -> float:
        if not self.weights:
            return 1.0 / max(1, self.instances)
        total = sum(self.weights) or 1.0
        return self.weights[i] / total if i < len(self.weights) else 0.0

    def stuck(self, t: float, started_s: float, now_s: float) -> bool:
        """The engine of an instance started at ``started_s`` makes no progress at ``t``."""
        if self.stuck_for_s is None:
            return False
        since = (self.anchor_s if self.anchor_s is not None else now_s) - self.stuck_for_s
        return started_s < since <= t


@dataclass
class State:
    """One instance's numbers at one moment (rates per second; latencies in seconds)."""

    offered: float
    in_flight: float
    running: float
    waiting: float
    kv_usage: float
    preemptions_per_s: float
    tokens_per_s: float
    prompt_tokens_per_s: float
    ok_per_s: float
    rejected_per_s: float
    errors_per_s: float
    ttft_s: float
    itl_s: float
    e2e_s: float
    cpu_util: float
    memory_util: float
    gpu_util: float
    gpu_memory_util: float


def instance_state(cfg: SimConfig, tl: Timeline, *, offered: float, t_s: float, stuck: bool = False) -> State:
    """The steady state of one instance offered ``offered`` concurrent clients, ``t_s`` into its life
    (``stuck``: its engine makes no progress)."""
    cc = cfg.container_concurrency or 1000
    in_flight = min(offered, float(cc))
    rejected = max(0.0, offered - in_flight) / 0.2  # a rejected client retries after ~0.2 s
    per_seq = tl.prompt_tokens + tl.output_tokens / 2
    fit = max(1.0, cfg.kv_cache_tokens / per_seq)
    want = min(in_flight, float(cfg.max_num_seqs))
    running = min(want, fit)
    kv = min(1.0, running * per_seq / cfg.kv_cache_tokens) if running else 0.0
    preempt = 0.0
    if want > fit:  # the batch outgrows the cache: the newest sequences are preempted and re-queued
        running = fit
        kv = min(1.0, 0.97 + 0.03 * min(1.0, (want - fit) / fit))
    itl = cfg.itl_s * (1.0 + 0.015 * running) or 0.001
    prefill = cfg.ttft_base_s + tl.prompt_tokens * cfg.prefill_s_per_token
    service_s = prefill + tl.output_tokens * itl
    ok = running / service_s if running else 0.0
    if want > fit and service_s > 0:
        preempt = (want - fit) / service_s
    waiting = max(0.0, in_flight - running)
    queue_s = waiting / ok if ok else 0.0
    memory = min(1.0, tl.memory_base + tl.leak_per_hour * t_s / 3600.0)
    gpu = min(1.0, 0.05 + 0.95 * running / max(1.0, float(cfg.max_num_seqs)) * 1.6) if running else 0.02
    errors = 0.0
    tokens = running / itl if running else 0.0
    if stuck:
        # the engine core makes no progress: the batch stays, nothing completes, no token is made;
        # clients give up at Cloud Run's request timeout (504)
        running = min(in_flight, float(cfg.max_num_seqs))
        waiting = max(0.0, in_flight - running)
        kv = min(1.0, running * per_seq / cfg.kv_cache_tokens)
        tokens = ok = preempt = 0.0
        errors = in_flight / REQUEST_TIMEOUT_S
        gpu = 0.0
        queue_s = REQUEST_TIMEOUT_S
    return State(
        offered=offered,
        in_flight=in_flight,
        running=running,
        waiting=waiting,
        kv_usage=kv,
        preemptions_per_s=preempt,
        tokens_per_s=tokens,
        prompt_tokens_per_s=ok * tl.prompt_tokens,
        ok_per_s=ok,
        rejected_per_s=rejected,
        errors_per_s=errors,
        ttft_s=prefill + queue_s,
        itl_s=itl,
        e2e_s=queue_s + service_s,
        cpu_util=min(1.0, 0.08 + 0.4 * (running / max(1.0, float(cfg.max_num_seqs)))),
        memory_util=memory,
        gpu_util=gpu,
        gpu_memory_util=GPU_MEMORY_UTILIZATION if running or kv else GPU_MEMORY_UTILIZATION * 0.98,
    )
