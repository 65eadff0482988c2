"""Service leases and the cycle ledger: several watcher replicas share one database, and each service's
cycle runs in exactly one of them at a time.

Three tables, in the checkpoint store's database (Postgres for ``GEMMA_SRE_CHECKPOINT_URL=postgresql://``,
else the SQLite file under the state directory, for replicas on one host):

- ``gemma_sre_leases`` (key, holder, token, expires_at): a lease on one service. ``acquire`` is one
  ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expires_at < now``: it lands only on a free or expired
  row, and every landing raises the row's ``token`` (a fencing token: a later holder always has a
  larger one). The holder renews while the cycle runs (``Renewer``) and releases it at the end. A
  replica that dies stops renewing, so its lease is free at most one lease period later. Times are
  the database's clock, so replicas on different hosts need not agree on theirs.
- ``gemma_sre_cycle_runs`` (service key, period, ...): the ledger, one row per service and period
  (``period`` = the round's number, start time // interval). ``claim_run`` inserts it, or takes over a
  row still ``running`` under an older token (its holder lost the lease: killed mid-cycle), counting
  the attempt and naming the previous holder; a row already ``done``, ``failed`` or ``skipped`` is
  never claimed again. So each service's cycle of a period finishes at most once, fleet-wide.
- ``gemma_sre_watch_state`` (key, state): the watch tracker's state (incidents, ``since``, the thread
  waiting for a decision), so the replica that picks a service up carries on where the last one
  stopped. ``finish_run`` settles the ledger row and stores the state in one transaction, fenced:
  it lands only while the caller's token is the lease's current one and the lease has not expired.

Why a table and not advisory locks: a session advisory lock dies with its connection, which is what
a crashed replica needs, but it also dies with a network blip the replica does not notice, and it
cannot say who held a service or when it ran. The ledger needs a table anyway; the lease beside it
costs one row per service.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from graph.checkpoint import SqlStore, Table, open_connection
from mcp_tools.errors import UserError

log = logging.getLogger(__name__)

RunStatus = Literal["running", "done", "failed", "skipped", "interrupted"]

#: Statuses that settle a service's period: nobody runs it again. ``interrupted``: its holder died
#: mid-cycle and the round's deadline passed before another took it over (the next round runs it).
SETTLED: tuple[RunStatus, ...] = ("done", "failed", "skipped", "interrupted")

LEASES = Table(
    "gemma_sre_leases",
    "key TEXT NOT NULL, holder TEXT NOT NULL, token BIGINT NOT NULL, expires_at DOUBLE PRECISION NOT NULL",
    key="key",
)
RUNS = Table(
    "gemma_sre_cycle_runs",
    "service_key TEXT NOT NULL, period BIGINT NOT NULL, holder TEXT NOT NULL, token BIGINT NOT NULL, "
    "attempts INTEGER NOT NULL, previous_holder TEXT, status TEXT NOT NULL, "
    "started_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION, detail TEXT",
    key="service_key, period",
)
STATE = Table(
    "gemma_sre_watch_state",
    "key TEXT NOT NULL, state TEXT NOT NULL, token BIGINT NOT NULL, saved_at DOUBLE PRECISION NOT NULL",
    key="key",
)
LEASES_TABLE, RUNS_TABLE, STATE_TABLE = LEASES.name, RUNS.name, STATE.name

#: The fence of a write: the caller's lease (key, token) is the live one.
_HELD = f"EXISTS (SELECT 1 FROM {LEASES_TABLE} WHERE key = ? AND token = ? AND expires_at >= {{now}})"

_RUN_COLUMNS = RUNS.column_names


class LeaseLost(RuntimeError):
    """The lease expired or was taken over: what this holder ran is not recorded."""


class Lease(BaseModel):
    key: str
    holder: str
    token: int


class RunRecord(BaseModel):
    """One service's cycle in one period, as the ledger holds it."""

    service_key: str
    period: int
    holder: str
    token: int
    attempts: int  # > 1: an earlier holder died mid-cycle and this one ran it again
    previous_holder: str | None = None
    status: RunStatus
    started_at: float  # the database's clock, epoch seconds
    finished_at: float | None = None
    detail: str | None = None


