"""``python -m tests.cli_worker``: one process that runs ``gemma-sre`` commands one after another.

Each line on stdin is a JSON ``{"argv": [...], "env": {...}}``; the process takes ``env`` as its whole
environment, runs the console script's ``main()`` on ``argv`` (its exit-code mapping included) and
answers one JSON line ``{"code", "stdout", "stderr"}``.
Races between processes (two approvers on one plan) need processes, not a new interpreter per round:
importing the loop costs about two seconds of CPU a process, so a test's rounds share two of these.
The first round races processes that import as they go, the later ones warm processes. Tests about
the process boundary itself (exit status, signals, stdout) start ``gemma-sre`` afresh instead."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import traceback


def serve() -> None:
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        import mcp_tools.settings
        from agent.cli import main

        os.environ.clear()
        os.environ.update(request["env"])
        mcp_tools.settings._selected_profile = None  # an earlier command's --profile
        mcp_tools.settings.get_settings.cache_clear()  # as a new process would read the environment
        logging.root.handlers.clear()  # the CLI's logging writes to this round's stderr
        sys.argv = ["gemma-sre", *request["argv"]]
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:  # what would end a process with a traceback and exit 1
            traceback.print_exc()
            code = 1
        finally:
            got_out, got_err = sys.stdout.getvalue(), sys.stderr.getvalue()
            sys.stdout, sys.stderr = out, sys.__stderr__
        out.write(json.dumps({"code": code, "stdout": got_out, "stderr": got_err}) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
