"""The prompt loop: prompt_toolkit in, rich out.

History persists across sessions in ``<state_dir>/repl_history``; Tab completes the commands,
service names after ``/service`` and catalog models and GPUs after ``/capacity``. Ctrl-C at the
prompt clears the line; Ctrl-C while a command or an answer runs cancels that step and returns to
the prompt; Ctrl-D (or ``/quit``) leaves. An approval request from the graph is shown inline (plan,
diff, prediction) and waits for y/n; Ctrl-C or Ctrl-D there leaves the thread waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.text import Text

from agent.display import render_request
from agent.interrupts import ctrl_c_raises
from agent.repl.commands import COMMAND_NAMES, ReplCommands

HISTORY_FILE = "repl_history"


class RedactedFileHistory(FileHistory):
    """The history file, with secrets a person typed or pasted (a token in a question) redacted:
    the state directory holds no secret."""

    def store_string(self, string: str) -> None:
        from mcp_tools.redact import redact

        super().store_string(redact(string))


class ReplCompleter(Completer):
    def __init__(self, commands: ReplCommands) -> None:
        self.commands = commands
        self._models: list[str] | None = None

    def _capacity_words(self) -> list[str]:
        if self._models is None:
            from mcp_tools.capacity import list_catalog, list_gpus

            self._models = list(list_catalog()) + [g.name for g in list_gpus()]
        return self._models

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        if " " not in text:
            for name in COMMAND_NAMES:
                if name.startswith(text.lower()):
                    yield Completion(name, start_position=-len(text))
            return
        cmd, _, rest = text.partition(" ")
        word = rest.split(" ")[-1]
        if cmd in ("/service", "/status") and " " not in rest:
            options: list[str] = self.commands.service_names()
        elif cmd == "/capacity":
            options = self._capacity_words()
        elif cmd in ("/approve", "/report") and " " not in rest:
            options = [t for t in (self.commands.pending_thread, self.commands.last_thread) if t]
        else:
            return
        for opt in options:
            if opt.lower().startswith(word.lower()):
                yield Completion(opt, start_position=-len(word))


def _ask_yes_no(session: PromptSession[str], console: Console) -> bool | None:
    """y -> True, n -> False, Ctrl-C / Ctrl-D -> None (the decision stays open)."""
    while True:
        try:
            ans = session.prompt("Apply this plan? [y/n] ").strip().lower()
        except (KeyboardInterrupt, EOFError):
            return None
        if ans in ("y", "yes"):
            return True
        if ans in ("n", "no"):
            return False
        console.print("answer y or n (Ctrl-C leaves it waiting for /approve or /reject)")


def _dispatch(commands: ReplCommands, line: str, console: Console) -> Any:
    """One slash command; /bench shows its progress (one bar per load point) while it runs."""
    if line.split()[0].lower() != "/bench":
        return commands.dispatch(line)
    from agent.commands.bench import BenchProgress

    with BenchProgress(console) as bar:
        commands.bench_progress = bar.update
        try:
            return commands.dispatch(line)
        finally:
            commands.bench_progress = None


def run_repl(
    commands: ReplCommands,
    *,
    console: Console,
    history: History | None = None,
    history_path: Path | None = None,
    input: Any = None,
    output: Any = None,
    asker: Callable[..., Any] | None = None,
) -> int:
    """Read commands until Ctrl-D or /quit. Returns the exit code (0)."""
    from agent.repl.ask import NoModelError, answer_question

    if history is None:
        if history_path is not None:
            history_path.parent.mkdir(parents=True, exist_ok=True)
            history = RedactedFileHistory(str(history_path))
        else:
            history = InMemoryHistory()
    session: PromptSession[str] = PromptSession(
        history=history,
        completer=ReplCompleter(commands),
        complete_while_typing=False,
        input=input,
        output=output,
    )
    ask = asker or answer_question
    console.print(
        Text(
            f"gemma-sre repl: service {commands.service or '(none: /service NAME)'}, "
            f"policy {commands.cfg.policy.value}. /help lists the commands; Ctrl-D leaves.",
            style="dim",
        )
    )

    def show(reply: Any) -> None:
        for r in reply.renderables:
            console.print(r)

    while True:
        try:
            line = session.prompt(f"gemma-sre[{commands.service or '-'}]> ")
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        line = line.strip()
        if not line:
            continue
        try:
            if line.startswith("/"):
                with ctrl_c_raises():
                    reply = _dispatch(commands, line, console)
                show(reply)
                if reply.exit:
                    break
                if reply.pending is not None:
                    console.print(render_request(reply.pending))
                    yes = _ask_yes_no(session, console)
                    if yes is None:
                        console.print(
                            f"thread {reply.thread_id} is waiting: /approve or /reject when you decide"
                        )
                    else:
                        with ctrl_c_raises():
                            decided = commands.decide(
                                "approve" if yes else "reject",
                                reason=None if yes else "declined at the prompt",
                            )
                        show(decided)
                continue
            figures = {
                k: v for k, v in (("bench", commands.last_bench), ("capacity", commands.last_capacity)) if v
            }

            def emit(piece: str) -> None:
                console.file.write(piece)
                console.file.flush()

            try:
                with ctrl_c_raises():
                    answer = ask(line, commands.cfg, emit=emit, repl_figures=figures)
            except NoModelError as e:
                console.print(Text(str(e), style="yellow"))
                continue
            console.file.write("\n")
            console.print(Text(f"[{answer.sources_note()}; model {answer.model}]", style="dim"))
        except KeyboardInterrupt:
            console.print(Text("\ncancelled", style="yellow"))
    console.print(Text("bye", style="dim"))
    return 0
