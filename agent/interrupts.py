"""Ctrl-C for the long-running faces (watch, the REPL's commands): it stops them where it lands."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """While a command runs, Ctrl-C raises KeyboardInterrupt wherever the main thread is.

    ``asyncio.run`` (each observation's and the model's calls run under one) otherwise turns a SIGINT into
    a cancellation of its task, and Python 3.11 loses that interrupt when the task ends anyway: a call
    that completes as it is cancelled, a library that absorbs the cancellation (``asyncio.wait_for``'s
    race before 3.12). A watch would go on to its next cycle, a REPL command to its end, as if no one had
    pressed it. With a handler of ours installed, ``asyncio.run`` leaves SIGINT alone."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler (and receives the signal)
        return
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
