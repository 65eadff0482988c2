"""Where threads are checkpointed: SQLite under the state directory, or Postgres for a postgresql:// URL.

SQLite (langgraph-checkpoint-sqlite) is the default: ``<state_dir>/checkpoints.sqlite``, or the path
``GEMMA_SRE_CHECKPOINT_URL`` names (a plain path or ``sqlite:///path``). A ``postgresql://`` URL uses
langgraph-checkpoint-postgres, an optional extra (``pip install 'gemma-sre[postgres]'``, part of the
dev extra) imported only then; the database must use the UTF8 encoding (with ``SQL_ASCII`` psycopg
hands back bytes and resumed threads do not find their checkpoints).

Beside the checkpoints, in the same database: the decisions table (one atomic first-wins record per
pending approval, ``open_decisions``) and a per-thread lease (``thread_lease``) so that two live
processes never run one thread at once.

The ledger (the decisions and the applies tables, ``open_ledger``) is what makes approvals and apply
exactly-once, so it lives where every process that runs the graph can see it: by default the checkpoint
store's database, or ``GEMMA_SRE_LEDGER_URL`` (a sqlite path or a postgresql:// URL). Under LangGraph
Server the checkpointer is the server's, not ours: there the ledger is a database the deployment shares
(Postgres), or the state directory for one local ``langgraph dev``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel, Field

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
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise UserError(
                "GEMMA_SRE_CHECKPOINT_URL is a Postgres URL but langgraph-checkpoint-postgres is not "
                "installed: pip install 'gemma-sre[postgres]'"
            ) from None
        import psycopg

        with ExitStack() as stack:
            try:
                pg = stack.enter_context(PostgresSaver.from_conn_string(_named(url, "checkpoints")))
                _setup_once(pg, url)
            except psycopg.Error as e:
                why = " ".join(str(e).split())[:200]
                raise UserError(
                    f"GEMMA_SRE_CHECKPOINT_URL: cannot open the Postgres checkpoint store ({why})"
                ) from None
            yield pg
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_path(url, state_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    except (OSError, sqlite3.Error) as e:
        raise UserError(
            f"{path}: cannot open the checkpoint store ({e.__class__.__name__}: the state dir "
            "must be a writable directory)"
        ) from None
    try:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            lite = SqliteSaver(conn)
            lite.setup()
        except sqlite3.Error as e:
            raise UserError(f"{path}: not a usable SQLite checkpoint store ({e})") from None
        yield lite
    finally:
        conn.close()


# The threads of the store, the most recently checkpointed first: one aggregate over the savers'
# ``checkpoints`` table (thread_id, checkpoint_ns, checkpoint_id; the same in langgraph-checkpoint-sqlite
# and -postgres). Checkpoint ids are time-ordered (uuid6), so the newest is the largest; a subgraph's
# checkpoints (a non-empty namespace) belong to their root's thread.
_RECENT_THREADS = (
    "SELECT thread_id, MAX(checkpoint_id) AS newest FROM checkpoints WHERE checkpoint_ns = '' "
    "GROUP BY thread_id ORDER BY newest DESC LIMIT {ph}"
)


def recent_thread_ids(saver: BaseCheckpointSaver, limit: int) -> list[str]:
    """Up to ``limit`` thread ids in ``saver``'s store, the most recently checkpointed first.

    SQLite and Postgres: one query that reads no checkpoint (``list()`` would fetch and deserialise
    every checkpoint of every thread). Any other saver: its public ``list``, in the order it yields
    (newest first for the SQL savers, thread by thread for the in-memory one), read until ``limit``
    threads are seen."""
    from contextlib import closing

    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            cur.execute(_RECENT_THREADS.format(ph="?"), (limit,))
            return [str(row[0]) for row in cur.fetchall()]
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:  # the optional extra: then no saver is one
        PostgresSaver = None  # type: ignore[assignment,misc]  # noqa: N806
    if PostgresSaver is not None and isinstance(saver, PostgresSaver):
        return _postgres_recent(saver, limit)
    seen: dict[str, None] = {}
    listing: Any = saver.list(None)  # a generator: closed at once, a saver's cursor may hold its lock
    with closing(listing) as checkpoints:
        for tup in checkpoints:
            conf = tup.config["configurable"]
            if conf.get("checkpoint_ns", ""):
                continue  # a subgraph's checkpoint: its thread is the root's
            seen.setdefault(str(conf["thread_id"]), None)
            if len(seen) >= limit:
                break
    return list(seen)


def _postgres_recent(saver: Any, limit: int) -> list[str]:
    """``recent_thread_ids`` on a ``PostgresSaver``, through its public ``conn`` (a psycopg connection,
    used under the saver's ``lock`` as the saver uses it, or a pool, one connection borrowed)."""
    from psycopg.rows import tuple_row
    from psycopg_pool import ConnectionPool

    sql, args = _RECENT_THREADS.format(ph="%s"), (limit,)
    if isinstance(saver.conn, ConnectionPool):
        with saver.conn.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            rows = cur.execute(sql, args).fetchall()
    else:
        with saver.lock, saver.conn.cursor(row_factory=tuple_row) as cur:
            rows = cur.execute(sql, args).fetchall()
    return [str(row[0]) for row in rows]


_SETUP_LOCK = 0x67656D6D73  # an advisory-lock key for the checkpointer's migrations
_set_up: set[str] = set()  # the Postgres URLs this process has run the migrations on


def _setup_once(pg: Any, url: str) -> None:
    """The checkpointer's migrations, once per process and database. Processes opening a new
    database at once race in them (duplicate keys, deadlocks), so one runs them at a time; the
    others wait by polling a try-lock, outside any transaction, because a migration's
    ``CREATE INDEX CONCURRENTLY`` waits for every open transaction (a blocked lock wait included)."""
    if url in _set_up:
        return
    import time

    def locked() -> bool:
        row = pg.conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (_SETUP_LOCK,)).fetchone()
        return bool(row["got"] if isinstance(row, dict) else row[0])  # the saver's rows are dicts

    while not locked():
        time.sleep(0.05)
    try:
        pg.setup()
    finally:
        pg.conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
    _set_up.add(url)


