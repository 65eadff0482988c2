"""overload: the server is healthy but saturated (queue, preemptions, KV cache full, 429/503, slow TTFT).

From vLLM's ``/metrics`` (parsed with prometheus_client's text parser; both the V1 names such as
``vllm:kv_cache_usage_perc`` and the older ``vllm:gpu_cache_usage_perc`` are read), from vLLM's
periodic stats line ("Running: 8 reqs, Waiting: 37 reqs, GPU KV cache usage: 99.8%"; V0 said
"Pending: N reqs"), from preemption warnings, and from 429/503 answers (Cloud Run: "The request was
aborted because there was no available instance").

From Cloud Monitoring's series (``_from_time``), saturation over a window: a queue that grows, KV
usage over ``SloConfig.kv_full`` for most of the window, preemptions every minute, a latency SLO
burning (``graph.slo``); Cloud Run admitting far more concurrent requests than ``--max-num-seqs``
batches; one instance saturated while the others idle. The facts it records (levels, shares, the
instances) are what the planner-backed remedy decides by (``graph/remedies/saturation.py``).
"""

from __future__ import annotations

import logging

from graph.analyzers import _series as S
from graph.analyzers.base import Evidence, Finding, Line, LogView, ev, queued_idle, stalled_stats, view
from graph.observation import Observation
from mcp_tools.vocabulary import (
    FACT_PREEMPTIONS,
    OVERLOAD_HPA_HEADER,
    OVERLOAD_HPA_ROW,
    OVERLOAD_NO_CAPACITY,
    OVERLOAD_PREEMPT,
    OVERLOAD_REJECT,
    OVERLOAD_REJECT_PREFILTER,
    OVERLOAD_STATS,
    SERIES_WORDS,
)

log = logging.getLogger(__name__)

#: Busy stats periods (queue >= 5 or KV cache >= 90%) that make saturation sustained.
SUSTAINED = 2
#: Preemption records that make saturation sustained on their own.
PREEMPT_SUSTAINED = 10
#: Busy stats periods in a row that make saturation sustained however long the log is around them.
RUN_SUSTAINED = 4
#: KV cache usage (%) behind a queue that never empties: the cache is what keeps requests waiting.
STANDING_KV = 80.0


def _rejected(text: str) -> bool:
    """A request turned away: HTTP 429 / 503 in an access line, or Cloud Run's own wording."""
    return (
        '" 429' in text
        or '" 503' in text
        or "no available instance" in text
        or "Too Many Requests" in text
        or "'status': 429" in text
        or "'status': 503" in text
        or OVERLOAD_REJECT.search(text) is not None
    )


