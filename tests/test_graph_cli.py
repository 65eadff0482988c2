"""The faces: ``gemma-sre demo``, ``run --sandbox``, ``approve`` / ``reject`` and their bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "agent.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def test_demo_runs_the_whole_loop_with_yes() -> None:
    r = cli("demo", "--yes")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "no model configured" in out
    assert "weights_oom" in out and "CUDA out of memory" in out  # diagnosed, citing the line
    assert "Capacity planner's options" in out and "KV tokens" in out
    assert "approved with --yes" in out
    assert "verified:" in out and "fixed:" in out
    path = re.search(r"report: (\S+\.md)", out)
    assert path and Path(path.group(1)).exists()


def test_demo_without_a_terminal_or_yes_does_not_wait() -> None:
    r = cli("demo", timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Waiting for a decision" in r.stdout and "--yes" in r.stdout
    assert "applied:" not in r.stdout


def test_run_sandbox_scenario_json() -> None:
    r = cli("run", "--sandbox", "--scenario", "kv-starvation", "--yes", "--no-model", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "fixed" and Path(doc["report"]["json"]).exists()


def test_bad_input_is_one_line_and_exit_2() -> None:
    for args in (
        ["run", "--service", "x", "--policy", "yolo"],
        ["run"],
        ["approve", "no-such-thread"],
        ["reject", "no-such-thread", "--reason", "r"],
        ["run", "--scenario", "healthy"],
    ):
        r = cli(*args, timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.startswith("error:"), (args, r.stderr)
