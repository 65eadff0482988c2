"""What users expect from the CLI (issue 14): one-shot readouts, config profiles, completion and
--version, one JSON document on errors, progress, and output that fits 80 columns in words."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_tools.endpoint import tls_context
from sandbox.testing import sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.mcp_client import server_env
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
GEMMA_SRE = str(Path(sys.executable).parent / "gemma-sre")
#: Python reprs in output meant for people: a dict or list literal, a bare True / False / None.
REPR = re.compile(r"\{'|\['|': '|(?<![:=\w])(True|False|None)\b")


def _point_at(monkeypatch: pytest.MonkeyPatch, sb: Any, service: str = "gemma-4-12b") -> None:
    for k, v in sandbox_env(sb).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GEMMA_SRE_SERVICE", service)


@pytest.fixture
def healthy(sandbox_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Any:  # noqa: F811
    """A healthy sandbox the environment points at (as a user's shell would)."""
    sb = sandbox_factory(scenario="healthy")
    _point_at(monkeypatch, sb)
    return sb


def _env80(state_dir: str | os.PathLike[str], **extra: str) -> dict[str, str]:
    return server_env({"COLUMNS": "80", "TERM": "dumb", **extra}, state_dir)


# -- one-shot readouts ---------------------------------------------------------------------------------


def test_status_logs_and_metrics_one_shot(cli: Any, healthy: Any) -> None:
    r = cli("status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["health"] == "up" and st["ready"] is True and st["serving_revision"].startswith("gemma-4-12b-")
    assert st["gpu"] == "1 x nvidia-l4"

    r = cli("logs", "--limit", "3", "--since", "2h", "--json")
    assert r.returncode == 0, r.stderr
    logs = json.loads(r.stdout)
    assert len(logs["records"]) == 3 and logs["more"] is True and logs["since"] == "2h"
    word = "Application"  # "Application startup complete." in every healthy start
    r = cli("logs", "--filter", word, "--json")
    assert r.returncode == 0, r.stderr
    matched = json.loads(r.stdout)["records"]
    assert matched and all(word.lower() in rec["text"].lower() for rec in matched), r.stdout[:400]

    r = cli("metrics", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)["now"]  # beside the Cloud Monitoring series
    assert m["vllm"]["metric_names"] > 0 and m["figures"]["gpu"] == "1 x nvidia-l4"
    assert m["url"] == st["url"]

    r = cli("status")  # the table a person reads: words, not reprs
    assert "/health" in r.stdout and "up" in r.stdout and not REPR.search(r.stdout), r.stdout


def test_logs_filter_matches_what_a_request_log_shows(cli: Any, healthy: Any) -> None:
    import httpx

    url = json.loads(cli("status", "--json").stdout)["url"]
    assert httpx.get(f"{url}/no-such-route-7q", timeout=30, verify=tls_context()).status_code == 404
    assert httpx.get(f"{url}/v1/models", timeout=30, verify=tls_context()).status_code == 200

    def records(text: str) -> list[str]:
        r = cli("logs", "--filter", text, "--json")
        assert r.returncode == 0, r.stderr
        return [rec["text"] for rec in json.loads(r.stdout)["records"]]

    (miss,) = records("no-such-route-7q")  # the URL, as the request line shows it
    assert miss.startswith("GET ") and miss.split()[2] == "404"
    assert miss in records("404")  # the status
    latency = miss.split()[3]  # "0.000123s", as shown
    assert miss in records(latency)
    assert all("404" in t for t in records("404")) and all(latency in t for t in records(latency))
    ok = records("/v1/models")
    assert ok and all(t.split()[2] == "200" for t in ok)
    assert records("GET") and all("get" in t.lower() for t in records("GET"))
    assert records("no-such-route-8z") == []
    # matched as printed, redacted: a filter cannot find a line by the secret inside it
    secret = "hf_" + "Q7xK2mP9vL4nR8sT1wY6zB3cD5fG0hJ"
    assert (
        httpx.get(
            f"{url}/no-such-route-9s", params={"token": secret}, timeout=30, verify=tls_context()
        ).status_code
        == 404
    )
    (leaky,) = records("no-such-route-9s")
    assert secret not in leaky
    assert records(secret) == [] and records(secret[:12]) == []


def test_the_metrics_readout_reads_the_service_once(healthy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.commands.status import readout_world
    from agent.readouts import service_metrics
    from mcp_tools.settings import get_settings

    get_settings.cache_clear()
    world, name = readout_world(None)
    read: list[str] = []
    real = world.get_service
    monkeypatch.setattr(world, "get_service", lambda n: read.append(n) or real(n))
    m = service_metrics(world, name, None)
    assert read == [name]  # its URL and its figures from one read
    assert m.url.startswith("http") and m.figures is not None and m.vllm is not None


def test_the_repl_and_the_one_shot_commands_share_one_readout(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    from agent.commands.repl import sandbox_configuration
    from agent.readouts import render_status, service_status
    from agent.repl.commands import ReplCommands, Reply
    from graph.world import World

    sb = sandbox_factory(scenario="healthy")
    c = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    mine = Reply(render_status(service_status(World(c.cfg), c.service))).text()
    assert c.dispatch("/status").text() == mine
    assert "waiting for a decision" in c.dispatch("/threads").text()
    assert "no incident reports" in c.dispatch("/incidents").text()


def test_threads_and_incidents_list_the_ids_other_commands_take(cli: Any) -> None:
    r = cli("run", "--sandbox", "--no-model")  # no terminal, no --yes: it waits for a decision
    assert r.returncode == 0, r.stderr
    waiting = re.search(r"Waiting for a decision on thread (\S+)\.", r.stdout)
    assert waiting, r.stdout
    r = cli("threads", "--json")
    rows = json.loads(r.stdout)["threads"]
    assert [t["thread_id"] for t in rows] == [waiting.group(1)]
    assert rows[0]["headline"] == "set_vllm_args --quantization=fp8" and rows[0]["category"] == "weights_oom"
    assert rows[0]["age"].endswith("s ago") and rows[0]["service"] == "gemma-4-12b"
    text = cli("threads").stdout
    assert waiting.group(1) in text and "gemma-sre approve THREAD" in text

    r = cli("run", "--sandbox", "--no-model", "--yes", "--json")
    fixed = json.loads(r.stdout)
    assert fixed["status"] == "fixed", r.stdout
    r = cli("incidents", "--json")
    rows = json.loads(r.stdout)["incidents"]
    assert rows[0]["thread_id"] == fixed["thread_id"] and rows[0]["outcome"] == "fixed"
    assert rows[0]["category"] == "weights_oom" and Path(rows[0]["report"]).is_file()
    assert rows[0]["report"] == fixed["report"]["markdown"]
    assert fixed["thread_id"] in cli("incidents", "--limit", "1").stdout
    # the approved thread is no longer waiting; the first one still is
    assert [t["thread_id"] for t in json.loads(cli("threads", "--json").stdout)["threads"]] == [
        waiting.group(1)
    ]


# -- config file and profiles -----------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_profiles_from_the_project_dir_and_the_xdg_dir(
    cli: Any,
    sandbox_factory: Callable[..., Any],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_tools.settings import get_settings

    sb = sandbox_factory(scenario="healthy")
    fields = sb.settings_fields()
    monkeypatch.chdir(tmp_path)
    _write(
        Path(os.environ["XDG_CONFIG_HOME"]) / "gemma-sre" / "gemma-sre.toml",
        'default_profile = "far"\n[profiles.far]\nproject = "from-xdg"\n',
    )
    assert get_settings().project == "from-xdg"  # the XDG file, when the project dir has none
    get_settings.cache_clear()
    _write(
        tmp_path / "gemma-sre.toml",
        f"""default_profile = "quiet"

[profiles.quiet]
policy = "read-only"

[profiles.sb]
project = "{fields["project"]}"
region = "{fields["location"]}"
service = "gemma-4-12b"
policy = "suggest"
run_api_endpoint = "{sb.url}"
logging_api_endpoint = "{sb.url}"
anonymous_credentials = true
""",
    )
    s = get_settings()
    assert s.policy.value == "read-only" and s.project is None  # the project dir's file, its default
    r = cli("--profile", "sb", "status", "--json")  # everything from the profile
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["health"] == "up"
    s = get_settings()
    assert (s.location, s.policy.value) == (fields["location"], "suggest")
    monkeypatch.setenv("GEMMA_SRE_SERVICE", "no-such-service")  # the environment wins over the file
    r = cli("--profile", "sb", "status", "--json")
    assert r.returncode == 2 and "no-such-service" in json.loads(r.stdout)["error"]


@pytest.mark.parametrize(
    ("text", "args", "says"),
    [
        ("[profiles.a\n", ["--profile", "a"], "not valid TOML"),
        ('[profiles.a]\nservice = "s"\n', ["--profile", "b"], "--profile 'b': no such profile"),
        ('default_profile = "b"\n[profiles.a]\n', [], "default_profile 'b': no such profile"),
        (
            '[profiles.a]\nprojet = "p"\n',
            ["--profile", "a"],
            "unknown key 'projet' (did you mean 'project'?)",
        ),
        ('service = "s"\n', [], "unknown key 'service'"),
        ('[profiles.a]\npolicy = "yolo"\n', ["--profile", "a"], "[profiles.a] policy:"),
    ],
)
def test_a_bad_config_file_is_one_clear_error(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, args: list[str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "gemma-sre.toml", text)
    r = cli(*args, "status")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and says in r.stderr, r.stderr
    assert "gemma-sre.toml" in r.stderr or "--profile" in r.stderr


def test_a_profile_without_a_file_is_an_error(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("--profile", "prod", "threads")
    assert r.returncode == 2 and "profile 'prod': there is no config file" in r.stderr


# -- version, completion -----------------------------------------------------------------------------


def test_version_and_shell_completion(cli: Any, tmp_path: Path) -> None:
    from importlib.metadata import version

    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"gemma-sre {version('gemma-sre')}"
    r = cli("--help")
    assert "--install-completion" in r.stdout and "--show-completion" in r.stdout and "--profile" in r.stdout
    # typer finds the shell from the process' ancestors unless told not to: under `make test` with
    # quoted PYTEST_ARGS an sh sits between make and pytest, and sh is not supported
    no_detection = _env80(tmp_path / "state", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    r = subprocess.run(
        [GEMMA_SRE, "--show-completion", "bash"], capture_output=True, text=True, timeout=60, env=no_detection
    )
    assert r.returncode == 0 and "_gemma_sre_completion" in r.stdout and "complete " in r.stdout


# -- sandbox: every variable, and --env for eval ------------------------------------------------------


def test_sandbox_env_is_evaluated_by_a_shell_and_points_gemma_sre_at_it(tmp_path: Path) -> None:
    env = _env80(tmp_path / "state", PATH=f"{Path(GEMMA_SRE).parent}:{os.environ['PATH']}")
    script = (
        'eval "$(gemma-sre sandbox --env --port 0 --scenario healthy --time-scale 1000 --zero-latency)"'
        " || exit 9\n"
        'echo "PID=$GEMMA_SRE_SANDBOX_PID"\n'
        "gemma-sre status --json\n"
        'kill "$GEMMA_SRE_SANDBOX_PID"\n'
    )
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, env=env)
    pid = re.search(r"PID=(\d+)", r.stdout)
    try:
        assert r.returncode == 0 and pid, (r.stdout, r.stderr)
        doc = json.loads(r.stdout.splitlines()[-1])
        assert doc["service"] == "gemma-4-12b" and doc["health"] == "up"  # GEMMA_SRE_SERVICE was exported
        assert "stop it: kill" in r.stderr
    finally:
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.group(1)), 15)


def test_sandbox_prints_every_variable_a_user_needs(sandbox_factory: Callable[..., Any]) -> None:  # noqa: F811
    from agent.commands.sandbox import user_env

    env = user_env(sandbox_factory(scenario="healthy"))
    assert env["GEMMA_SRE_SERVICE"] == "gemma-4-12b"
    assert {"GEMMA_SRE_RUN_API_ENDPOINT", "GEMMA_SRE_LOGGING_API_ENDPOINT", "GOOGLE_CLOUD_PROJECT"} <= set(
        env
    )


# -- --json: one document on errors too ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["approve", "no-such-thread", "--json"],
        ["reject", "no-such-thread", "--json"],
        ["run", "--policy", "yolo", "--json"],
        ["eval", "--mode", "nope", "--json"],
        ["plan", "no-such-model", "--json"],
        ["diagnose", "--incident", "/no/such/file.yaml", "--json"],
        ["bench", "--url", "not a url", "--json"],
        ["status", "--json"],
        ["logs", "--limit", "0", "--json"],
        ["metrics", "--json"],
        ["threads", "--json", "--no-such-option"],
        ["incidents", "--limit", "-1", "--json"],
    ],
)
def test_every_json_command_prints_one_document_on_errors(cli: Any, args: list[str]) -> None:
    r = cli(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    doc = json.loads(r.stdout)  # exactly one document
    assert doc["exit_code"] == 2 and doc["error"] and r.stderr == f"error: {doc['error']}\n"


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
def test_ctrl_c_in_a_command_exits_130_and_a_json_command_says_so_in_one_document(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    tmp_path: Path,
    as_json: bool,
) -> None:
    """``gemma-sre status`` as a process, sent SIGINT while the sandbox holds its Cloud Run read open:
    exit 130, ``interrupted`` on stderr, and with ``--json`` the error document on stdout."""
    import signal

    sb = sandbox_factory(scenario="healthy")
    held = sb.faults.inject("run:service", "hang", count=1)  # answered when the client leaves
    p = subprocess.Popen(
        [GEMMA_SRE, "status", *(["--json"] if as_json else [])],
        env=_env80(tmp_path / "state", **sandbox_env(sb), GEMMA_SRE_SERVICE="gemma-4-12b"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # inside the held call: the interrupt lands there
        wait_until(lambda: held.fired >= 1 or p.poll() is not None, "the command reading the service")
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (out, err)
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err, err
    if as_json:
        assert json.loads(out) == {"error": "interrupted", "exit_code": 130}
    else:
        assert out == ""


# -- progress -----------------------------------------------------------------------------------------


def test_eval_sandbox_reports_each_case_on_stderr_and_stdout_stays_one_document(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    incidents = tmp_path / "incidents"
    incidents.mkdir()
    shutil.copy(ROOT / "evals" / "incidents" / "l4-gemma4-12b-bf16-weights-oom.yaml", incidents)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    r = cli("eval", "--mode", "sandbox", "--incidents", str(incidents), "--json")
    doc = json.loads(r.stdout)
    assert doc["summary"]["cases"] == 1, r.stderr
    assert re.search(r"case 1: l4-gemma4-12b-bf16-weights-oom: pass \(weights_oom, [\d.]+ s\)", r.stderr), (
        r.stderr
    )


# -- 80 columns, words -------------------------------------------------------------------------------


def test_run_at_80_columns_reads_as_words_and_hints_are_whole(
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    for name, value in {
        "COLUMNS": "80",
        "TERM": "dumb",
        "GEMMA_SRE_SERVICE": "gemma-4-12b",
        **sandbox_env(sb),
    }.items():
        monkeypatch.setenv(name, value)
    r = cli("run", "--no-model")
    out = r.stdout
    assert r.returncode == 0, r.stderr
    assert "observing service gemma-4-12b" in out  # progress before the first step ends
    for node in ("observe", "diagnose", "propose", "preflight"):
        assert re.search(rf"^\s*{node} ", out, re.M), node
    assert not REPR.search(out), REPR.search(out)
    assert re.search(r"^Approve: gemma-sre approve \S+$", out, re.M)
    assert re.search(r"^Reject:  gemma-sre reject \S+ --reason '\.\.\.'$", out, re.M)
    cited = re.search(r"citing line \d+: (.*)$", out, re.M)  # whole words of the record, never a token cut
    assert cited, out
    logs = cli("logs", "--filter", "torch.OutOfMemoryError", "--json")
    words = cited.group(1).split()
    record = next(r["text"] for r in json.loads(logs.stdout)["records"] if words[-1] in r["text"])
    tokens = record.split()
    assert words[0] in tokens and words[-1] in tokens, (words[0], words[-1], record)  # whole tokens


def test_plan_says_does_not_fit_once(cli: Any) -> None:
    r = cli("plan", "gemma-4-31b-it", "--gpu", "nvidia-l4")
    assert "DOES NOT FIT: " in r.stdout and "DOES NOT FIT: does not fit" not in r.stdout, r.stdout


def test_eval_table_keeps_its_id_column_and_the_matrix_its_diagonal_at_80_columns() -> None:
    from rich.console import Console

    from evals.harness import run_eval
    from evals.report import _matrix_labels, render_tables

    result = run_eval(ROOT / "evals" / "incidents")
    console = Console(width=80, record=True, file=open(os.devnull, "w"), color_system=None)  # noqa: SIM115
    render_tables(result, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    first = next(c.id for c in result.cases if not c.skipped)
    assert text.splitlines()[2].split()[0] == "id" and first[:18] in text
    matrix = text[text.index("confusion") :].splitlines()
    labels = _matrix_labels(result)
    header = next(line for line in matrix if line.strip().startswith("expected"))
    assert header.split()[-1] == str(len(labels))  # every column, the last one too
    for n, exp in enumerate(labels, 1):
        right = (result.confusion.get(exp) or {}).get(exp)
        if right:  # the diagonal cell: column n of row n
            row = next(line for line in matrix if re.match(rf"\s*{n} {re.escape(exp[:12])}", line))
            assert row[header.index(str(n)) - 1 : header.index(str(n)) + len(str(n))].strip() == str(right)


def test_repl_help_shows_its_placeholders() -> None:
    from agent.repl.commands import ReplCommands
    from graph.config import Configuration

    text = ReplCommands(Configuration(service="x")).dispatch("/help").text()
    for placeholder in ("[filter]", "[thread]", "[reason]", "[concurrency,...]", "[model] [gpu]"):
        assert placeholder in text, placeholder
    assert "/threads" in text and "/incidents" in text


def test_metrics_of_a_service_that_is_down_shows_its_figures_and_what_was_not_read(
    cli: Any,
    sandbox_factory: Callable[..., Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _point_at(monkeypatch, sandbox_factory(scenario="reference-weights-oom"))
    r = cli("metrics", "--json")
    assert r.returncode == 1, r.stderr  # the work ran and found a blind spot
    doc = json.loads(r.stdout)["now"]
    assert doc["vllm"] is None and "HTTP 503" in doc["unread"][0] and doc["figures"]["concurrency"] == 4
