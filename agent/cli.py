"""The ``gemma-sre`` command line. Only this layer prints; library code logs to stderr.

Each command lives in its own module under ``agent/commands/`` and imports heavy libraries inside
the command function, so ``gemma-sre --help`` stays fast. ``gemma-sre mcp`` with no options (how an
MCP client spawns the server) is served without building the CLI at all: typer and the other
commands cost start-up time an MCP client waits for.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from mcp_tools.errors import ExternalError, UserError

if TYPE_CHECKING:
    import typer

_state: dict[str, Any] = {"debug": False, "error": None}
_app: typer.Typer | None = None
_command: Any = None  # the click command typer builds from ``_app``


def configure_logging(debug: bool, verbose: bool) -> None:
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def get_app() -> typer.Typer:
    """The typer application with every command registered (built once)."""
    global _app
    if _app is None:
        import typer

        from agent.commands import register_all

        app = typer.Typer(
            name="gemma-sre",
            help="An SRE agent for vLLM on Cloud Run GPUs and GKE GPU nodes.",
            no_args_is_help=True,
            add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
            pretty_exceptions_enable=False,
            rich_markup_mode=None,  # plain help: rendering it with rich costs ~0.1 s of start-up
        )

        def _version(value: bool) -> None:
            if value:
                from importlib.metadata import version

                typer.echo(f"gemma-sre {version('gemma-sre')}")
                raise typer.Exit()

        @app.callback()
        def _root(
            debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logs."),
            verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress to stderr."),
            profile: str = typer.Option(
                None,
                "--profile",
                "-p",
                help="A profile of gemma-sre.toml (./gemma-sre.toml, else "
                "$XDG_CONFIG_HOME/gemma-sre/gemma-sre.toml); default: GEMMA_SRE_PROFILE, else the "
                "file's default_profile. Environment variables win over the file.",
            ),
            _v: bool = typer.Option(
                False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
            ),
        ) -> None:
            _state["debug"] = debug
            configure_logging(debug, verbose)
            if profile is not None:
                from mcp_tools.settings import get_settings, select_profile

                select_profile(profile)
                get_settings()  # an unknown profile or a bad file is one error now, whatever the command

        register_all(app)
        _app = app
    return _app


def get_command() -> Any:
    """The click command of ``get_app()``, built once: typer's ``app()`` builds it again on every call
    (15 ms of CPU; a process that runs several commands, as the tests and ``tests/cli_worker.py`` do,
    paid it each time). Commands are registered before the first run."""
    global _command
    if _command is None:
        import typer.main

        _command = typer.main.get_command(get_app())
    return _command


def __getattr__(name: str) -> Any:  # ``from agent.cli import app``
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run(argv: list[str]) -> None:
    if argv == ["mcp"]:
        from agent.commands.mcp import serve

        configure_logging(False, False)
        serve()
        return
    # Without standalone mode, click returns (not raises) the code of a ``typer.Exit``; typer turns a
    # Ctrl-C inside a command into a silent ``Exit(130)``: it is the interrupt it was, for ``main``
    # (one line on stderr and, with ``--json``, the error document).
    # (typer's ``app()`` adds only its pretty-traceback hook: off here, ``pretty_exceptions_enable``.)
    rc = get_command()(args=argv, standalone_mode=False)
    if rc == 130:
        raise KeyboardInterrupt
    if isinstance(rc, int) and rc != 0:
        sys.exit(rc)


class _WatchedStdout:
    """``sys.stdout`` that remembers whether anything was written (a ``--json`` command's document)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.written = False

    def write(self, s: str) -> int:
        if s:
            self.written = True
        return int(self._stream.write(s))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _error(message: str) -> None:
    """The one error line on stderr (and kept, for a ``--json`` command's error document)."""
    _state["error"] = message
    print(f"error: {message}", file=sys.stderr)


def _exit_code(e: BaseException) -> int | None:
    """The exit code for ``e`` after printing its one line; None when it must propagate."""
    debug = _state["debug"]
    if isinstance(e, UserError | ExternalError):
        if debug:
            return None
        _error(str(e))
        return 2 if isinstance(e, UserError) else 1
    if isinstance(e, KeyboardInterrupt):
        _state["error"] = "interrupted"
        print("interrupted", file=sys.stderr)
        return 130
    typer = sys.modules.get("typer")
    if typer is not None:
        if isinstance(e, typer.Exit):
            return int(e.exit_code)
        if isinstance(e, typer.Abort):
            _state["error"] = "aborted"
            print("aborted", file=sys.stderr)
            return 130
        if isinstance(e, typer.TyperException):  # usage errors (typer vendors click's exception classes)
            usage = isinstance(e, typer.BadParameter | typer.BadParameter.__mro__[1])  # click.UsageError
            if usage:  # one line, and where to look (not click's three-line usage block)
                ctx = getattr(e, "ctx", None)
                name = ctx.info_name if ctx is not None and ctx.parent is not None else None
                where = f" (see 'gemma-sre {name} --help')" if name else ""
                _error(f"{' '.join(e.format_message().split())}{where}")
                return 2
            show = getattr(e, "show", None)
            if callable(show):
                show()
            else:
                _error(str(e))
            return int(getattr(e, "exit_code", 1))
    if isinstance(e, Exception) and not debug:
        _error(f"unexpected {e.__class__.__name__}: {e} (run with --debug for the traceback)")
        return 1
    return None


def main() -> None:
    """Console-script entry point: bad input is one line on stderr and exit 2, never a traceback.

    With ``--json`` (SPEC.md section 4), stdout carries exactly one JSON document on errors too: when
    the command failed before printing its own, ``{"error": "...", "exit_code": N}``."""
    argv = sys.argv[1:]
    watched = _WatchedStdout(sys.stdout) if "--json" in argv else None
    if watched is not None:
        sys.stdout = watched  # type: ignore[assignment]
    _state["error"] = None
    try:
        _run(argv)
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as e:
        code = _exit_code(e)
        if code is None:
            raise
        if watched is not None and not watched.written and code:
            import json

            doc = {"error": _state["error"] or e.__class__.__name__, "exit_code": code}
            watched.write(json.dumps(doc) + "\n")
            watched.flush()
        sys.exit(code)
    finally:
        if watched is not None and sys.stdout is watched:
            sys.stdout = watched._stream


if __name__ == "__main__":
    main()
