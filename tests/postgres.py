"""A throw-away local PostgreSQL for tests: ``initdb`` and ``pg_ctl`` start a cluster per module, and
each test gets a database of its own. Importing this module skips the importing test module when the
server binaries or the optional ``postgres`` extra are missing.

    from tests.postgres import postgres_cluster, postgres_url  # noqa: F401  (fixtures)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripted_openai import free_port

pytest.importorskip("langgraph.checkpoint.postgres")
if not (shutil.which("initdb") and shutil.which("pg_ctl")):
    pytest.skip("no local PostgreSQL server binaries", allow_module_level=True)


@pytest.fixture(scope="module")
def postgres_cluster() -> Iterator[str]:
    """One throw-away cluster for the module (initdb and a start cost seconds); each test gets its
    own database in it (``postgres_url``)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gemma-sre-pg-"))  # not under pytest's 0700 root directory
    data = base / "pg"
    env = {**os.environ, "LC_ALL": "C"}
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as nobody in a directory it owns
        shutil.chown(base, "nobody")
        run_as = ["runuser", "-u", "nobody", "--"]
    subprocess.run(
        [*run_as, "initdb", "-D", str(data), "-U", "gemma", "--auth=trust", "--encoding=UTF8", "--locale=C"],
        check=True,
        capture_output=True,
        env=env,
    )
    # The server outlives pg_ctl: give it a log file, not our pipes (or run() waits for it forever).
    # The free port is free when asked, not when the server binds it (another test's server may take it
    # first): a start that lost that race tries another port.
    log = base / "server.log"
    for _ in range(3):
        port = free_port()
        started = subprocess.run(
            [*run_as, "pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "30"]
            + ["-o", f"-p {port} -k {base} -h 127.0.0.1", "start"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            timeout=60,
        )
        if started.returncode == 0:
            break
        if "Address already in use" not in _tail(log):
            raise RuntimeError(f"pg_ctl start failed:\n{_tail(log)}")
    else:
        raise RuntimeError(f"pg_ctl start lost the port race three times:\n{_tail(log)}")
    try:
        yield f"postgresql://gemma@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*run_as, "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


def _tail(log: Path) -> str:
    """The end of the server's log ("" before it wrote one)."""
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


@pytest.fixture
def postgres_url(postgres_cluster: str, request: pytest.FixtureRequest) -> str:
    """A fresh database of its own for each test, in the module's cluster."""
    import psycopg

    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]
    with psycopg.connect(f"{postgres_cluster}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_cluster}/{name}"