# --- Decisions: one per pending approval, first one wins ------------------------------------------
#
# The approval interrupt is answered by whichever process resumes the thread; two processes (two
# ``approve``s, ``approve`` against ``reject``, the CLI against MCP) could both resume it. So every
# decision is first recorded with one atomic ``INSERT ... ON CONFLICT DO NOTHING`` keyed by
# (thread id, plan key) in the checkpoint store's own database: the insert that lands wins, every
# other process reads the winner's row back and resumes nothing. The apply node refuses to run unless
# the row is an approval carrying the same claim as the state's approval, so a process that resumed
# without winning can never send a change.


@dataclass(frozen=True)
class Table:
    """One of our tables: its columns as SQL writes them (``name TYPE [NOT NULL]``, comma-separated)
    and its primary key. Its ``ddl`` runs at open (``CREATE TABLE IF NOT EXISTS``, the same text in
    SQLite and Postgres); ``column_names`` is the order rows are read and written in."""

    name: str
    columns: str
    key: str

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.split()[0] for c in self.columns.split(","))

    @property
    def ddl(self) -> str:
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({self.columns}, PRIMARY KEY ({self.key}))"


DECISIONS = Table(
    "gemma_sre_decisions",
    "thread_id TEXT NOT NULL, plan_key TEXT NOT NULL, decision TEXT NOT NULL, principal TEXT NOT NULL, "
    "note TEXT, reason TEXT, approval_id TEXT NOT NULL, claim TEXT NOT NULL, at TEXT NOT NULL",
    key="thread_id, plan_key",
)
DECISIONS_TABLE = DECISIONS.name

# One row per plan applied: written when the change was made (the new revision is known), read before
# apply sends anything. A replayed run (a fork of the thread from before apply, a retried run on another
# replica) finds it and sends nothing, whatever the service's template says by then.
APPLIES = Table(
    "gemma_sre_applies",
    "thread_id TEXT NOT NULL, apply_key TEXT NOT NULL, approval_id TEXT NOT NULL, revision TEXT NOT NULL, "
    "at TEXT NOT NULL",
    key="thread_id, apply_key",
)
APPLIES_TABLE = APPLIES.name

# The audit log's copy in a shared ledger (``GEMMA_SRE_LEDGER_URL``): the state directory is one
# process's disk, and under LangGraph Server a run retried on another replica must still find the
# approval it carries out (``graph.audit.approved_ids``). Keyed by the event's id: a re-run adds nothing.
AUDIT = Table(
    "gemma_sre_audit",
    "event_id TEXT NOT NULL, thread_id TEXT NOT NULL, event TEXT NOT NULL, approval_id TEXT, "
    "at TEXT NOT NULL, record TEXT NOT NULL",
    key="event_id",
)
AUDIT_TABLE = AUDIT.name

_COLUMNS = DECISIONS.column_names
_APPLY_COLUMNS = APPLIES.column_names


