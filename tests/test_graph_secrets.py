"""No secret at rest, none on screen: a service whose env, args and log lines carry planted secrets
goes through one full loop (investigate, approve, apply, verify, report) through the official MCP
client; then the whole state directory (checkpoints.sqlite bytes, audit.jsonl, reports, REPL history),
every MCP tool result, ``diagnose --json`` and the REPL's /status and /logs are searched for every
planted secret. The real spec still reaches Cloud Run: apply reads it from the API, never from state.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp.client.stdio import stdio_client

from mcp_tools.settings import get_settings
from sandbox.scenarios import scenario_specs
from sandbox.testing import run_clients, sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.mcp_client import SessionThread, server_env, stdio_params, text_of
from tests.secret_shapes import PEM, PEM_BODY, SHAPES

# Planted in the service: each value unique, so a hit names the leak.
ENV = {
    "HF_TOKEN": "hf_PLANTenvHfToken0123456789abcd",
    "OPENAI_API_KEY": "sk-PLANTenvOpenAi0123456789abcdef",
    "REDIS_URL": "redis://:PLANTenvRedisPw77@cache.internal:6379/0",
    "DATABASE_URL": "postgresql://svc:PLANTenvPgPw88@db.internal:5432/app",
    "SA_KEY_PEM": PEM,
    "AWS_ACCESS_KEY_ID": "AKIAPLANTENVAWS01234",
    "HF_HUB_OFFLINE": "1",
}
ARGS = ["--api-key", "PLANTargApiKey0123", "--hf-token=hf_PLANTargHfToken0123456789ab"]
NEEDLES = sorted(
    {
        "PLANTenvHfToken0123456789abcd",
        "PLANTenvOpenAi0123456789abcdef",
        "PLANTenvRedisPw77",
        "PLANTenvPgPw88",
        "AKIAPLANTENVAWS01234",
        "PLANTargApiKey0123",
        "PLANTargHfToken0123456789ab",
        *PEM_BODY,
        *(s.secret for s in SHAPES if "\n" not in s.secret and "\\n" not in s.secret),
    }
)


def _plant(sb: Any) -> str:
    (spec,), _ = scenario_specs("reference-weights-oom")  # the bf16 12B on one L4: weights OOM
    spec = spec.model_copy(update={"args": [*spec.args, *ARGS], "env": {**spec.env, **ENV}})
    sb.deploy(spec, wait=True)
    _plant_logs(sb, spec.name)
    return spec.name


def _plant_logs(sb: Any, name: str) -> None:
    """Every shape of the corpus as a log line of the service's latest revision, the newest lines."""
    now = sb.clock.now_s()
    for i, shape in enumerate(SHAPES):
        sb.write_log(name, timestamp=now - 1 + i * 0.01, text=shape.text)


def _leaks(where: str, blob: bytes | str) -> list[str]:
    data = blob.encode() if isinstance(blob, str) else blob
    return [f"{where}: {n}" for n in NEEDLES if n.encode() in data]