def _metrics(text: str) -> dict[str, float]:
    """Gauge values and counter totals by (un-labelled) name; histograms as name_sum / name_count."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                name = s.name
                if name.endswith("_bucket") or name.endswith("_created"):
                    continue
                out[name] = out.get(name, 0.0) + float(s.value)
    except (ValueError, TypeError) as e:
        log.warning("metrics: not valid Prometheus text (%s)", e)
    return out


def _first(m: dict[str, float], *names: str) -> float | None:
    for n in names:
        if n in m:
            return m[n]
    return None


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    signals: list[str] = []
    evidence: list[Evidence] = []
    facts: dict[str, object] = {}
    first_line = v.total + 1

    metrics_queue = None  # the queue /metrics reports now, when it was read
    if obs.metrics:
        m = _metrics(obs.metrics)
        waiting = metrics_queue = _first(m, "vllm:num_requests_waiting")
        running = _first(m, "vllm:num_requests_running")
        kv = _first(m, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        pre = _first(m, "vllm:num_preemptions_total", "vllm:num_preemptions")
        ttft_sum = _first(m, "vllm:time_to_first_token_seconds_sum")
        ttft_n = _first(m, "vllm:time_to_first_token_seconds_count")
        if waiting is not None:
            facts["num_requests_waiting"] = waiting
            if waiting >= 5 and waiting >= (running or 0) / 2:
                signals.append("queue")
                evidence.append(Evidence(line=0, text=f"metrics: vllm:num_requests_waiting {waiting:g}"))
        if running is not None:
            facts["num_requests_running"] = running
        if kv is not None:
            kv = kv / 100 if kv > 1.0 else kv
            facts["kv_cache_usage"] = round(kv, 3)
            if kv >= 0.95:
                signals.append("kv_full")
                evidence.append(Evidence(line=0, text=f"metrics: KV cache usage {kv:.0%}"))
        if pre:
            facts["num_preemptions"] = pre
            signals.append("preemptions")
            evidence.append(Evidence(line=0, text=f"metrics: vllm:num_preemptions_total {pre:g}"))
        if ttft_sum is not None and ttft_n:
            mean = ttft_sum / ttft_n
            facts["ttft_mean_s"] = round(mean, 3)
            if mean > 5.0:
                signals.append("slow_ttft")
                evidence.append(Evidence(line=0, text=f"metrics: mean time to first token {mean:.1f} s"))

    busiest = None
    peak: tuple[Line, int, float] | None = None
    peak_wait: tuple[Line, int] | None = None
    peak_kv: tuple[Line, float] | None = None
    last_busy: Line | None = None
    busy_periods = 0
    run = longest_run = 0  # consecutive busy stats periods
    stats = 0
    quiet_last: dict[str, bool] = {}  # per process: its last stats period had no queue and room
    emptied: set[str] = set()  # the processes whose stats showed a period with no request waiting
    last_stats: dict[str, tuple[float, Line]] = {}  # per process: its last period's KV usage, and line
    for ln in v.grep(OVERLOAD_STATS):
        mm = OVERLOAD_STATS.search(ln.text)
        if not mm:
            continue
        stats += 1
        waiting_l = int(mm.group(2))
        kv_l = float(mm.group(3))
        queued_or_full = waiting_l >= 5 or kv_l >= 90.0
        if waiting_l == 0:
            emptied.add(ln.proc)
        last_stats[ln.proc] = (kv_l, ln)
        quiet_last[ln.proc] = not queued_or_full
        # A queue behind an engine that makes nothing, or with nothing running, is a stall
        # (engine_hung), not saturation.
        if not queued_or_full or (kv_l < 90.0 and (stalled_stats(ln.text) or queued_idle(ln.text))):
            run = 0
        else:
            busy_periods += 1
            run += 1
            longest_run = max(longest_run, run)
            if busiest is None:
                busiest = (ln, waiting_l, kv_l)  # the first busy stats line: when it started
            if peak is None or (waiting_l, kv_l) > peak[1:]:
                peak = (ln, waiting_l, kv_l)
            # Where the queue, and where the KV cache, first reached their highest (cited both).
            if peak_wait is None or waiting_l > peak_wait[1]:
                peak_wait = (ln, waiting_l)
            if peak_kv is None or kv_l > peak_kv[1]:
                peak_kv = (ln, kv_l)
            last_busy = ln
    # Saturation that lasts: most stats periods (at least SUSTAINED of them) busy, or a stretch of
    # RUN_SUSTAINED busy periods in a row (a queue that stood for a minute, in a long quiet log).
    if busy_periods >= SUSTAINED and (busy_periods * 2 >= stats or longest_run >= RUN_SUSTAINED):
        signals.append("sustained")
        facts["busy_stats_periods"] = busy_periods
    # Requests waiting in every stats period a process printed, behind a KV cache at least STANDING_KV
    # full in its last: that engine's queue never emptied, and the cache is what holds it (the scheduler
    # admits a waiting request only when its blocks fit), however short the log.
    standing = [ln for proc, (kv_l, ln) in last_stats.items() if proc not in emptied and kv_l >= STANDING_KV]
    if standing:
        signals.append("standing_queue")
        if standing[0] is not last_busy:
            evidence.append(ev(standing[0]))
            first_line = min(first_line, standing[0].n)
    if busiest is not None:
        ln, waiting_l, kv_l = busiest
        facts.setdefault("num_requests_waiting", peak[1] if peak else waiting_l)
        if waiting_l >= 5 and "queue" not in signals:
            signals.append("queue")
        if peak is not None:
            facts.setdefault("kv_cache_usage", round(peak[2] / 100, 3))
        if kv_l >= 90.0 and "kv_full" not in signals:
            signals.append("kv_full")
        cited = {
            ln.n: ln,
            **({peak_wait[0].n: peak_wait[0]} if peak_wait else {}),
            **({peak_kv[0].n: peak_kv[0]} if peak_kv else {}),
            **({last_busy.n: last_busy} if last_busy else {}),
        }
        for i, c in enumerate(sorted(cited.values(), key=lambda x: x.n)):
            evidence.insert(i, ev(c))
        first_line = min(first_line, ln.n)
    pre_lines = list(v.grep(OVERLOAD_PREEMPT))
    # how many preemptions the records stand for: one each, or the count the last of them gives
    preempted = max(
        [len(pre_lines), *(int(m.group(1)) for ln in pre_lines for m in FACT_PREEMPTIONS.finditer(ln.text))]
    )
    if pre_lines:
        facts["preemptions"] = preempted
        if "preemptions" not in signals:
            signals.append("preemptions")
        evidence.append(Evidence(line=pre_lines[0].n, text=pre_lines[0].text.strip()[:300]))
        first_line = min(first_line, pre_lines[0].n)
    rejects = [ln for ln in v.grep(OVERLOAD_REJECT_PREFILTER) if _rejected(ln.text)]
    no_instance = [ln for ln in rejects if OVERLOAD_NO_CAPACITY.search(ln.text)]
    if no_instance:  # the platform turned requests away: every instance is busy, or its queue is full
        signals.append("no_instance")
        evidence.append(Evidence(line=no_instance[0].n, text=no_instance[0].text.strip()[:300]))
        first_line = min(first_line, no_instance[0].n)
    if len(rejects) >= 5:
        signals.append("rejections")
        facts["rejected_requests"] = len(rejects)
        if not no_instance:
            evidence.append(Evidence(line=rejects[0].n, text=rejects[0].text.strip()[:300]))
        first_line = min(first_line, rejects[0].n)

    at_max = _autoscaler_at_max(v)
    if at_max is not None:  # the autoscaler can add no replica, and the load is over its target
        signals.append("autoscaler_at_max")
        evidence.append(ev(at_max))
        first_line = min(first_line, at_max.n)

    t_signals, t_evidence, t_facts = _from_time(obs)
    signals += [x for x in t_signals if x not in signals]
    evidence += t_evidence
    facts.update(t_facts)
    if "hot_instance" in signals:  # the finding is that one instance: say it first
        signals.remove("hot_instance")
        signals.insert(0, "hot_instance")
        evidence.insert(0, evidence.pop(next(i for i, e in enumerate(evidence) if e.text.startswith(HOT))))

    # A queue the same process's stats no longer show (its last period quiet, the metrics saying nothing
    # of one) was worked off: on its own it is no saturation (a queue that stood for several periods
    # still gives the "sustained" signal above).
    drained = peak_wait is not None and quiet_last.get(peak_wait[0].proc, False) and metrics_queue is None
    strong_queue = not drained and facts.get("num_requests_waiting", 0) >= 10  # type: ignore[operator]
    if strong_queue and "queue_growth" in signals and "queue" not in signals:
        signals.append("queue")
    specific = True
    if signals == ["slo_burn"]:
        specific = False  # TTFT over its SLO with no saturation seen: a symptom; a cause found elsewhere wins
    elif (
        len(signals) < 2
        and not (strong_queue and "queue" in signals)
        and "no_instance" not in signals
        and "standing_queue" not in signals
        and "autoscaler_at_max" not in signals
        # Preemption that keeps coming is the KV cache full under load (vLLM says "not enough KV cache
        # space"), the saturation itself, not a passing peak.
        and preempted < PREEMPT_SUSTAINED
    ):
        return []
    evidence.sort(key=lambda e: e.line == 0 and not e.text.startswith(HOT))  # log lines first, then metrics
    return [
        Finding(
            category="overload",
            confidence=round(min(0.95, 0.55 + 0.1 * len(signals)), 2),
            summary=_summary(signals),
            evidence=evidence[:6],
            analyzer="overload",
            first_line=first_line,
            last_line=v.total + 1,
            specific=specific,
            facts=facts,
        )
    ]


def _autoscaler_at_max(v: LogView) -> Line | None:
    """The last ``kubectl get hpa`` row, when it shows the deployment at its most replicas with the
    metric still over its target: more load than the autoscaler may add replicas for."""
    if v.first(OVERLOAD_HPA_HEADER) is None:  # no `kubectl get hpa` table: no line-by-line scan
        return None
    # (its rows, which may be joined to the header as a wrapped record's rest, each by its own text)
    rows = [(ln, m) for ln in v.lines if "/" in ln.text and (m := OVERLOAD_HPA_ROW.match(ln.text))]
    if not rows:
        return None
    last, m = rows[-1]
    now = float(m.group("now")) / (1000 if m.group("now_unit") == "m" else 1)
    target = float(m.group("target")) / (1000 if m.group("target_unit") == "m" else 1)
    return last if now > target and int(m.group("replicas")) >= int(m.group("max")) > 0 else None


def _summary(signals: list[str]) -> str:
    words = [_WORDS[s] for s in signals]
    if signals[0] == "hot_instance":  # the finding is that instance; the rest is what it shows
        also = f" Also: {', '.join(words[1:])}." if words[1:] else ""
        return f"{words[0][0].upper()}{words[0][1:]}.{also}"
    return "The server is up but saturated: " + ", ".join(words) + "."


#: How the hot-instance evidence starts.
HOT = "series: hot instance "


def _from_time(obs: Observation) -> tuple[list[str], list[Evidence], dict[str, object]]:
    """Saturation over the series' window: signals, "series: ..." evidence and the facts."""
    ss = S.series_of(obs)
    if ss is None:
        return [], [], {}
    slo = obs.slo_config
    signals: list[str] = []
    evidence: list[Evidence] = []
    facts: dict[str, object] = {}
    window = f"the last {S.minutes(S._epoch(ss.end) - S._epoch(ss.start))}"

    kv = [v for _, v in S.combined(S.current(ss, "kv_usage"), "max")]
    if kv:
        kv = [x / 100 if x > 1.0 else x for x in kv]
        share = sum(1 for x in kv if x >= slo.kv_full) / len(kv)
        facts["kv_cache_usage"] = round(S.quarter_means(kv)[1], 3)
        facts["kv_full_share"] = round(share, 2)
        if share >= slo.kv_full_share:
            signals.append("kv_window")
            evidence.append(
                S.series_ev(
                    f"kv_usage: >= {slo.kv_full:.0%} for {share:.0%} of {window} (peak {max(kv):.0%})"
                )
            )
    waiting = [v for _, v in S.combined(S.current(ss, "requests_waiting"))]
    running = [v for _, v in S.combined(S.current(ss, "requests_running"))]
    if waiting:
        first, level = S.quarter_means(waiting)
        facts["num_requests_waiting"] = round(level, 1)
        facts["waiting_growth"] = round(level - first, 1)
        if level >= 5 and level > first:
            signals.append("queue_growth")
            evidence.append(
                S.series_ev(
                    f"requests_waiting: {first:.3g} -> {level:.3g} over {window} (peak {max(waiting):.3g})"
                )
            )
    if running:
        facts["num_requests_running"] = round(S.quarter_means(running)[1], 1)
    per_inst_running = [
        S.quarter_means([p.v for p in s.points])[1] for s in S.current(ss, "requests_running")
    ]
    if per_inst_running:
        facts["running_per_instance"] = round(max(per_inst_running), 1)
    pre = [v for _, v in S.combined(S.current(ss, "preemptions_rate"))]
    if pre:
        level = S.quarter_means(pre)[1]
        facts["preemptions_per_min"] = round(level, 2)
        if level >= 1.0:
            signals.append("preempt_rate")
            evidence.append(S.series_ev(f"preemptions_rate: {level:.3g}/min now (peak {max(pre):.3g}/min)"))
    latency = [b for b in obs.slo_burns() if b.key != "request_rate"]
    if latency:
        signals.append("slo_burn")
        evidence += [Evidence(line=0, text=b.line()[:300]) for b in latency]
        facts["slo_burn"] = [b.model_dump() for b in latency]

    # Cloud Run admits more concurrent requests than the engine batches: the rest wait inside it.
    svc = obs.service
    mns = _max_num_seqs(svc.args if svc else [])
    if svc is not None and svc.concurrency and mns:
        facts["container_concurrency"] = svc.concurrency
        facts["max_num_seqs"] = mns
        queued = facts.get("num_requests_waiting", 0) >= 1  # type: ignore[operator]
        if svc.concurrency >= 2 * mns and queued and signals:
            signals.append("concurrency_over_batch")
            evidence.append(
                Evidence(
                    line=0, text=f"spec: container concurrency {svc.concurrency} vs --max-num-seqs {mns}"
                )
            )

    # The batch is full: running pinned at --max-num-seqs on an instance, with a queue behind it.
    if mns and per_inst_running and waiting:
        pinned = [
            s
            for s in S.current(ss, "requests_running")
            if S.quarter_means([p.v for p in s.points])[1] >= 0.95 * mns
        ]
        if pinned and facts.get("num_requests_waiting", 0) >= 1:  # type: ignore[operator]
            signals.append("batch_full")
            evidence.append(
                S.series_ev(f"requests_running: pinned at --max-num-seqs {mns} on {len(pinned)} instance(s)")
            )

    # One hot instance: one saturated (KV full, or a queue) while the others carry a quarter of it.
    def now(key: str, name: str) -> float:
        s = S.by_instance(ss, key).get(name)
        return S.quarter_means([p.v for p in s.points])[1] if s is not None else 0.0

    names = set(S.by_instance(ss, "requests_running")) | set(S.by_instance(ss, "requests_waiting"))
    load = {n: now("requests_running", n) + now("requests_waiting", n) for n in names}
    if len(load) >= 2:
        hot = max(load, key=lambda k: load[k])
        rest = [k for k in load if k != hot]
        kv_hot = now("kv_usage", hot)
        saturated = kv_hot >= slo.kv_full or now("requests_waiting", hot) >= 1
        if saturated and all(load[k] <= 0.25 * load[hot] for k in rest):
            signals.append("hot_instance")
            facts["hot_instance"] = hot
            facts["idle_instances"] = rest
            facts["instance_loads"] = {S.inst(k): round(v, 1) for k, v in load.items()}
            others = ", ".join(f"instance {S.inst(k)}: {load[k]:.3g}" for k in rest)
            evidence.append(
                S.series_ev(
                    f"{HOT.removeprefix('series: ')}{S.inst(hot)}: {load[hot]:.3g} requests in flight, "
                    f"KV {kv_hot:.0%}; {others}"
                )
            )
    return signals, evidence, facts


def _max_num_seqs(args: list[str]) -> int | None:
    from mcp_tools.capacity.flags import parse_vllm_args
    from mcp_tools.errors import UserError

    try:
        return parse_vllm_args(args).max_num_seqs
    except UserError:  # flags vLLM itself would refuse: no batch size to compare with
        return None


_WORDS = {
    **SERIES_WORDS,
    "queue": "requests are queueing",
    "kv_full": "the KV cache is (nearly) full",
    "preemptions": "requests are being preempted",
    "slow_ttft": "time to first token is long",
    "rejections": "requests are rejected with 429/503",
    "no_instance": "the platform had no available instance (or queue room) for requests",
    "sustained": "saturation lasted over several stats periods",
    "autoscaler_at_max": "the autoscaler is at its most replicas with the load over its target",
    "standing_queue": "requests waited in every stats period, behind a nearly full KV cache",
}