class LeaseStore(SqlStore):
    """Leases, the ledger and the watch state on one DB-API connection (autocommit)."""

    TABLES = (LEASES, RUNS, STATE)
    DDL_LOCK = 0x67656D6D6C  # an advisory-lock key of our own, for the CREATE TABLEs only

    def __init__(self, conn: Any, *, postgres: bool) -> None:
        # The database's clock in epoch seconds (statement time in both).
        self._now = (
            "extract(epoch from clock_timestamp())"
            if postgres
            else "((julianday('now') - 2440587.5) * 86400.0)"
        )
        super().__init__(conn, postgres=postgres)

    def _sql(self, sql: str) -> str:
        return sql.replace("{now}", self._now).replace("?", self._ph)

    def now(self) -> float:
        rows, _ = self._execute("SELECT {now}")
        return float(rows[0][0])

    # --- leases ------------------------------------------------------------------------------
    def acquire(self, key: str, holder: str, ttl_s: float) -> Lease | None:
        """The lease on ``key`` for ``ttl_s`` seconds, when it is free or expired; None: held."""
        rows, _ = self._execute(
            f"INSERT INTO {LEASES_TABLE} (key, holder, token, expires_at) VALUES (?, ?, 1, {{now}} + ?) "
            f"ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, "
            f"token = {LEASES_TABLE}.token + 1, expires_at = excluded.expires_at "
            f"WHERE {LEASES_TABLE}.expires_at < {{now}} RETURNING token",
            (key, holder, float(ttl_s)),
        )
        return Lease(key=key, holder=holder, token=int(rows[0][0])) if rows else None

    def renew(self, lease: Lease, ttl_s: float) -> bool:
        """Extend a lease still held (same token, not expired); False: it was lost."""
        _, n = self._execute(
            f"UPDATE {LEASES_TABLE} SET expires_at = {{now}} + ? "
            "WHERE key = ? AND token = ? AND expires_at >= {now}",
            (float(ttl_s), lease.key, lease.token),
        )
        return n == 1

    def release(self, lease: Lease) -> None:
        """Free the lease now (the token stays, so the next holder's is larger)."""
        self._execute(
            f"UPDATE {LEASES_TABLE} SET expires_at = 0 WHERE key = ? AND token = ?",
            (lease.key, lease.token),
        )

    def live_leases(self) -> dict[str, str]:
        """Every lease not expired: key -> holder."""
        rows, _ = self._execute(f"SELECT key, holder FROM {LEASES_TABLE} WHERE expires_at >= {{now}}")
        return {str(k): str(h) for k, h in rows}

    # --- the ledger ----------------------------------------------------------------------------
    def claim_run(self, lease: Lease, period: int) -> RunRecord | None:
        """Start the lease's service's cycle of ``period``: a new row, or a takeover of one still
        ``running`` under an older token (a holder that died mid-cycle). None: already settled."""
        rows, _ = self._execute(
            f"INSERT INTO {RUNS_TABLE} (service_key, period, holder, token, attempts, status, started_at) "
            f"VALUES (?, ?, ?, ?, 1, 'running', {{now}}) "
            f"ON CONFLICT (service_key, period) DO UPDATE SET holder = excluded.holder, "
            f"token = excluded.token, attempts = {RUNS_TABLE}.attempts + 1, "
            f"previous_holder = {RUNS_TABLE}.holder, started_at = excluded.started_at "
            f"WHERE {RUNS_TABLE}.status = 'running' AND {RUNS_TABLE}.token < excluded.token "
            f"RETURNING {', '.join(_RUN_COLUMNS)}",
            (lease.key, int(period), lease.holder, lease.token),
        )
        if rows:  # older periods a dead holder left running are history now
            self._execute(
                f"UPDATE {RUNS_TABLE} SET status = 'interrupted', finished_at = {{now}}, "
                "detail = 'its holder stopped mid-cycle; not taken over within the round' "
                "WHERE service_key = ? AND period < ? AND status = 'running' AND token < ?",
                (lease.key, int(period), lease.token),
            )
        return _run(rows[0]) if rows else None

    def finish_run(
        self, lease: Lease, period: int, status: RunStatus, detail: str = "", *, state: str | None = None
    ) -> None:
        """Settle the cycle, and with ``state`` store the service's watch state in the same
        transaction (so a cycle is recorded done exactly when what it learnt is kept). Fenced: only
        while ``lease`` is the live one; LeaseLost otherwise, and nothing is written."""
        steps = [] if state is None else [_state_step(lease, state)]
        steps.append(
            (
                f"UPDATE {RUNS_TABLE} SET status = ?, finished_at = {{now}}, detail = ? "
                f"WHERE service_key = ? AND period = ? AND token = ? AND status = 'running' AND {_HELD}",
                (status, detail[:500], lease.key, int(period), lease.token, lease.key, lease.token),
            )
        )
        if not self._each_one_row(steps):
            raise LeaseLost(f"{lease.key}: the lease was lost before period {period}'s cycle was recorded")

    def save_state(self, lease: Lease, state: str) -> None:
        """Store the service's watch state outside a round (an alert's investigation), fenced as
        ``finish_run`` is: LeaseLost when ``lease`` is no longer the live one."""
        if not self._each_one_row([_state_step(lease, state)]):
            raise LeaseLost(f"{lease.key}: the lease was lost before the watch state was saved")

    def _each_one_row(self, steps: list[tuple[str, tuple[Any, ...]]]) -> bool:
        """Run ``steps`` in one transaction, kept only when each wrote exactly one row."""
        with self._lock:
            if self.postgres:
                import psycopg

                ok = False
                with self._conn.transaction():
                    for sql, params in steps:
                        if self._conn.execute(self._sql(sql), params).rowcount != 1:
                            raise psycopg.Rollback()
                    ok = True
                return ok
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in steps:
                    if self._conn.execute(self._sql(sql), params).rowcount != 1:
                        self._conn.execute("ROLLBACK")
                        return False
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return True

    def skip(self, service_key: str, period: int, holder: str, detail: str) -> bool:
        """Record that nobody reached ``service_key`` in ``period`` before the round's deadline (a row
        not yet there only: a cycle running or settled is left alone). True: this call recorded it."""
        _, n = self._execute(
            f"INSERT INTO {RUNS_TABLE} (service_key, period, holder, token, attempts, status, started_at, "
            f"finished_at, detail) VALUES (?, ?, ?, 0, 0, 'skipped', {{now}}, {{now}}, ?) "
            "ON CONFLICT (service_key, period) DO NOTHING",
            (service_key, int(period), holder, detail[:500]),
        )
        return n == 1

    def period_runs(self, period: int) -> dict[str, RunRecord]:
        rows, _ = self._execute(
            f"SELECT {', '.join(_RUN_COLUMNS)} FROM {RUNS_TABLE} WHERE period = ?", (int(period),)
        )
        return {r.service_key: r for r in map(_run, rows)}

    def runs(self, service_key: str | None = None) -> list[RunRecord]:
        """The ledger (one service's, or all), oldest period first."""
        where, params = ("WHERE service_key = ?", (service_key,)) if service_key else ("", ())
        rows, _ = self._execute(
            f"SELECT {', '.join(_RUN_COLUMNS)} FROM {RUNS_TABLE} {where} ORDER BY period, service_key",
            params,
        )
        return [_run(r) for r in rows]

    # --- the watch state -----------------------------------------------------------------------
    def load_state(self, key: str) -> str | None:
        rows, _ = self._execute(f"SELECT state FROM {STATE_TABLE} WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None


def _state_step(lease: Lease, state: str) -> tuple[str, tuple[Any, ...]]:
    """The fenced upsert of a service's watch state."""
    return (
        f"INSERT INTO {STATE_TABLE} (key, state, token, saved_at) SELECT ?, ?, ?, {{now}} WHERE {_HELD} "
        "ON CONFLICT (key) DO UPDATE SET state = excluded.state, token = excluded.token, "
        "saved_at = excluded.saved_at",
        (lease.key, state, lease.token, lease.key, lease.token),
    )


def _run(row: Any) -> RunRecord:
    return RunRecord.model_validate(dict(zip(_RUN_COLUMNS, row, strict=True)))


@contextmanager
def open_leases(url: str | None, state_dir: Path) -> Iterator[LeaseStore]:
    """The lease tables in the checkpoint store's database, for the ``with`` block."""
    with ExitStack() as stack:
        try:
            conn, postgres = stack.enter_context(open_connection(url, state_dir))
        except Exception as e:
            if not type(e).__module__.startswith("psycopg"):
                raise
            why = " ".join(str(e).split())[:200]
            raise UserError(
                f"GEMMA_SRE_CHECKPOINT_URL: cannot open the Postgres lease store ({why})"
            ) from None
        yield LeaseStore(conn, postgres=postgres)


@contextmanager
def held(
    store: LeaseStore,
    renewer: Renewer,
    key: str,
    holder: str,
    ttl_s: float,
    *,
    wait_s: float = 0.0,
    stop: threading.Event | None = None,
) -> Iterator[Lease | None]:
    """The lease on ``key`` for the block, kept alive by ``renewer`` and released at its end; None:
    another holder has it (still, after waiting up to ``wait_s``), or the database is out of reach."""
    until = time.monotonic() + wait_s
    lease = None
    while True:
        try:
            lease = store.acquire(key, holder, ttl_s)
        except Exception as e:  # noqa: BLE001 - the database is out of reach: as if held
            log.warning("lease %s: cannot acquire it (%s)", key, type(e).__name__)
        left = until - time.monotonic()
        if lease is not None or left <= 0 or (stop is not None and stop.is_set()):
            break
        (stop or threading.Event()).wait(min(POLL_S, left))
    if lease is None:
        yield None
        return
    renewer.hold(lease)
    try:
        yield lease
    finally:
        renewer.drop(lease)
        try:
            store.release(lease)
        except Exception:  # noqa: BLE001 - it expires on its own
            log.warning("lease %s: release failed; it expires in %.0fs", key, ttl_s)


#: How often a waiting holder tries a lease again.
POLL_S = 0.2


class Renewer:
    """Keeps the leases this replica holds alive: every ``ttl_s / 3`` each is renewed for ``ttl_s``.

    A lease that cannot be renewed (it expired: the process stalled longer than a lease, or the
    database was out of reach) is dropped and ``on_lost(key)`` called; the cycle running under it
    finds out when its fenced writes fail (``LeaseLost``)."""

    def __init__(self, store: LeaseStore, ttl_s: float, on_lost: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.on_lost = on_lost
        self._held: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lease-renewer", daemon=True)

    def __enter__(self) -> Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def hold(self, lease: Lease) -> None:
        with self._lock:
            self._held[lease.key] = lease

    def drop(self, lease: Lease) -> None:
        with self._lock:
            if self._held.get(lease.key) == lease:
                del self._held[lease.key]

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            with self._lock:
                held = list(self._held.values())
            for lease in held:
                try:
                    ok = self.store.renew(lease, self.ttl_s)
                except Exception as e:  # noqa: BLE001 - a failed renewal is a lost lease, not a crash
                    log.warning("lease %s: renewal failed (%s)", lease.key, type(e).__name__)
                    ok = False
                if not ok:
                    self.drop(lease)
                    if self.on_lost is not None:
                        self.on_lost(lease.key)
