"""The package's foundation: the CLI's exit codes, settings, and the incident schema."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mcp_tools.errors import UserError
from mcp_tools.incident import load_incident, load_incident_dir
from mcp_tools.settings import Policy, Settings

CLI = [sys.executable, "-m", "agent.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def test_help_lists_commands_and_exits_zero() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    assert "version" in r.stdout


def test_unknown_command_is_a_usage_error_without_traceback() -> None:
    r = run_cli("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "No such command" in r.stderr


def test_settings_read_the_names_users_already_export(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p-123")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MODEL_NAME", "gemma")
    monkeypatch.setenv("GEMMA_SRE_POLICY", "read-only")
    s = Settings()
    assert (s.project, s.location, s.vllm_base_url, s.model_name) == (
        "p-123",
        "europe-west4",
        "http://127.0.0.1:9/v1",
        "gemma",
    )
    assert s.policy is Policy.READ_ONLY
    assert s.diagnosis_model_url == "http://127.0.0.1:9/v1"


def test_settings_have_no_built_in_project_or_endpoint() -> None:
    s = Settings()
    assert s.project is None and s.location is None and s.vllm_base_url is None
    assert s.policy is Policy.APPROVE


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_incident_loads_text_and_json_payloads(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "a.yaml",
        """
        id: a
        title: t
        future_key: ignored
        logs:
          - {severity: ERROR, text: "torch.OutOfMemoryError: CUDA out of memory"}
          - {severity: warn, json: {message: "structured"}}
        expected: {category: weights_oom, remediation_kinds: [set_model]}
        """,
    )
    inc = load_incident(p)
    assert [line.message for line in inc.logs] == ["torch.OutOfMemoryError: CUDA out of memory", "structured"]
    assert inc.logs[1].severity == "WARNING"
    assert inc.expected is not None and inc.expected.category == "weights_oom"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("title: t\nlogs: []\n", "missing required key 'id'"),
        ("id: a\ntitle: t\nlogs: 3\n", "'logs'"),
        ("id: a\ntitle: t\nlogs: []\nexpected: {category: bogus}\n", "'expected.category'"),
        ("- just\n- a list\n", "must be a YAML mapping"),
        ("id: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_incident_names_file_and_key(tmp_path: Path, body: str, needle: str) -> None:
    p = _write(tmp_path, "bad.yaml", body)
    with pytest.raises(UserError) as e:
        load_incident(p)
    assert str(p) in str(e.value)
    assert needle in str(e.value)


def test_incident_dir_keeps_going_past_a_bad_file(tmp_path: Path) -> None:
    _write(tmp_path, "good.yaml", "id: g\ntitle: t\nlogs: []\n")
    _write(tmp_path, "bad.yaml", "id: b\nlogs: []\n")
    good, bad = load_incident_dir(tmp_path)
    assert [i.id for i in good] == ["g"]
    assert len(bad) == 1 and "missing required key 'title'" in bad[0][1]


def test_a_command_exit_code_reaches_the_shell() -> None:
    """``raise typer.Exit(3)`` inside a command must exit 3, not 0."""
    code = (
        "import sys, typer\n"
        "from agent import cli\n"
        "@cli.app.command('fail-with-three')\n"
        "def _f() -> None:\n"
        "    raise typer.Exit(3)\n"
        "sys.argv = ['gemma-sre', 'fail-with-three']\n"
        "cli.main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr


def test_policy_parse_names_the_flag_and_the_choices() -> None:
    assert Policy.parse(None) is None
    assert Policy.parse("suggest") is Policy.SUGGEST
    with pytest.raises(UserError, match=r"--policy: 'yolo' is not one of read-only, suggest, approve, auto"):
        Policy.parse("yolo")


@pytest.mark.parametrize("command", ["run", "watch", "repl"])
def test_every_command_refuses_an_unknown_policy_the_same_way(command: str, cli: Any) -> None:
    r = cli(command, "--service", "svc", "--policy", "yolo")
    assert r.returncode == 2, r.stderr
    assert "--policy: 'yolo' is not one of" in r.stderr and "Traceback" not in r.stderr
