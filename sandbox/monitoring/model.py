"""Cloud Monitoring's state in the sandbox: a bounded history of samples per instance, taken on the
simulator's clock, and the raw time series they make (moto's shape: no wire format here).

Every ``STEP_S`` of simulated time each instance of each serving revision is sampled: its numbers
come from ``physics.instance_state`` (the revision's ``SimConfig``: the capacity planner's KV
tokens, ``--max-num-seqs``, decode speed) under the offered load the scenario's ``Timeline`` says,
or the live load the revision's simulated vLLM server is carrying, whichever is larger. Samples are
taken lazily (``catch_up``, before every read), so a scenario's pre-aged history is there on the
first read. Each instance keeps at most ``RING`` samples.

Raw series (what ``timeSeries.list`` without aggregation returns):

- vLLM's Prometheus metrics as Managed Service for Prometheus stores them: resource
  ``prometheus_target`` {project_id, location, cluster="__run__", namespace=<service>, job, instance},
  metric label ``model_name``; gauges GAUGE/DOUBLE, counters CUMULATIVE/DOUBLE (``..._total/counter``),
  histograms CUMULATIVE/DISTRIBUTION with vLLM's bucket bounds.
- Cloud Run's built-in metrics: resource ``cloud_run_revision`` {project_id, service_name,
  revision_name, location, configuration_name}; request_count DELTA/INT64 by response_code(_class),
  request_latencies DELTA/DISTRIBUTION (ms), container/instance_count GAUGE/INT64 by state,
  max_request_concurrencies and cpu / memory / gpu / gpu-memory utilizations DELTA/DISTRIBUTION
  over the revision's instances, startup_latencies DELTA/DISTRIBUTION (ms) once per instance start.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.monitoring.physics import State, Timeline, instance_state
from sandbox.vllm_sim.metrics import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS

STEP_S = 30.0
RING = 2880  # samples per instance: a day at STEP_S
MAX_CATCH_UP_S = 12 * 3600.0  # never sample more than this in one catch-up

PROM = "prometheus.googleapis.com/"
RUN = "run.googleapis.com/"

GAUGE, DELTA, CUMULATIVE = "GAUGE", "DELTA", "CUMULATIVE"
DOUBLE, INT64, DISTRIBUTION = "DOUBLE", "INT64", "DISTRIBUTION"

MS_BOUNDS: tuple[float, ...] = tuple(round(1.4**i, 3) for i in range(64))
RATIO_BOUNDS: tuple[float, ...] = tuple(round(i / 100, 2) for i in range(1, 101))
CONCURRENCY_BOUNDS: tuple[float, ...] = tuple(float(2**i) for i in range(12))


@dataclass
class Dist:
    """A distribution value: explicit bucket bounds, counts (len(bounds) + 1), the values' sum."""

    bounds: tuple[float, ...]
    counts: list[float]
    total: float = 0.0
    lo: float = math.inf  # the smallest and largest value seen (percentiles stay inside them)
    hi: float = -math.inf

    @classmethod
    def empty(cls, bounds: tuple[float, ...]) -> Dist:
        return cls(bounds, [0.0] * (len(bounds) + 1))

    @property
    def count(self) -> float:
        return sum(self.counts)

    @property
    def mean(self) -> float:
        c = self.count
        return self.total / c if c else 0.0

    def add(self, value: float, n: float = 1.0) -> None:
        if n <= 0:
            return
        from bisect import bisect_left

        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n
        self.lo = min(self.lo, value)
        self.hi = max(self.hi, value)

    def merge(self, other: Dist) -> Dist:
        if other.bounds != self.bounds:
            raise ValueError("distributions with different buckets")
        return Dist(self.bounds, [a + b for a, b in zip(self.counts, other.counts, strict=True)],
                    self.total + other.total, min(self.lo, other.lo), max(self.hi, other.hi))  # fmt: skip

    def minus(self, other: Dist) -> Dist:
        return Dist(self.bounds, [max(0.0, a - b) for a, b in zip(self.counts, other.counts, strict=True)],
                    max(0.0, self.total - other.total), self.lo, self.hi)  # fmt: skip

    def percentile(self, q: float) -> float:
        """The q-th percentile (0-100), interpolated inside its bucket."""
        total = self.count
        if total <= 0:
            return 0.0
        rank = total * q / 100.0
        acc = 0.0
        for i, c in enumerate(self.counts):
            if c <= 0:
                continue
            if acc + c >= rank:
                lo = self.bounds[i - 1] if i > 0 else 0.0
                hi = self.bounds[i] if i < len(self.bounds) else lo
                frac = (rank - acc) / c
                return min(max(lo + (hi - lo) * frac, self.lo), self.hi)
            acc += c
        return self.hi


