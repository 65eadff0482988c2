"""The faces: ``gemma-sre demo``, ``run --sandbox``, ``approve`` / ``reject`` and their bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_openai import free_port

# ``cli`` (conftest) runs the entry point in this process; stdin is not a terminal there either.


def test_demo_runs_the_whole_loop_with_yes(cli: Any) -> None:
    r = cli("demo", "--yes")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "no model configured" in out
    assert "weights_oom" in out and "CUDA out of memory" in out  # diagnosed, citing the line
    # One selection rule: the headline names the option the demo applies, and nothing else is
    # called the best fix; each option shows preflight's verdict, a failing one its reason.
    assert "best fix" not in out
    offered = re.search(r"offered: option (\d+) of \d+, (.+?): the first ranked option", out)
    assert offered, out
    rank, steps = offered.groups()
    assert f"  {rank}. {steps} [predicted: " in out and "(offered: passes preflight)" in out
    assert "(fails preflight: HF_HUB_OFFLINE=1:" in out and "KV cache" in out
    path = re.search(r"json: +(\S+\.json)", out)
    assert path
    applied = json.loads(Path(path.group(1)).read_text())["plan"]["steps"]
    assert steps == " + ".join(
        " ".join([st["kind"], *(f"{k}={v}" for k, v in st["change"].items())]) for st in applied
    )
    assert "approved with --yes" in out
    assert "verified:" in out and "fixed:" in out
    path = re.search(r"report: (\S+\.md)", out)
    assert path and Path(path.group(1)).exists()


def test_demo_without_a_terminal_or_yes_does_not_wait(cli: Any) -> None:
    r = cli("demo")
    assert r.returncode == 0, r.stderr
    assert "Waiting for a decision" in r.stdout and "--yes" in r.stdout
    assert "applied:" not in r.stdout


def test_run_sandbox_scenario_json(cli: Any) -> None:
    r = cli("run", "--sandbox", "--scenario", "kv-starvation", "--yes", "--no-model", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "fixed" and Path(doc["report"]["json"]).exists()


def test_bad_input_is_one_line_and_exit_2(cli: Any) -> None:
    for args in (
        ["run", "--service", "x", "--policy", "yolo"],
        ["run"],
        ["approve", "no-such-thread"],
        ["reject", "no-such-thread", "--reason", "r"],
        ["run", "--scenario", "healthy"],
    ):
        r = cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.startswith("error:"), (args, r.stderr)


def test_unknown_or_invalid_service_is_a_clear_error(cli: Any) -> None:
    r = cli("run", "--sandbox", "--scenario", "healthy", "--service", "no-such-service", "--yes")
    assert r.returncode == 2 and "not found" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = cli("run", "--service", "Bad_Name!")
    assert r.returncode == 2 and "invalid Cloud Run service name" in r.stderr, r.stderr


@pytest.mark.slow  # the unreachable API is retried with back-off before the cycle gives up
def test_a_cycle_that_cannot_read_the_service_exits_1(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Cloud Run API is unreachable: a degraded cycle (no crash, no change), but not a success."""
    dead = f"http://127.0.0.1:{free_port()}"  # a loopback port with nothing listening
    for name, value in {
        "GEMMA_SRE_RUN_API_ENDPOINT": dead,
        "GEMMA_SRE_LOGGING_API_ENDPOINT": dead,
        "GEMMA_SRE_ANONYMOUS_CREDENTIALS": "1",
        "GOOGLE_CLOUD_PROJECT": "p",
        "GOOGLE_CLOUD_LOCATION": "us-east4",
    }.items():
        monkeypatch.setenv(name, value)
    r = cli("run", "--service", "svc", "--yes")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "error: could not read the service" in r.stderr


def test_demo_with_a_model_url_uses_the_model(cli: Any) -> None:
    from tests.scripted_openai import ScriptedOpenAI, diagnosis_reply

    reply = diagnosis_reply(summary="The bf16 weights of the 12B model do not fit one L4.")
    with ScriptedOpenAI([reply], model="gemma-under-test") as model:
        r = cli("demo", "--yes", "--model-url", model.url)
        assert model.requests, "the model was asked"
    assert r.returncode == 0, r.stderr
    assert "model: gemma-under-test" in r.stdout and "fixed:" in r.stdout
