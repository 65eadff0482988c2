"""The ``gemma-sre`` command line. Only this layer prints; library code logs to stderr.

Each command lives in its own module under ``agent/commands/`` and imports heavy libraries inside
the command function, so ``gemma-sre --help`` stays fast.
"""

from __future__ import annotations

import logging
import sys

import typer

from agent.commands import register_all
from mcp_tools.errors import ExternalError, UserError

app = typer.Typer(
    name="gemma-sre",
    help="An SRE agent for vLLM on Cloud Run GPUs and GKE GPU nodes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rendering it with rich costs ~0.1 s of start-up
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logs."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress to stderr."),
) -> None:
    _state["debug"] = debug
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


register_all(app)


def main() -> None:
    """Console-script entry point: bad input is one line on stderr and exit 2, never a traceback."""
    try:
        # Without standalone mode, click returns (not raises) the code of a ``typer.Exit``.
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc != 0:
            sys.exit(rc)
    except UserError as e:
        if _state["debug"]:
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except ExternalError as e:
        if _state["debug"]:
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as e:  # usage errors (typer vendors click's exception classes)
        show = getattr(e, "show", None)
        if callable(show):
            show()
        else:
            print(f"error: {e}", file=sys.stderr)
        usage = type(e).__name__ in ("UsageError", "BadParameter", "NoSuchOption", "MissingParameter")
        sys.exit(2 if usage else int(getattr(e, "exit_code", 1)))
    except Exception as e:
        if _state["debug"]:
            raise
        print(
            f"error: unexpected {e.__class__.__name__}: {e} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