def _spread(d: Dist, value: float, n: float) -> None:
    """``n`` observations around ``value`` (a request mix is never one number)."""
    for f, w in ((0.6, 0.25), (1.0, 0.5), (1.6, 0.2), (2.5, 0.05)):
        d.add(value * f, n * w)


@dataclass
class Sample:
    t: float
    state: State
    # increments since the previous sample
    d_tokens: float
    d_prompt: float
    d_preempt: float
    d_ok: float
    d_rejected: float
    d_errors: float
    d_ttft: Dist
    d_itl: Dist
    d_e2e: Dist
    # totals since the instance started (Prometheus counters)
    tokens: float
    prompt: float
    preempt: float
    ok: float


@dataclass
class Instance:
    key: tuple[str, str, str]  # project, location, service
    revision: str
    index: int
    instance_id: str
    started_s: float
    startup_ms: float
    model_name: str
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=RING))
    # histogram totals of the samples that fell off the ring (so cumulative values stay right)
    base_ttft: Dist = field(default_factory=lambda: Dist.empty(TTFT_BUCKETS))
    base_itl: Dist = field(default_factory=lambda: Dist.empty(ITL_BUCKETS))
    base_e2e: Dist = field(default_factory=lambda: Dist.empty(E2E_BUCKETS))
    last_t: float = 0.0

    def push(self, s: Sample) -> None:
        if len(self.samples) == self.samples.maxlen:
            old = self.samples[0]
            self.base_ttft = self.base_ttft.merge(old.d_ttft)
            self.base_itl = self.base_itl.merge(old.d_itl)
            self.base_e2e = self.base_e2e.merge(old.d_e2e)
        self.samples.append(s)
        self.last_t = s.t


@dataclass
class SeriesHead:
    """What a time series is, apart from its points: its metric, kind, labels, resource and unit."""

    metric_type: str
    kind: str
    value_type: str
    metric_labels: dict[str, str]
    resource_type: str
    resource_labels: dict[str, str]
    unit: str


@dataclass
class RawSeries(SeriesHead):
    """One raw time series: labels and points ``(start, end, value, delta)``, oldest first. For a
    cumulative metric ``value`` is the running total and ``delta`` the increase since the previous
    point; for gauge and delta metrics ``delta`` is ``value``."""

    points: list[tuple[float, float, Any, Any]]


@dataclass(frozen=True)
class Descriptor:
    kind: str
    value_type: str
    unit: str


