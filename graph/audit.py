"""The append-only audit log: every decision and every mutation, one JSON line each.

``<state_dir>/audit.jsonl``. Who, what, when, the diff, the thread and the approval id. Entries are
only ever appended (under an exclusive lock, each one fsynced); an entry whose ``event_id`` is
already present is not written again, so a node that re-runs after a crash does not record the same
decision twice. A record torn by a crash mid-write is skipped on read (reported once) and ended
before the next record is appended. With a shared ledger (``GEMMA_SRE_LEDGER_URL``: LangGraph Server
replicas, watchers on several hosts) every record is also kept there, keyed by its event id.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from graph.state import now_iso

if TYPE_CHECKING:
    from graph.checkpoint import Decisions

AuditKind = Literal["approval", "rejection", "mutation", "mutation_failed", "rollback", "rollback_failed"]

AUDIT_FILE = "audit.jsonl"

log = logging.getLogger(__name__)


class AuditEvent(BaseModel):
    event: AuditKind
    thread_id: str
    service: str
    actor: str  # who decided, or "gemma-sre" for a mutation carried out under an approval
    approval_id: str | None = None
    what: str = ""  # one line: the plan's steps, the revision, the reason
    diff: str = ""
    revision: str | None = None
    at: str = Field(default_factory=now_iso)
    details: dict[str, Any] = Field(default_factory=dict)
    event_id: str = ""

    def model_post_init(self, __context: Any) -> None:
        if not self.event_id:
            raw = f"{self.event}|{self.thread_id}|{self.approval_id}|{self.revision}|{self.what}"
            self.event_id = hashlib.sha256(raw.encode()).hexdigest()[:20]


def audit_path(state_dir: Path | str) -> Path:
    return Path(state_dir) / AUDIT_FILE


def _redact(text: str) -> str:
    from mcp_tools.redact import redact

    return redact(text)


def _whole(line: str) -> bool:
    """A complete record (a torn one that got as far as the event id recorded nothing)."""
    try:
        json.loads(line)
    except ValueError:
        return False
    return line.endswith("\n")


def append(event: AuditEvent, *, state_dir: Path | str, ledger: Decisions | None = None) -> bool:
    """Append one event (secrets redacted). False when the same event was already recorded.
    ``ledger``: the caller's open ledger (one per call chain), else opened when one is shared."""
    from graph.checkpoint import ledger_url

    clean = event.model_copy(update={"what": _redact(event.what), "diff": _redact(event.diff)})
    line = json.dumps(clean.model_dump(mode="json"), sort_keys=True) + "\n"
    added = _append_file(audit_path(state_dir), clean.event_id, line)
    if ledger_url() is not None:  # also when the file had it: a crash in between
        with _shared(state_dir, ledger) as store:
            store.audit_append(
                clean.event_id, clean.thread_id, clean.event, clean.approval_id, clean.at, line.strip()
            )
    return added


def _append_file(path: Path, event_id: str, line: str) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as f:
            f.seek(0)
            for existing in f:
                if f'"event_id": "{event_id}"' in existing and _whole(existing):
                    return False
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # A torn last record (a crash mid-write): end it, so this record is a line of its own.
            line = "\n" + line
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _shared(state_dir: Path | str, ledger: Decisions | None) -> AbstractContextManager[Decisions]:
    """The shared ledger (``GEMMA_SRE_LEDGER_URL``), where another process (a LangGraph Server replica)
    reads the records back (``approved_ids``): the caller's open one, else opened for the block."""
    from graph.checkpoint import open_ledger

    return nullcontext(ledger) if ledger is not None else open_ledger(Path(state_dir))


_reported: set[tuple[str, int, str]] = set()


def read(state_dir: Path | str) -> list[AuditEvent]:
    """Every whole record. A torn record (a crash mid-write) is skipped and reported once (a warning
    on stderr): it never recorded anything, and it must not block later decisions."""
    path = audit_path(state_dir)
    if not path.exists():
        return []
    out: list[AuditEvent] = []
    for n, raw in enumerate(path.read_bytes().decode("utf-8", errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append(AuditEvent.model_validate_json(raw))
        except ValueError:
            key = (str(path), n, hashlib.sha256(raw.encode()).hexdigest())
            if key not in _reported:
                _reported.add(key)
                log.warning("%s line %d: a torn or unreadable record (%d bytes), skipped", path, n, len(raw))
    return out


def approved_ids(state_dir: Path | str, *, ledger: Decisions | None = None) -> set[str]:
    """Approval ids a person (or the auto policy) granted: the only ones a mutation may carry. With a
    shared ledger, also those another process recorded there (``ledger``: the caller's open one)."""
    from graph.checkpoint import ledger_url

    ids = {e.approval_id for e in read(state_dir) if e.event == "approval" and e.approval_id}
    if ledger_url() is not None:
        with _shared(state_dir, ledger) as store:
            ids |= store.audit_approved_ids()
    return ids