class SqlStore:
    """Our tables on one autocommit DB-API connection (``open_connection``): each statement is its own
    transaction, one at a time. ``TABLES`` are created at open; in Postgres under an advisory lock
    (``DDL_LOCK``), because concurrent ``CREATE TABLE IF NOT EXISTS`` can collide in its catalog."""

    TABLES: tuple[Table, ...] = ()
    DDL_LOCK = 0

    def __init__(self, conn: Any, *, postgres: bool) -> None:
        self._conn = conn
        self.postgres = postgres
        self._ph = "%s" if postgres else "?"
        self._lock = threading.Lock()
        if postgres:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.DDL_LOCK,))
                for table in self.TABLES:
                    conn.execute(table.ddl)
        else:
            for table in self.TABLES:
                self._execute(table.ddl)

    def _sql(self, sql: str) -> str:
        """The statement as this database takes it (a subclass's own placeholders filled in)."""
        return sql

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[Any], int]:
        with self._lock:
            cur = self._conn.cursor()
            try:
                cur.execute(self._sql(sql), params)
                rows = cur.fetchall() if cur.description else []
                return list(rows), cur.rowcount
            finally:
                cur.close()

    def _insert_new(self, table: Table, row: dict[str, Any]) -> bool:
        """Insert ``row`` (by column name) unless a row with its key is there: first one wins.
        Whether this one was written."""
        cols = table.column_names
        _, count = self._execute(
            f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([self._ph] * len(cols))}) "
            f"ON CONFLICT ({table.key}) DO NOTHING",
            tuple(row[c] for c in cols),
        )
        return bool(count and count > 0)


class DecisionRecord(BaseModel):
    """The decision recorded for one plan of one thread (the first one made)."""

    thread_id: str
    plan_key: str
    decision: Literal["approve", "reject"]
    principal: str  # the authenticated identity: the OS user (CLI, REPL), the MCP token's principal
    note: str | None = None  # a name the person typed (``--approver``): kept beside, never instead
    reason: str | None = None
    approval_id: str
    claim: str = Field(default_factory=lambda: uuid.uuid4().hex)  # which resume carries it out
    at: str

    @property
    def who(self) -> str:
        return self.principal + (f" (note: {self.note})" if self.note and self.note != self.principal else "")

    def verb(self) -> str:
        return "approved" if self.decision == "approve" else "rejected"


class Decisions(SqlStore):
    """The decisions, applies and audit tables (the ledger)."""

    TABLES = (DECISIONS, APPLIES, AUDIT)
    DDL_LOCK = 0x67656D6D61  # an advisory-lock key of our own ("gemma")

    def claim(self, record: DecisionRecord) -> tuple[bool, DecisionRecord]:
        """Record ``record`` unless this plan already has a decision: (won, the decision that stands)."""
        self._insert_new(DECISIONS, record.model_dump())
        standing = self.get(record.thread_id, record.plan_key)
        if standing is None:  # cannot happen: the row was just written or was there
            raise RuntimeError(f"decision for thread {record.thread_id!r} vanished")
        return standing.claim == record.claim, standing

    def get(self, thread_id: str, plan_key: str) -> DecisionRecord | None:
        rows, _ = self._execute(
            f"SELECT {', '.join(_COLUMNS)} FROM {DECISIONS_TABLE} WHERE thread_id = {self._ph} "
            f"AND plan_key = {self._ph}",
            (thread_id, plan_key),
        )
        return _record(rows[0]) if rows else None

    def for_thread(self, thread_id: str) -> list[DecisionRecord]:
        rows, _ = self._execute(
            f"SELECT {', '.join(_COLUMNS)} FROM {DECISIONS_TABLE} WHERE thread_id = {self._ph} ORDER BY at",
            (thread_id,),
        )
        return [_record(r) for r in rows]

    def applied(self, thread_id: str, apply_key: str) -> AppliedRecord | None:
        """The change recorded as made for this plan of this thread (None: not applied yet)."""
        rows, _ = self._execute(
            f"SELECT {', '.join(_APPLY_COLUMNS)} FROM {APPLIES_TABLE} WHERE thread_id = {self._ph} "
            f"AND apply_key = {self._ph}",
            (thread_id, apply_key),
        )
        if not rows:
            return None
        row = rows[0]
        raw = row if isinstance(row, dict) else dict(zip(_APPLY_COLUMNS, row, strict=True))
        return AppliedRecord.model_validate(raw)

    def record_applied(self, rec: AppliedRecord) -> AppliedRecord:
        """Record that ``rec``'s change was made, unless one was already: the record that stands."""
        self._insert_new(APPLIES, rec.model_dump())
        return self.applied(rec.thread_id, rec.apply_key) or rec

    def audit_append(
        self, event_id: str, thread_id: str, event: str, approval_id: str | None, at: str, record: str
    ) -> bool:
        """Add one audit record (its JSON line) unless its event id is there: whether it was added."""
        row = {"event_id": event_id, "thread_id": thread_id, "event": event, "approval_id": approval_id}
        return self._insert_new(AUDIT, {**row, "at": at, "record": record})

    def audit_approved_ids(self) -> set[str]:
        rows, _ = self._execute(
            f"SELECT approval_id FROM {AUDIT_TABLE} WHERE event = {self._ph} AND approval_id IS NOT NULL",
            ("approval",),
        )
        return {str(r[0] if not isinstance(r, dict) else r["approval_id"]) for r in rows}