_PROM_GAUGES = {
    "vllm:num_requests_running": lambda s: s.state.running,
    "vllm:num_requests_waiting": lambda s: s.state.waiting,
    "vllm:kv_cache_usage_perc": lambda s: s.state.kv_usage,
    "vllm:gpu_cache_usage_perc": lambda s: s.state.kv_usage,
}
_PROM_COUNTERS = {
    "vllm:num_preemptions_total": ("preempt", "d_preempt"),
    "vllm:generation_tokens_total": ("tokens", "d_tokens"),
    "vllm:prompt_tokens_total": ("prompt", "d_prompt"),
    "vllm:request_success_total": ("ok", "d_ok"),
}
_PROM_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("base_ttft", "d_ttft"),
    "vllm:inter_token_latency_seconds": ("base_itl", "d_itl"),
    "vllm:time_per_output_token_seconds": ("base_itl", "d_itl"),
    "vllm:e2e_request_latency_seconds": ("base_e2e", "d_e2e"),
}
_RUN_UTIL = {
    "container/cpu/utilizations": "cpu_util",
    "container/memory/utilizations": "memory_util",
    "container/gpu/utilizations": "gpu_util",
    "container/gpu/memory_utilizations": "gpu_memory_util",
}

DESCRIPTORS: dict[str, Descriptor] = {
    **{f"{PROM}{n}/gauge": Descriptor(GAUGE, DOUBLE, "1") for n in _PROM_GAUGES},
    **{f"{PROM}{n}/counter": Descriptor(CUMULATIVE, DOUBLE, "1") for n in _PROM_COUNTERS},
    **{f"{PROM}{n}/histogram": Descriptor(CUMULATIVE, DISTRIBUTION, "s") for n in _PROM_HISTOGRAMS},
    f"{RUN}request_count": Descriptor(DELTA, INT64, "1"),
    f"{RUN}request_latencies": Descriptor(DELTA, DISTRIBUTION, "ms"),
    f"{RUN}container/instance_count": Descriptor(GAUGE, INT64, "1"),
    f"{RUN}container/max_request_concurrencies": Descriptor(DELTA, DISTRIBUTION, "1"),
    f"{RUN}container/startup_latencies": Descriptor(DELTA, DISTRIBUTION, "ms"),
    **{f"{RUN}{n}": Descriptor(DELTA, DISTRIBUTION, "10^2.%") for n in _RUN_UTIL},
}


def instance_id(revision: str, index: int) -> str:
    """The instance id the sandbox's logs use for instance 0 of a revision, and siblings after it."""
    seed = revision if index == 0 else f"{revision}/{index}"
    return hashlib.sha256(seed.encode()).hexdigest()[:64]


