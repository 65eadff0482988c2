"""What ``gemma-sre serve`` keeps, in ``<state_dir>/serve/serve.sqlite``: the investigations (one per
service and open incident, each with its graph thread), every alert received for them, the Slack
message that asks for each thread's decision, and the Slack request signatures already seen (replay
refusal). Graph state stays in the checkpoint store; this is only the map from alerts to threads.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from graph.state import now_iso

_DDL = """
CREATE TABLE IF NOT EXISTS investigations (
    thread_id TEXT PRIMARY KEY,
    service_key TEXT NOT NULL,
    project TEXT, location TEXT, service TEXT NOT NULL,
    opened_at TEXT NOT NULL, closed_at TEXT, status TEXT NOT NULL DEFAULT 'starting'
);
CREATE INDEX IF NOT EXISTS investigations_open ON investigations (service_key, closed_at);
CREATE TABLE IF NOT EXISTS alerts (
    thread_id TEXT NOT NULL, source TEXT NOT NULL, alert_id TEXT NOT NULL, state TEXT NOT NULL,
    policy TEXT, summary TEXT, received_at TEXT NOT NULL, evidence INTEGER NOT NULL DEFAULT 0,
    note TEXT
);
CREATE TABLE IF NOT EXISTS slack_messages (
    thread_id TEXT PRIMARY KEY, channel TEXT NOT NULL, ts TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS slack_seen (
    signature TEXT PRIMARY KEY, seen_at REAL NOT NULL
);
"""

#: Seen Slack signatures are kept this long (Slack's timestamp window is 5 minutes; twice that).
SEEN_KEEP_S = 600.0


class Investigation(BaseModel):
    thread_id: str
    service_key: str
    project: str | None = None
    location: str | None = None
    service: str
    opened_at: str
    closed_at: str | None = None
    status: str = "starting"


class AlertRecord(BaseModel):
    thread_id: str
    source: str
    alert_id: str
    state: str
    policy: str | None = None
    summary: str | None = None
    received_at: str
    evidence: bool = False
    note: str | None = None


class InvestigationView(Investigation):
    alerts: list[AlertRecord] = Field(default_factory=list)
    open_alerts: int = 0


def service_key(project: str | None, location: str | None, service: str) -> str:
    return f"{project or '-'}/{location or '-'}/{service}"


class Ledger:
    """One SQLite connection, serialised by a lock (the server's handlers run in threads)."""

    def __init__(self, state_dir: Path) -> None:
        path = Path(state_dir) / "serve" / "serve.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_DDL)

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params).fetchall()]

    # --- investigations ---------------------------------------------------------------------------

    def open_for(self, key: str) -> Investigation | None:
        rows = self._rows(
            "SELECT * FROM investigations WHERE service_key = ? AND closed_at IS NULL "
            "ORDER BY opened_at DESC LIMIT 1",
            (key,),
        )
        return Investigation.model_validate(rows[0]) if rows else None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def join_or_start(self, inv: Investigation) -> tuple[Investigation, bool]:
        """The open investigation of ``inv.service_key``, or ``inv`` recorded as it: (it, started).
        ``inv``'s thread already recorded (closed): it is reopened."""
        with self._transaction():
            found = self.open_for(inv.service_key)
            if found is None:
                self._conn.execute(
                    "INSERT INTO investigations (thread_id, service_key, project, location, service, "
                    "opened_at, status) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (thread_id) DO UPDATE SET closed_at = NULL",
                    (
                        inv.thread_id,
                        inv.service_key,
                        inv.project,
                        inv.location,
                        inv.service,
                        inv.opened_at,
                        inv.status,
                    ),
                )
        return (found, False) if found is not None else (inv, True)

    def retarget(self, old: str, new: str) -> None:
        """Investigation ``old`` is thread ``new``'s (a fleet watcher opened a thread for the incident
        first): its alerts move there, and ``new``'s investigation is the open one."""
        with self._transaction():
            taken = self._conn.execute("SELECT 1 FROM investigations WHERE thread_id = ?", (new,)).fetchone()
            if taken:
                self._conn.execute("UPDATE investigations SET closed_at = NULL WHERE thread_id = ?", (new,))
                self._conn.execute("DELETE FROM investigations WHERE thread_id = ?", (old,))
            else:
                self._conn.execute("UPDATE investigations SET thread_id = ? WHERE thread_id = ?", (new, old))
            self._conn.execute("UPDATE alerts SET thread_id = ? WHERE thread_id = ?", (new, old))

    def set_status(self, thread_id: str, status: str) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE investigations SET status = ? WHERE thread_id = ?", (status, thread_id)
            )

    def close_investigation(self, thread_id: str) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE investigations SET closed_at = ? WHERE thread_id = ? AND closed_at IS NULL",
                (now_iso(), thread_id),
            )

    def get(self, thread_id: str) -> InvestigationView | None:
        rows = self._rows("SELECT * FROM investigations WHERE thread_id = ?", (thread_id,))
        if not rows:
            return None
        alerts = [
            AlertRecord.model_validate(r)
            for r in self._rows("SELECT * FROM alerts WHERE thread_id = ? ORDER BY rowid", (thread_id,))
        ]
        return InvestigationView(**rows[0], alerts=alerts, open_alerts=len(self.open_alert_ids(thread_id)))

    def all(self) -> list[InvestigationView]:
        ids = [r["thread_id"] for r in self._rows("SELECT thread_id FROM investigations ORDER BY opened_at")]
        return [v for v in (self.get(t) for t in ids) if v is not None]

    # --- alerts -----------------------------------------------------------------------------------

    def add_alert(self, rec: AlertRecord) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO alerts (thread_id, source, alert_id, state, policy, summary, received_at, "
                "evidence, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.thread_id,
                    rec.source,
                    rec.alert_id,
                    rec.state,
                    rec.policy,
                    rec.summary,
                    rec.received_at,
                    int(rec.evidence),
                    rec.note,
                ),
            )

    def thread_of_alert(self, key: str, source: str, alert_id: str) -> str | None:
        """The investigation an alert joined (the latest, for that service)."""
        rows = self._rows(
            "SELECT a.thread_id FROM alerts a JOIN investigations i ON i.thread_id = a.thread_id "
            "WHERE i.service_key = ? AND a.source = ? AND a.alert_id = ? ORDER BY a.rowid DESC LIMIT 1",
            (key, source, alert_id),
        )
        return str(rows[0]["thread_id"]) if rows else None

    def open_alert_ids(self, thread_id: str) -> set[tuple[str, str]]:
        """The alerts of a thread whose last word was ``open``."""
        last: dict[tuple[str, str], str] = {}
        for r in self._rows(
            "SELECT source, alert_id, state FROM alerts WHERE thread_id = ? ORDER BY rowid", (thread_id,)
        ):
            last[(r["source"], r["alert_id"])] = r["state"]
        return {k for k, v in last.items() if v == "open"}

    # --- Slack ------------------------------------------------------------------------------------

    def set_message(self, thread_id: str, channel: str, ts: str) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO slack_messages (thread_id, channel, ts) VALUES (?, ?, ?)",
                (thread_id, channel, ts),
            )

    def message(self, thread_id: str) -> tuple[str, str] | None:
        rows = self._rows("SELECT channel, ts FROM slack_messages WHERE thread_id = ?", (thread_id,))
        return (str(rows[0]["channel"]), str(rows[0]["ts"])) if rows else None

    def first_sight(self, signature: str) -> bool:
        """Record a Slack request signature: False when it was seen before (a replay)."""
        now = time.time()
        with self._lock:
            self._conn.execute("DELETE FROM slack_seen WHERE seen_at < ?", (now - SEEN_KEEP_S,))
            cur = self._conn.execute(
                "INSERT OR IGNORE INTO slack_seen (signature, seen_at) VALUES (?, ?)", (signature, now)
            )
            return cur.rowcount == 1