@pytest.mark.slow
def test_planted_secrets_are_found_nowhere_after_a_full_loop(
    sandbox_factory: Any,  # noqa: F811
    cli: Callable[..., Any],
    tmp_path: Path,
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    name = _plant(sb)
    state_dir = get_settings().state_dir
    leaks: list[str] = []

    # -- the loop, and every service-facing tool, through the official MCP client ----------------------
    env = {**sandbox_env(sb), "GEMMA_SRE_VERIFY_DEADLINE_S": "60"}
    client = SessionThread(lambda: stdio_client(stdio_params(server_env(env, state_dir))))
    try:
        inv = client.call("investigate", {"service": name}, timeout=300)
        assert not inv.isError, text_of(inv)
        out = dict(inv.structuredContent or {})
        assert out["status"] == "awaiting_approval", out
        assert out["diagnosis"]["category"] == "weights_oom"
        results = [("investigate", inv)]
        done = client.call("approve_remediation", {"thread_id": out["thread_id"], "approver": "alice"}, 300)
        assert not done.isError, text_of(done)
        assert (done.structuredContent or {})["status"] == "fixed", text_of(done)
        results.append(("approve_remediation", done))
        results.append(
            ("get_incident_report", client.call("get_incident_report", {"thread_id": out["thread_id"]}))
        )
        for tool in (
            "status_vllm",
            "list_revisions",
            "get_model_details",
            "get_system_status",
            "destroy_vllm",
        ):
            results.append((tool, client.call(tool, {"service_name": name})))
        results.append(
            ("get_service_logs", client.call("get_service_logs", {"service_name": name, "since": "1d"}))
        )
        results.append(("analyze_gpu_logs", client.call("analyze_gpu_logs", {"service_name": name})))
        results.append(
            ("suggest_sre_remediation", client.call("suggest_sre_remediation", {"service_name": name}))
        )
    finally:
        client.close()
    for tool, r in results:
        leaks += _leaks(f"MCP {tool}", text_of(r) + repr(r.structuredContent))

    # The secrets are still on the service: apply sent the real spec, read from Cloud Run.
    services, _ = run_clients(sb)
    live = services.get_service(name=f"projects/{sb.project}/locations/{sb.location}/services/{name}")
    live_env = {e.name: e.value for e in live.template.containers[0].env}
    assert live_env["HF_TOKEN"] == ENV["HF_TOKEN"] and live_env["SA_KEY_PEM"] == PEM
    assert "PLANTargApiKey0123" in list(live.template.containers[0].args)

    # -- offline diagnose --json on an incident file that carries the same secrets ----------------------
    (spec,), _ = scenario_specs("reference-weights-oom")
    incident = {
        "id": "planted",
        "title": "planted secrets",
        "service": {
            **spec.model_dump(mode="json", exclude_none=True),
            "args": [*spec.args, *ARGS],
            "env": ENV,
        },
        "logs": [{"severity": "ERROR", "text": s.text} for s in SHAPES]
        + [
            {
                "severity": "ERROR",
                "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
            }
        ],
    }
    path = tmp_path / "planted.yaml"
    path.write_text(yaml.safe_dump(incident))
    for extra in ([], ["--show-context"]):  # the diagnosis, and what a model would be sent
        r = cli("diagnose", "--incident", str(path), "--json", *extra)
        assert r.returncode in (0, 1), r.stderr
        assert "CUDA out of memory" in r.stdout
        leaks += _leaks(f"diagnose --json {' '.join(extra)}", r.stdout + r.stderr)

    # -- the REPL: /status, /logs, and its history ---------------------------------------------------------
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from agent.repl.app import HISTORY_FILE, run_repl
    from agent.repl.commands import ReplCommands
    from graph.config import Configuration

    _plant_logs(sb, name)  # the newest lines again, so /logs (the last 50) shows them
    cmds = ReplCommands(
        Configuration.from_settings(service=name, use_model=False, **sb.settings_fields()), approver="tester"
    )
    buf = io.StringIO()
    console = Console(file=buf, width=400, color_system=None, highlight=False)
    typed = f"/status\n/logs\n/logs {ENV['HF_TOKEN']}\nwhy is --api-key {ARGS[1]} refused\n/quit\n"
    with create_pipe_input() as inp, create_app_session(input=inp, output=DummyOutput()):
        inp.send_text(typed)
        inp.close()
        run_repl(
            cmds, console=console, history_path=state_dir / HISTORY_FILE, input=inp, output=DummyOutput()
        )
    shown = buf.getvalue()
    assert "connecting to redis://" in shown and "GPU" in shown  # /logs and /status showed the service
    leaks += _leaks("REPL output", shown)

    # -- everything at rest ------------------------------------------------------------------------------
    files = [p for p in state_dir.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"checkpoints.sqlite", "audit.jsonl", HISTORY_FILE} <= names, names
    assert any(p.suffix == ".md" for p in files) and any(p.suffix == ".json" for p in files)
    for p in files:
        leaks += _leaks(str(p.relative_to(state_dir)), p.read_bytes())

    assert leaks == [], f"{len(leaks)} planted secrets found:\n" + "\n".join(leaks)


def test_a_secret_changed_while_the_plan_waits_stops_the_apply(sandbox_factory: Any) -> None:  # noqa: F811
    """Someone rotates a secret in the env while the plan waits: the redacted spec in the state looks
    the same, but the etag does not, so approving applies nothing and their new secret stays."""
    from google.cloud import run_v2

    from graph.runner import resume_cycle, run_cycle
    from tests.loop_support import config_for, mutations

    sb = sandbox_factory(scenario="reference-weights-oom")
    name = _plant(sb)
    first = run_cycle(config_for(sb))
    assert first.status == "awaiting_approval"
    assert first.values["observation"]["service"]["env"]["HF_TOKEN"] == "[REDACTED]"

    services, _ = run_clients(sb)
    full = f"projects/{sb.project}/locations/{sb.location}/services/{name}"
    svc = services.get_service(name=full)
    rotated = "hf_PLANTrotatedToken0123456789abcd"
    svc.template.containers[0].env = [  # the same names in the same order: only the value changes
        run_v2.EnvVar(name=e.name, value=rotated if e.name == "HF_TOKEN" else e.value)
        for e in svc.template.containers[0].env
    ]
    services.update_service(service=svc)  # someone else's change, not awaited
    theirs = len(mutations(sb))

    r = resume_cycle(first.thread_id, decision="approve", approver="alice")
    assert r.status != "fixed"
    assert "changed after this plan was made" in r.values["applied"]["error"]
    assert len(mutations(sb)) == theirs  # we sent nothing
    live = {e.name: e.value for e in services.get_service(name=full).template.containers[0].env}
    assert live["HF_TOKEN"] == rotated