class AppliedRecord(BaseModel):
    """A plan's change, made: the revision it created under its approval."""

    thread_id: str
    apply_key: str
    approval_id: str
    revision: str
    at: str


def _record(row: Any) -> DecisionRecord:
    if isinstance(row, dict):
        return DecisionRecord.model_validate(row)
    return DecisionRecord.model_validate(dict(zip(_COLUMNS, row, strict=True)))


def _is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("postgresql://", "postgres://"))


def _named(url: str, role: str) -> str:
    """``url`` for a connection that says what it is for in ``pg_stat_activity`` (``application_name``
    "gemma-sre <role>": checkpoints, ledger, lease, store), unless the URL or ``PGAPPNAME`` names one."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if "application_name" in conninfo_to_dict(url) or "PGAPPNAME" in os.environ:
        return url
    return make_conninfo(url, application_name=f"gemma-sre {role}")


def _pg_connect(url: str, role: str) -> Any:
    """An autocommit psycopg connection, named for its ``role`` (``_named``)."""
    import psycopg

    return psycopg.connect(_named(url, role), autocommit=True)


@contextmanager
def open_connection(url: str | None, state_dir: Path, role: str = "store") -> Iterator[tuple[Any, bool]]:
    """An autocommit connection to the checkpoint store's database (``url``: a postgresql:// URL, a
    SQLite path or None for the state directory's file), and whether it is Postgres, for the block.
    ``role``: what it is for, as Postgres shows it (``_pg_connect``)."""
    if _is_postgres(url):
        with _pg_connect(str(url), role) as pg:
            yield pg, True
        return
    path = sqlite_path(url, state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        yield conn, False
    finally:
        conn.close()


@contextmanager
def open_decisions(url: str | None, state_dir: Path) -> Iterator[Decisions]:
    """The decisions table in the database the checkpointer uses, for the ``with`` block."""
    with open_connection(url, state_dir, role="ledger") as (conn, postgres):
        yield Decisions(conn, postgres=postgres)


def ledger_url(settings: Any = None) -> str | None:
    """Where the ledger is: ``GEMMA_SRE_LEDGER_URL``, else the checkpoint store's
    (``GEMMA_SRE_CHECKPOINT_URL``), else None (SQLite under the state directory)."""
    from mcp_tools.settings import get_settings

    s = settings or get_settings()
    return s.ledger_url or s.checkpoint_url


@contextmanager
def open_ledger(state_dir: Path) -> Iterator[Decisions]:
    """The decisions and applies tables where ``ledger_url()`` says, for the ``with`` block."""
    url = ledger_url()
    with ExitStack() as stack:
        try:
            store = stack.enter_context(open_decisions(url, state_dir))
        except Exception as e:
            if not isinstance(e, OSError | sqlite3.Error) and not type(e).__module__.startswith("psycopg"):
                raise
            where = "GEMMA_SRE_LEDGER_URL" if url else str(sqlite_path(url, state_dir))
            why = " ".join(str(e).split())[:200]
            raise UserError(f"{where}: cannot open the decisions ledger ({why})") from None
        yield store


@contextmanager
def thread_lease(url: str | None, state_dir: Path, thread_id: str) -> Iterator[bool]:
    """Whether this process may run ``thread_id`` now: False while another live process runs it.

    SQLite: an exclusive ``flock`` on a file beside the database; Postgres: a session advisory lock.
    Both are released when the process ends, however it ends, so a killed process leaves the thread
    free for whoever carries it on.
    """
    digest = hashlib.sha256(thread_id.encode()).hexdigest()
    if _is_postgres(url):
        with _pg_connect(str(url), "lease") as pg:
            key = int(digest[:15], 16)  # fits a signed bigint
            row = pg.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            got = bool(row and row[0])
            try:
                yield got
            finally:
                if got:
                    pg.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return
    locks = sqlite_path(url, state_dir).parent / "thread-locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / f"{digest[:32]}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
