"""Where threads are checkpointed: SQLite under the state directory, or Postgres for a postgresql:// URL.

SQLite (langgraph-checkpoint-sqlite) is the default: ``<state_dir>/checkpoints.sqlite``, or the path
``GEMMA_SRE_CHECKPOINT_URL`` names (a plain path or ``sqlite:///path``). A ``postgresql://`` URL uses
langgraph-checkpoint-postgres, an optional extra (``pip install 'gemma-sre[postgres]'``) imported only
then.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from mcp_tools.errors import UserError

DEFAULT_FILE = "checkpoints.sqlite"


def sqlite_path(url: str | None, state_dir: Path) -> Path:
    if not url:
        return state_dir / DEFAULT_FILE
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if "://" in url:
        raise UserError(
            f"GEMMA_SRE_CHECKPOINT_URL: unsupported scheme in {url.split('://')[0]!r}; "
            "use a file path, sqlite:///path or postgresql://..."
        )
    return Path(url).expanduser()


@contextmanager
def open_checkpointer(url: str | None, state_dir: Path) -> Iterator[BaseCheckpointSaver]:
    """A checkpointer for the duration of the ``with`` block."""
    if url and url.startswith(("postgresql://", "postgres://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver  # type: ignore[import-not-found]
        except ImportError:
            raise UserError(
                "GEMMA_SRE_CHECKPOINT_URL is a Postgres URL but langgraph-checkpoint-postgres is not "
                "installed: pip install 'gemma-sre[postgres]'"
            ) from None
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_path(url, state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()
