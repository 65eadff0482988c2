"""The store's threads, newest first (``graph.checkpoint.recent_thread_ids``): on SQLite (here) and
Postgres (``tests/test_graph_postgres.py``) one aggregate query that reads no checkpoint, and never the
saver's ``list`` (which fetches every checkpoint of every thread); any other saver through ``list``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from graph.checkpoint import open_checkpointer, recent_thread_ids


def seed(saver: BaseCheckpointSaver) -> None:
    """Checkpoints of threads a, b, c written in the order a b c a (b's subgraph last): newest a, c, b."""
    for thread, ns in [("a", ""), ("b", ""), ("c", ""), ("a", ""), ("b", "child:1")]:
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})


def check_query_path(saver: BaseCheckpointSaver, monkeypatch: pytest.MonkeyPatch) -> None:
    """``saver``'s threads come from the aggregate query: its ``list`` is not called, nor its private
    ``_cursor`` (langgraph-checkpoint-postgres's, which may change in any release)."""
    seed(saver)

    def no_list(*_: Any, **__: Any) -> Any:
        raise AssertionError("recent_thread_ids read the checkpoints through list()")

    def no_private(*_: Any, **__: Any) -> Any:
        raise AssertionError("recent_thread_ids used the saver's private _cursor()")

    monkeypatch.setattr(type(saver), "list", no_list)
    if hasattr(type(saver), "_cursor"):
        monkeypatch.setattr(type(saver), "_cursor", no_private)
    assert recent_thread_ids(saver, 500) == ["a", "c", "b"]  # a subgraph's checkpoint moves nothing
    assert recent_thread_ids(saver, 2) == ["a", "c"]


def test_sqlite_threads_come_from_one_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_checkpointer(None, tmp_path) as saver:
        check_query_path(saver, monkeypatch)


def test_any_other_saver_is_read_through_its_list() -> None:
    saver = InMemorySaver()
    seed(saver)
    assert sorted(recent_thread_ids(saver, 500)) == ["a", "b", "c"]  # in the order its list gives
    assert len(recent_thread_ids(saver, 1)) == 1