class MonitoringBackend:
    """The sampled history of every instance, and the raw series of a metric type. Thread-safe."""

    def __init__(
        self, clock: Any, cloudrun: Any, *, timeline: Callable[[str], Timeline] | None = None
    ) -> None:
        self.clock = clock
        self.cloudrun = cloudrun
        self.timeline_for = timeline or (lambda service: Timeline())
        self.lock = threading.RLock()
        self.instances: dict[tuple[str, int], Instance] = {}  # (revision, index) -> instance

    # ------------------------------------------------------------------------------ sampling
    def catch_up(self) -> None:
        """Sample every serving instance up to now (simulated)."""
        self.cloudrun.advance()
        now = self.clock.now_s()
        with self.cloudrun.lock:
            serving = []
            for key, revs in self.cloudrun.revisions.items():
                shares = dict(self.cloudrun.serving_revisions(key))
                for rev in revs.values():
                    if rev.state == "ready" and rev.outcome.sim_config is not None:
                        serving.append((key, rev, shares.get(rev.short, 0) / 100.0))
        with self.lock:
            for key, rev, share in serving:
                tl = self.timeline_for(key[2])
                cfg = rev.outcome.sim_config
                for i in range(max(1, tl.instances)):
                    inst = self.instances.get((rev.short, i))
                    if inst is None:
                        inst = Instance(
                            key=key,
                            revision=rev.short,
                            index=i,
                            instance_id=instance_id(rev.short, i),
                            started_s=rev.settle_s,
                            startup_ms=max(1.0, rev.outcome.duration_s * 1000.0),
                            model_name=cfg.served_model_name,
                            last_t=rev.settle_s,
                        )
                        self.instances[(rev.short, i)] = inst
                    if share <= 0:
                        inst.last_t = max(inst.last_t, now - STEP_S)  # scaled to zero: no samples
                        continue
                    live = float(getattr(rev.sim, "in_flight", 0) or 0) if i == 0 else 0.0
                    self._sample(inst, cfg, tl, share, now, live)

    def _sample(self, inst: Instance, cfg: Any, tl: Timeline, share: float, now: float, live: float) -> None:
        t = max(inst.last_t + STEP_S, now - MAX_CATCH_UP_S)
        prev = inst.samples[-1] if inst.samples else None
        while t <= now:
            offered = max(tl.offered(t, now) * share * tl.share(inst.index), 0.0)
            if now - t < STEP_S:
                offered = max(offered, live)
            stuck = tl.stuck(t, inst.started_s, now)
            st = instance_state(cfg, tl, offered=offered, t_s=t - inst.started_s, stuck=stuck)
            dt = STEP_S if prev is not None else min(STEP_S, max(1.0, t - inst.started_s))
            d_ttft, d_itl, d_e2e = Dist.empty(TTFT_BUCKETS), Dist.empty(ITL_BUCKETS), Dist.empty(E2E_BUCKETS)
            n_ok = st.ok_per_s * dt
            _spread(d_ttft, st.ttft_s, n_ok)
            _spread(d_e2e, st.e2e_s, n_ok)
            _spread(d_itl, st.itl_s, st.tokens_per_s * dt)
            s = Sample(
                t=t,
                state=st,
                d_tokens=st.tokens_per_s * dt,
                d_prompt=st.prompt_tokens_per_s * dt,
                d_preempt=st.preemptions_per_s * dt,
                d_ok=n_ok,
                d_rejected=st.rejected_per_s * dt,
                d_errors=st.errors_per_s * dt,
                d_ttft=d_ttft,
                d_itl=d_itl,
                d_e2e=d_e2e,
                tokens=(prev.tokens if prev else 0.0) + st.tokens_per_s * dt,
                prompt=(prev.prompt if prev else 0.0) + st.prompt_tokens_per_s * dt,
                preempt=(prev.preempt if prev else 0.0) + st.preemptions_per_s * dt,
                ok=(prev.ok if prev else 0.0) + n_ok,
            )
            inst.push(s)
            prev = s
            t += STEP_S

    # ------------------------------------------------------------------------------ raw series
    def known(self, metric_type: str) -> bool:
        return metric_type in DESCRIPTORS

    def raw_series(self, project: str, metric_type: str, start: float, end: float) -> list[RawSeries]:
        """Every raw series of ``metric_type`` in ``project`` with points ending in (start, end]."""
        self.catch_up()
        d = DESCRIPTORS[metric_type]
        with self.lock:
            insts = [i for i in self.instances.values() if i.key[0] == project]
            if metric_type.startswith(PROM):
                return [s for i in insts if (s := self._prom(i, metric_type, d, start, end)) is not None]
            by_rev: dict[str, list[Instance]] = {}
            for i in insts:
                by_rev.setdefault(i.revision, []).append(i)
            out: list[RawSeries] = []
            for group in by_rev.values():
                out += self._run(group, metric_type[len(RUN) :], d, start, end)
            return out

    def _prom(
        self, inst: Instance, metric_type: str, d: Descriptor, start: float, end: float
    ) -> RawSeries | None:
        name, _, _kind = metric_type[len(PROM) :].rpartition("/")
        project, location, service = inst.key
        pts: list[tuple[float, float, Any, Any]] = []
        if name in _PROM_GAUGES:
            get = _PROM_GAUGES[name]
            pts = [(s.t, s.t, get(s), get(s)) for s in inst.samples if start < s.t <= end]
        elif name in _PROM_COUNTERS:
            total, delta = _PROM_COUNTERS[name]
            pts = [(inst.started_s, s.t, getattr(s, total), getattr(s, delta))
                   for s in inst.samples if start < s.t <= end]  # fmt: skip
        else:
            base_name, delta = _PROM_HISTOGRAMS[name]
            acc: Dist = getattr(inst, base_name)
            for s in inst.samples:
                acc = acc.merge(getattr(s, delta))
                if start < s.t <= end:
                    pts.append((inst.started_s, s.t, acc, getattr(s, delta)))
        if not pts:
            return None
        return RawSeries(
            metric_type=metric_type,
            kind=d.kind,
            value_type=d.value_type,
            metric_labels={"model_name": inst.model_name, "revision_name": inst.revision},
            resource_type="prometheus_target",
            resource_labels={
                "project_id": project,
                "location": location,
                "cluster": "__run__",
                "namespace": service,
                "job": "run-gmp-sidecar",
                "instance": f"{inst.instance_id}:8080",
            },
            unit=d.unit,
            points=pts,
        )

    def _run(
        self, group: list[Instance], name: str, d: Descriptor, start: float, end: float
    ) -> list[RawSeries]:
        first = group[0]
        project, location, service = first.key
        resource = {
            "project_id": project,
            "service_name": service,
            "revision_name": first.revision,
            "location": location,
            "configuration_name": service,
        }
        times = sorted({s.t for i in group for s in i.samples if start < s.t <= end})
        at = {(i.index, s.t): s for i in group for s in i.samples if start < s.t <= end}

        def series(labels: dict[str, str], pts: list[tuple[float, float, Any, Any]]) -> RawSeries:
            return RawSeries(
                f"{RUN}{name}", d.kind, d.value_type, labels, "cloud_run_revision", resource, d.unit, pts
            )

        def here(t: float) -> list[Sample]:
            return [s for i in group if (s := at.get((i.index, t))) is not None]

        if name == "request_count":
            out = []
            for code, cls, attr in (
                ("200", "2xx", "d_ok"),
                ("429", "4xx", "d_rejected"),
                ("504", "5xx", "d_errors"),
            ):
                pts, cum, sent = [], 0.0, 0
                for t in times:
                    cum += sum(getattr(s, attr) for s in here(t))
                    n = round(cum) - sent  # whole requests; the fractions carry over
                    sent += n
                    pts.append((t - STEP_S, t, n, n))
                if sent:
                    labels = {"response_code": code, "response_code_class": cls, "route_type": "default"}
                    out.append(series(labels, pts))
            return out
        if name == "request_latencies":
            pts = []
            for t in times:
                dist = Dist.empty(MS_BOUNDS)
                for s in here(t):
                    _spread(dist, s.state.e2e_s * 1000.0, s.d_ok)
                if dist.count > 0:
                    pts.append((t - STEP_S, t, dist, dist))
            return [series({}, pts)] if pts else []
        if name == "container/instance_count":
            active = [(t, t, len(here(t)), len(here(t))) for t in times]
            return [series({"state": "active"}, active)] if active else []
        if name == "container/startup_latencies":
            pts = []
            for i in group:
                if start < i.started_s <= end:
                    dist = Dist.empty(MS_BOUNDS)
                    dist.add(i.startup_ms)
                    pts.append((i.started_s - STEP_S, i.started_s, dist, dist))
            return [series({}, sorted(pts, key=lambda p: p[1]))] if pts else []
        if name == "container/max_request_concurrencies":
            pts = []
            for t in times:
                dist = Dist.empty(CONCURRENCY_BOUNDS)
                for s in here(t):
                    dist.add(s.state.in_flight)
                pts.append((t - STEP_S, t, dist, dist))
            return [series({"state": "active"}, pts)] if pts else []
        attr = _RUN_UTIL[name]
        pts = []
        for t in times:
            dist = Dist.empty(RATIO_BOUNDS)
            for s in here(t):
                dist.add(getattr(s.state, attr))
            pts.append((t - STEP_S, t, dist, dist))
        return [series({}, pts)] if pts else []
