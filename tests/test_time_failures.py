"""Failures only time shows, through the whole loop on the sandbox (official clients, real graph),
judged by end state: a stuck engine is found and restarted and makes tokens again; a saturated
service gets the planner-backed change; one hot instance is named. Then the parts: SLO burn over
scaled windows, the series analyzers on hand-made series, the saturation remedy's decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from graph.analyzers import engine_hung, overload
from graph.config import Configuration
from graph.diagnosis import build_context, diagnose
from graph.observation import Observation
from graph.progress import Probe
from graph.propose import propose_options as propose_plans
from graph.runner import resume_cycle, run_cycle
from graph.slo import SloConfig, burns, windows
from mcp_tools.incident import ServiceSpec
from mcp_tools.monitoring import CloudMonitoring, Point, Series, SeriesSet
from mcp_tools.settings import Settings
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.loop_support import assert_every_mutation_approved, config_for, mutations, serving


def _first_step(r: Any) -> dict[str, Any]:
    return dict(r.values["plan"]["steps"][0])


@pytest.mark.slow  # the loop end to end through a canary whose baseline never answers (its timeouts)
def test_stuck_engine_is_found_restarted_and_makes_tokens_again(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="stuck-engine")
    # The stuck revision answers no request: the canary's measurements of it (the baseline, the
    # service's share in each step) wait out their request timeout, bounded here as the probe is,
    # all of a measurement's requests at once.
    cfg = config_for(sb, probe_timeout_s=2.0, canary_request_timeout_s=2.0, canary_concurrency=6)
    first = run_cycle(cfg)  # the first cycle finds it: within two
    d = first.values["diagnosis"]
    assert d["category"] == "engine_hung", d["summary"]
    texts = [e["text"] for e in d["evidence"]]
    assert any(t.startswith("series: generation_tokens_rate") and "0 tok/s" in t for t in texts)
    assert any(t.startswith("probe:") and "did not answer" in t for t in texts)
    assert any("SLO 5xx rate" in t and "burning" in t for t in texts)  # the 504s feed the hang
    assert first.status == "awaiting_approval" and mutations(sb) == []
    assert [s["kind"] for s in first.values["plan"]["steps"]] == ["restart"]

    done = resume_cycle(first.thread_id, decision="approve", approver="alice")
    assert done.status == "fixed", done.summary
    v = done.values["verification"]
    assert v["progress"] is True and v["ok"]  # verified by tokens, not by /health
    restarts = [m for m in mutations(sb) if m.method in ("POST", "PATCH")]
    assert restarts, "a restart in the sandbox journal"
    assert_every_mutation_approved(sb)
    assert done.values["applied"]["revision"] in serving(sb)

    sb.clock.advance(5 * 60)
    mon = CloudMonitoring(Settings(**sb.settings_fields()))
    try:
        after = mon.read("gemma-4-12b", keys=["generation_tokens_rate"], window_s=600).series
    finally:
        mon.close()
    assert any(s.points[-1].v > 0 for s in after)  # tokens flowing after
    again = run_cycle(config_for(sb, probe_timeout_s=2.0))
    assert again.values["diagnosis"]["category"] != "engine_hung", again.values["diagnosis"]["summary"]


def test_load_ramp_gets_the_planner_backed_change(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="load-ramp")
    r = run_cycle(config_for(sb, probe_timeout_s=2.0))
    d = r.values["diagnosis"]
    assert d["category"] == "overload"
    texts = [e["text"] for e in d["evidence"]]
    assert any(t.startswith("series: kv_usage") for t in texts)
    assert any(t.startswith("series: requests_waiting") for t in texts)
    assert any("SLO TTFT p95" in t for t in texts)
    assert r.status == "awaiting_approval", r.summary
    # one engine holds 16 sequences (KV full; --max-num-seqs 16) and ~50 are in flight: more
    # instances, and the concurrency one engine batches (64 -> 16); FP8 KV is the alternative
    step = _first_step(r)
    assert step["kind"] == "set_scaling"
    assert step["change"]["concurrency"] == 16 and step["change"]["max_instances"] >= 3
    alts = [a["steps"][0] for a in r.values["alternatives"]]
    assert {"--kv-cache-dtype": "fp8"} in [a["change"] for a in alts if a["kind"] == "set_vllm_args"]
    assert mutations(sb) == []
    done = resume_cycle(r.thread_id, decision="approve", approver="alice")
    assert done.status == "fixed", done.summary
    assert_every_mutation_approved(sb)
    svc = next(iter(sb.state()["services"].values()))
    assert svc is not None
    spec = sb.cloudrun.get_service(sb.project, sb.location, "gemma-4-12b")
    tmpl = spec["template"]
    assert tmpl["maxInstanceRequestConcurrency"] == 16
    assert tmpl["scaling"]["maxInstanceCount"] == step["change"]["max_instances"]


def test_hot_instance_is_named(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="hot-instance")
    r = run_cycle(config_for(sb, probe_timeout_s=2.0))
    d = r.values["diagnosis"]
    assert d["category"] == "overload"
    assert d["summary"].startswith("One instance is saturated") and "not a memory one" in d["summary"]
    assert d["evidence"][0]["text"].startswith("series: hot instance ")
    [step] = r.values["plan"]["steps"]
    assert step["kind"] == "set_scaling" and step["change"] == {"concurrency": 16}
    assert "session affinity" in step["why"]
    kinds = {s["kind"] for a in r.values.get("alternatives") or [] for s in a["steps"]}
    assert not kinds & {"set_resources", "set_vllm_args"}  # not more memory


# -- the parts ------------------------------------------------------------------------------------


END = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _series(key: str, vals: list[float], instance: str = "a" * 16, ago: int = 0, **labels: str) -> Series:
    n = len(vals)
    pts = [_pt(ago + n - 1 - i, v) for i, v in enumerate(vals)]
    lab = dict(labels) if labels else {"instance": instance}
    return Series(key=key, metric_type=key, labels=lab, unit="", points=pts)


def _pt(minutes_ago: int, v: float) -> Point:
    return Point(t=(END - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ"), v=v)


def _obs(*series: Series, minutes: int = 30, args: list[str] | None = None, **kw: Any) -> Observation:
    ss = SeriesSet(
        service="svc",
        start=(END - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        end=END.strftime("%Y-%m-%dT%H:%M:%SZ"),
        period_s=60.0,
        series=list(series),
    )
    spec = ServiceSpec(
        name="svc",
        gpu_type="nvidia-l4",
        gpu_count=1,
        args=args
        or ["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=16384", "--max-num-seqs=16"],
        concurrency=kw.pop("concurrency", 16),
        max_instances=kw.pop("max_instances", 1),
    )
    return Observation(id="t", service=spec, series=ss, **kw)


def test_burn_windows_scale_to_the_observation() -> None:
    assert windows(1800, 60) == [(1800, 180, 14.4, "1h/5m"), (1800, 180, 6.0, "6h/30m")]
    assert windows(6 * 3600, 60) == [(3600, 300, 14.4, "1h/5m"), (21600, 1800, 6.0, "6h/30m")]
    slo = SloConfig()
    # 1 bad minute of 30: 3.3x over the long window (the short one's 33x is not enough alone)
    assert burns(_obs(_series("ttft_p95", [0.5] * 29 + [5.0])).series, slo) == []  # type: ignore[arg-type]
    # 4 bad minutes (13%): 13x, under the fast pair's 14.4x, over the slow pair's 6x
    [slow] = burns(_obs(_series("ttft_p95", [0.5] * 26 + [5.0] * 4)).series, slo)  # type: ignore[arg-type]
    assert slow.pair == "6h/30m" and slow.burn_long == pytest.approx(13.33)
    # 6 bad minutes: 20x over 30 min and 100x over the last 3: pages on the fast pair
    [b] = burns(_obs(_series("ttft_p95", [0.5] * 24 + [5.0] * 6)).series, slo)  # type: ignore[arg-type]
    assert (b.slo, b.pair, b.long_s, b.short_s) == ("TTFT p95 <= 2 s", "1h/5m", 1800, 180)
    assert b.burn_long == pytest.approx(20.0) and b.burn_short == pytest.approx(100.0)
    assert "burning 20.0x over the last 30m and 100x over the last 3m" in b.line()
    # 5xx: request based. 1% errors is 10x a 99.9% budget: slow pair only
    ok = _series("request_rate", [9.9] * 30, response_code_class="2xx")
    bad = _series("request_rate", [0.1] * 30, response_code_class="5xx")
    [e] = burns(_obs(ok, bad).series, slo)  # type: ignore[arg-type]
    assert e.slo == "5xx rate" and e.pair == "6h/30m" and e.burn_long == pytest.approx(10.0)
    assert burns(_obs(ok).series, slo) == []  # type: ignore[arg-type]


def test_hung_needs_work_in_flight_and_a_current_instance() -> None:
    tokens = _series("generation_tokens_rate", [100.0] * 25 + [0.0] * 5)
    busy = _series("requests_running", [4.0] * 30)
    [f] = engine_hung.analyze(_obs(tokens, busy))
    assert f.category == "engine_hung" and f.facts["flat_minutes"] == 5
    assert (
        f.evidence[0].text.startswith("series: generation_tokens_rate")
        and "was 100 tok/s" in f.evidence[0].text
    )
    idle = _series("requests_running", [0.0] * 30)
    assert engine_hung.analyze(_obs(tokens, idle)) == []  # nothing asked, nothing made
    short = _series("generation_tokens_rate", [100.0] * 28 + [0.0] * 2)
    assert engine_hung.analyze(_obs(short, busy)) == []  # 2 minutes: under hung_minutes
    assert engine_hung.analyze(_obs(short, busy, slo=SloConfig(hung_minutes=2)))
    # a restarted revision's old instance stops reporting: its flat tail is history
    old = _series("generation_tokens_rate", [100.0] * 20 + [0.0] * 5, ago=5)
    old_busy = _series("requests_running", [4.0] * 25, ago=5)
    new = _series("generation_tokens_rate", [0.0] * 2 + [90.0] * 3, instance="b" * 16)
    assert engine_hung.analyze(_obs(old, old_busy, new)) == []


def test_the_slo_burns_are_computed_once_per_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    import graph.slo

    calls: list[int] = []

    def counted(ss: SeriesSet, slo: SloConfig) -> list[Any]:
        calls.append(1)
        return burns(ss, slo)

    monkeypatch.setattr(graph.slo, "burns", counted)
    obs = _obs(  # hung and slow at once: both analyzers weigh the latency SLOs
        _series("generation_tokens_rate", [100.0] * 25 + [0.0] * 5),
        _series("requests_running", [4.0] * 30),
        _series("ttft_p95", [0.5] * 20 + [9.0] * 10),
    )
    [hung] = engine_hung.analyze(obs)
    overload.analyze(obs)
    assert len(calls) == 1 and hung.facts["slo_burn"][0]["key"] == "ttft_p95"
    assert obs.slo_burns() == [graph.slo.Burn.model_validate(b) for b in hung.facts["slo_burn"]]


def test_probe_timeout_is_a_hang_unless_tokens_flow() -> None:
    timed_out = Probe(ok=False, timed_out=True, seconds=8.0, timeout_s=8.0, error="did not answer within 8 s")
    [f] = engine_hung.analyze(Observation(id="p", health=True, probe=timed_out))
    assert (
        f.confidence == 0.7 and "probe: a 1-token completion did not answer within 8 s" in f.evidence[0].text
    )
    flowing = _obs(_series("generation_tokens_rate", [50.0] * 30), health=True, probe=timed_out)
    assert engine_hung.analyze(flowing) == []  # slow, not stuck
    assert engine_hung.analyze(Observation(id="p", health=False, probe=timed_out)) == []
    ctx = build_context(Observation(id="p", health=True, probe=timed_out))
    assert "probe: a 1-token completion did not answer" in ctx


def _plans(obs: Observation) -> tuple[Any, list[Any]]:
    d = diagnose(obs, model=None)
    return d, propose_plans(d, obs)


def test_kv_headroom_with_running_pinned_raises_max_num_seqs() -> None:
    obs = _obs(
        _series("kv_usage", [0.4] * 30),
        _series("requests_running", [16.0] * 30),
        _series("requests_waiting", [2.0] * 10 + [12.0] * 20),
    )
    d, plans = _plans(obs)
    assert d.category == "overload"
    step = plans[0].steps[0]
    assert step.kind.value == "set_vllm_args" and step.change == {"--max-num-seqs": 34}
    assert step.predicted is not None and step.predicted["fits"] is True  # the planner's figures


def test_concurrency_far_over_the_batch_lowers_it() -> None:
    obs = _obs(
        _series("kv_usage", [0.5] * 30),
        _series("requests_running", [8.0] * 30),
        _series("requests_waiting", [1.0] * 10 + [9.0] * 20),
        args=["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=16384", "--max-num-seqs=8"],
        concurrency=64,
    )
    d, plans = _plans(obs)
    assert "Cloud Run admits far more concurrent requests" in d.summary
    kinds = [(p.steps[0].kind.value, p.steps[0].change) for p in plans]
    assert ("set_scaling", {"concurrency": 8}) in kinds


def test_kv_full_within_reach_of_fp8_tries_fp8_first() -> None:
    obs = _obs(
        _series("kv_usage", [0.97] * 30),
        _series("requests_running", [8.0] * 30),
        _series("requests_waiting", [1.0] * 10 + [6.0] * 20),
        _series("preemptions_rate", [3.0] * 30),
    )
    d, plans = _plans(obs)
    assert d.category == "overload" and overload.analyze(obs)[0].facts["kv_full_share"] == 1.0
    first = plans[0].steps[0]
    assert first.kind.value == "set_vllm_args" and first.change == {"--kv-cache-dtype": "fp8"}
    assert any(p.steps[0].kind.value == "set_scaling" for p in plans[1:])


def test_healthy_series_find_nothing() -> None:
    obs = _obs(
        _series("kv_usage", [0.3] * 30),
        _series("requests_running", [3.0] * 30),
        _series("requests_waiting", [0.0] * 30),
        _series("generation_tokens_rate", [80.0] * 30),
        _series("ttft_p95", [0.4] * 30),
    )
    assert overload.analyze(obs) == [] and engine_hung.analyze(obs) == []


def test_series_evidence_reaches_the_model_readably() -> None:
    obs = _obs(
        _series("generation_tokens_rate", [90.0] * 20 + [0.0] * 10), _series("requests_running", [4.0] * 30)
    )
    ctx = build_context(obs)
    assert "- engine_hung (" in ctx and "  - series: generation_tokens_rate" in ctx


def test_configuration_carries_the_slos_into_the_observation() -> None:
    cfg = Configuration(slo=SloConfig(ttft_p95_s=0.5, hung_minutes=5))
    assert cfg.persisted()["slo"]["ttft_p95_s"] == 0.5
    assert Observation(id="x", slo=cfg.slo).slo_config.hung_minutes == 5


def test_the_canary_is_watched_against_the_same_slo_targets_the_series_are() -> None:
    from graph.canary import slo_breaches
    from graph.state import Latency

    step = Latency(url="canary", requests=8, ok=8, ttft_p95_ms=600.0, itl_p95_ms=150.0)
    one_source = Configuration(slo=SloConfig(ttft_p95_s=0.5, itl_p95_s=0.1))
    assert slo_breaches(step, one_source) == {
        "ttft": "TTFT p95 600 ms > SLO 500 ms",
        "itl": "inter-token p95 150 ms > SLO 100 ms",
    }
    assert slo_breaches(step, Configuration()) == {}  # the defaults: 2 s and 200 ms
    # The keys users set for the canary (milliseconds) still set the targets ``slo`` does not set.
    cfg = Configuration.from_runnable_config(
        {"configurable": {"slo": {"hung_minutes": 5}, "slo_ttft_p95_ms": 500}}
    )
    assert (cfg.slo.ttft_p95_s, cfg.slo.itl_p95_s, cfg.slo.hung_minutes) == (0.5, 0.2, 5)
    # A thread persisted before ``slo`` carries the old default (2000 ms): a customised ``slo`` wins,
    # given as a dict or as a SloConfig; the legacy key still sets the target it leaves alone.
    legacy = {"slo_ttft_p95_ms": 2000, "slo_itl_p95_ms": 150}
    for slo in ({"ttft_p95_s": 9.0}, SloConfig(ttft_p95_s=9.0)):
        old = Configuration.from_runnable_config({"configurable": {"slo": slo, **legacy}})
        assert (old.slo.ttft_p95_s, old.slo.itl_p95_s) == (9.0, 0.15)
    assert "slo_ttft_p95_ms" not in cfg.persisted()
    assert Configuration.model_validate(cfg.persisted()).slo == cfg.slo  # a resumed thread reads it back
    with pytest.raises(ValidationError, match="ttft_p95_s"):
        Configuration(slo_ttft_p95_ms=-1)


def test_incident_series_block_reaches_the_analyzers_and_bad_keys_are_named(tmp_path: Any) -> None:
    from mcp_tools.errors import UserError
    from mcp_tools.incident import load_incident

    inc = load_incident("evals/incidents/l4-engine-stuck-tokens-flat-series.yaml")
    obs = Observation.from_incident(inc)
    assert obs.series is not None and obs.series.end == "2026-07-02T09:40:00Z"
    tokens = obs.series.by_key("generation_tokens_rate")[0]
    assert len(tokens.points) == 30 and tokens.points[-1].t == obs.series.end and tokens.points[0].v == 108
    assert diagnose(obs, model=None).category == "engine_hung"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: x\ntitle: x\nlogs: []\nseries:\n  end: '2026-07-02T09:40:00Z'\n"
        "  items:\n    - {key: nope, points: [1, 2]}\n"
    )
    with pytest.raises(UserError, match=r"bad.yaml.*series.*unknown series 'nope'"):
        load_incident(bad)
