"""The test support's warm CLI worker: an answer that came too late is never read as the next one."""

from __future__ import annotations

import os

import pytest

from tests.processes import CliWorker


def test_a_worker_that_timed_out_is_replaced_so_its_late_answer_is_not_the_next_tests() -> None:
    worker = CliWorker()
    try:
        worker.start("--version", env=dict(os.environ))
        # A fresh interpreter imports the CLI first: it cannot answer within a millisecond.
        with pytest.raises(AssertionError, match="did not answer"):
            worker.result(timeout_s=0.001)
        worker.start("--help", env=dict(os.environ))
        got = worker.result()
        assert got.returncode == 0 and "Usage" in got.stdout, got
        assert "0.1.0" not in got.stdout.splitlines()[0]  # not the late answer to --version
    finally:
        worker.close()
