"""The REPL: its command dispatch against the sandbox, the prompt loop on prompt_toolkit's pipe input,
free-form questions through a streaming OpenAI-compatible server, and the real CLI in a pseudo-terminal."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.commands.repl import sandbox_configuration
from agent.repl.app import ReplCompleter, run_repl
from agent.repl.ask import NO_MODEL, answer_question
from agent.repl.commands import COMMAND_NAMES, ReplCommands
from graph.config import Configuration
from mcp_tools.capacity import parse_vllm_args, plan_capacity
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.mcp_client import server_env
from tests.scripted_openai import ScriptedOpenAI

MODEL = "google/gemma-4-12b-it"
PROMPT = r"gemma-sre\[-\]>"


def _commands(**cfg: Any) -> ReplCommands:
    return ReplCommands(
        Configuration.from_settings(**cfg), approver="tester", services=["gemma-4-12b", "other"]
    )


def _run(commands: ReplCommands, keys: str, history: Path | None = None) -> str:
    """Drive the prompt loop with typed keys (pipe input); return what it printed."""
    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None, highlight=False)
    with create_pipe_input() as inp, create_app_session(input=inp, output=DummyOutput()):
        inp.send_text(keys)
        inp.close()
        run_repl(commands, console=console, history_path=history, input=inp, output=DummyOutput())
    return buf.getvalue()


def test_dispatch_without_a_service_or_a_model() -> None:
    c = _commands()
    help_text = c.dispatch("/help").text()
    for name in COMMAND_NAMES:
        assert name in help_text
    r = c.dispatch("/stat")
    assert r.error and "did you mean /status" in r.text()
    assert "no service" in c.dispatch("/status").text()
    assert "nothing is waiting" in c.dispatch("/approve").text()
    assert c.dispatch("/quit").exit
    # The planner works right away, and the figures are the planner's own.
    r = c.dispatch(f"/capacity {MODEL} nvidia-l4 --max-model-len=16384")
    assert not r.error
    plan = plan_capacity(
        MODEL, gpu="nvidia-l4", flags=parse_vllm_args([f"--model={MODEL}", "--max-model-len=16384"])
    )
    text = r.text()
    assert f"{plan.weights_gib:.2f} GiB" in text and "does not fit" in text
    assert "source: capacity planner" in text
    assert c.last_capacity is not None and c.last_capacity["fits"] is False
    bad = c.dispatch("/capacity no-such-model-xyz")
    assert bad.error and "no-such-model-xyz" in bad.text()


def test_completion_of_commands_services_and_models() -> None:
    comp = ReplCompleter(_commands())

    def words(text: str) -> list[str]:
        return [c.text for c in comp.get_completions(Document(text), CompleteEvent())]

    assert words("/ca") == ["/capacity"]
    assert set(words("/re")) == {"/reject", "/report"}
    assert words("/service o") == ["other"]
    assert MODEL.lower() in [w.lower() for w in words("/capacity google/gemma-4-12")]
    assert "nvidia-l4" in words(f"/capacity {MODEL} nvidia-l")
    assert words("hello") == []


def test_commands_against_the_sandbox_through_an_approved_fix(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    c = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    assert c.service == "gemma-4-12b" and c.service_names() == ["gemma-4-12b"]
    status = c.dispatch("/status").text()
    assert "gemma-4-12b-00001" in status and "nvidia-l4" in status and "down" in status
    logs = c.dispatch("/logs CUDA out of memory").text()
    assert "OutOfMemoryError" in logs and "source: Cloud Logging" in logs
    cap = c.dispatch("/capacity").text()
    assert "does not fit" in cap and "from service gemma-4-12b" in cap
    assert "HTTP 503" in c.dispatch("/metrics").text()  # nothing serves yet

    d = c.dispatch("/diagnose")
    assert not d.error and "weights_oom" in d.text() and "OutOfMemoryError" in d.text()
    assert sb.journal.entries() == []  # reading and diagnosing change nothing

    p = c.dispatch("/plan")
    assert p.pending is not None and c.pending_thread == p.thread_id
    assert p.pending is not None and p.pending.diff and p.pending.plan.steps
    again = c.dispatch("/plan")
    assert again.error and "waiting for a decision" in again.text()
    assert sb.journal.entries() == []  # nothing is applied before the approval

    done = c.decide("approve")
    assert "fixed" in done.text(), done.text()
    assert c.pending_thread is None
    writes = sb.journal.entries()
    assert len(writes) == 1 and writes[0].approval
    report = c.dispatch("/report").text()
    assert "fixed" in report and "tester" in report
    metrics = c.dispatch("/metrics").text()
    assert "KV cache usage" in metrics and "source:" in metrics
    assert "Cloud Monitoring, service gemma-4-12b" in metrics  # the series view comes first


def test_prompt_loop_inline_approval_and_history_across_sessions(
    tmp_path: Path,
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    c = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    hist = tmp_path / "hist"
    out = _run(c, "/plan\rmaybe\ry\r", history=hist)
    assert "Proposed plan" in out and "Revision diff" in out and "prediction (capacity planner)" in out
    assert "answer y or n" in out
    assert "fixed:" in out and out.rstrip().endswith("bye")
    # A second session reads the first one's history.
    assert "/plan" in list(FileHistory(str(hist)).load_history_strings())
    out2 = _run(c, "/report\r", history=hist)
    assert "Incident report" in out2
    assert list(FileHistory(str(hist)).load_history_strings())[0] == "/report"


def test_prompt_loop_declined_approval_leaves_the_thread_then_reject(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    c = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    out = _run(c, "/plan\r\x03/reject too risky today\r")
    assert "is waiting: /approve or /reject" in out
    assert "rejected:" in out and "too risky today" in out
    assert c.pending_thread is None


def test_free_form_question_without_a_model_says_how_to_configure_one() -> None:
    out = _run(_commands(), f"/capacity {MODEL} nvidia-l4\rwhat is the bottleneck for 12B on the L4?\r")
    assert "does not fit" in out
    assert "GEMMA_SRE_MODEL_URL" in out and "VLLM_BASE_URL" in out
    assert NO_MODEL.split(":")[0] in out


def test_free_form_answer_streams_and_its_figures_come_from_a_tool() -> None:
    answer = "The weights need 22.31 GiB [plan_capacity], more than the L4 offers; serve the QAT checkpoint."
    script = ScriptedOpenAI(
        [
            {"tool_calls": [{"name": "plan_capacity", "arguments": {"model": MODEL, "gpu": "nvidia-l4"}}]},
            {"content": answer},
        ]
    )
    with script:
        url = script.root
        cfg = Configuration.from_settings(model_url=url)
        pieces: list[str] = []
        a = answer_question(
            "what is the bottleneck for 12B on the L4?",
            cfg,
            emit=pieces.append,
            repl_figures={"bench": {"points": [{"ttft_p50_s": 0.123}]}},
        )
    assert len(pieces) > 3 and "".join(pieces) == answer == a.text
    assert a.tools_used == ["plan_capacity"] and a.sources_note() == "figures from: plan_capacity"
    # The model was offered read-only tools only, and got the planner's figure back.
    offered = {t["function"]["name"] for t in script.requests[0]["tools"]}
    assert "plan_capacity" in offered and not offered & {"update_service", "apply_change", "rollback_service"}
    # one user turn (the rules first: Gemma 2/3 have no system role) with the REPL's /bench figures
    first = script.requests[0]["messages"]
    assert [m["role"] for m in first] == ["user"] and "0.123" in first[0]["content"]
    assert first[0]["content"].index("0.123") < first[0]["content"].index("what is the bottleneck")
    # the tool's result came back in the next user turn
    tool_msgs = [m for m in script.requests[1]["messages"][1:] if m["role"] == "user"]
    weights = plan_capacity(MODEL, gpu="nvidia-l4").weights_gib
    assert tool_msgs and f"{weights}" in tool_msgs[0]["content"]


def test_an_answer_without_tools_says_its_figures_are_not_computed() -> None:
    with ScriptedOpenAI([{"content": "It needs about 30 GiB."}]) as srv:
        url = srv.root
        a = answer_question("how much?", Configuration.from_settings(model_url=url), emit=lambda s: None)
    assert a.tools_used == [] and "not computed" in a.sources_note()


def test_the_next_question_to_the_same_model_is_answered_too() -> None:
    """Each question runs in an event loop of its own: the second one used to reuse a connection of
    the first one's closed loop (langchain-openai keeps its async client per base URL for the whole
    process) and failed with "Event loop is closed"."""
    with ScriptedOpenAI([{"content": "It needs about 30 GiB."}]) as srv:
        cfg = Configuration.from_settings(model_url=srv.root)
        answers = [answer_question(q, cfg, emit=lambda s: None).text for q in ("how much?", "and now?")]
    assert answers == ["It needs about 30 GiB."] * 2
    assert len(srv.requests) == 2


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminal")
@pytest.mark.slow  # a real terminal session
def test_cli_in_a_pseudo_terminal_ctrl_c_cancels_the_answer_and_ctrl_d_leaves(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    slow = ScriptedOpenAI(
        [{"content": " ".join(f"word{i}" for i in range(200))}], tokens_per_chunk=2, gap_s=0.3
    )
    exe = Path(sys.executable).parent / "gemma-sre"
    with slow:
        url = slow.root
        env = server_env(
            {"GEMMA_SRE_MODEL_URL": url, "TERM": "xterm", "COLUMNS": "150", "PROMPT_TOOLKIT_NO_CPR": "1"},
            tmp_path / "state",
        )
        child = pexpect.spawn(str(exe), ["repl"], env=env, encoding="utf-8", timeout=60, dimensions=(40, 150))
        try:
            child.expect(PROMPT)
            child.sendline(f"/capacity {MODEL} nvidia-l4")
            child.expect("does not fit")
            child.expect(PROMPT)
            child.sendline("why does it not fit?")
            child.expect("word2")  # streaming has started
            child.sendintr()  # Ctrl-C: cancel the answer, not the REPL
            child.expect("cancelled")
            child.expect(PROMPT)
            child.sendline("/help")
            child.expect("/capacity")
            child.expect(PROMPT)
            child.send("\x04")  # Ctrl-D leaves
            child.expect("bye")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0
    assert "word150" not in (child.before or "")
    history = (tmp_path / "state" / "repl_history").read_text()
    assert "/capacity" in history and "why does it not fit?" in history


def test_bench_measures_the_serving_endpoint(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="healthy")
    c = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    r = c.dispatch("/bench 1,2")
    assert not r.error, r.text()
    text = r.text()
    assert "source: benchmark of Cloud Run service gemma-4-12b" in text
    assert c.last_bench is not None and len(c.last_bench["points"]) == 2
    assert c.last_bench["run_dir"] and Path(c.last_bench["run_dir"]).is_dir()
    assert "bad" in c.dispatch("/bench bad").text()


PTY_PROMPT = r"gemma-sre\[gemma-4-12b\]>"


@contextmanager
def repl_on_a_pty(tmp_path: Path, args: list[str], **env_more: str) -> Iterator[Any]:
    """``gemma-sre repl ARGS`` on a pseudo-terminal; the block drives it from the first prompt, the
    exit sends Ctrl-D and waits for the goodbye."""
    pexpect = pytest.importorskip("pexpect")
    exe = Path(sys.executable).parent / "gemma-sre"
    env = server_env({"TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", **env_more}, tmp_path / "state")
    child = pexpect.spawn(
        str(exe), ["repl", *args], env=env, encoding="utf-8", timeout=90, dimensions=(50, 160)
    )
    try:
        child.expect(PTY_PROMPT)
        yield child
        child.send("\x04")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminal")
@pytest.mark.slow  # end to end: the REPL process on a sandbox, through an applied fix
def test_cli_repl_on_the_sandbox_plans_and_applies_after_y(tmp_path: Path) -> None:
    with repl_on_a_pty(tmp_path, ["--sandbox", "--approver", "pty-user"]) as child:
        child.sendline("/status")
        child.expect("down")
        child.expect(PTY_PROMPT)
        child.sendline("/plan")
        child.expect("Revision diff")
        child.expect(r"Apply this plan\? \[y/n\]")
        child.sendline("y")
        child.expect("fixed:")
        child.expect(PTY_PROMPT)
        child.sendline("/status")
        child.expect(r"/health\s*│\s*up")
        child.expect(PTY_PROMPT)
    assert child.exitstatus == 0
    audit = "".join(p.read_text() for p in (tmp_path / "state").rglob("audit*"))
    assert "pty-user" in audit


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminal")
@pytest.mark.slow  # end to end: the REPL process on a sandbox, asking the user's model
def test_repl_on_the_sandbox_uses_the_model_the_settings_name(tmp_path: Path) -> None:
    """``repl --sandbox`` with GEMMA_SRE_MODEL_URL set asks that model (issue 15: it never did)."""
    from tests.scripted_openai import ScriptedOpenAI, diagnosis_reply

    reply = diagnosis_reply(summary="The weights do not fit.")
    with (
        ScriptedOpenAI([reply], model="gemma-from-settings") as srv,
        repl_on_a_pty(tmp_path, ["--sandbox"], GEMMA_SRE_MODEL_URL=srv.root) as child,
    ):
        child.sendline("/diagnose")
        child.expect("weights_oom")
        child.expect(PTY_PROMPT)
    assert srv.requests, "the REPL never asked the model GEMMA_SRE_MODEL_URL names"
