"""The journal: every mutating call the sandbox received, for tests and evals to audit
(e.g. "no mutation happened without an approval id")."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, Field

APPROVAL_HEADER = "x-gemma-sre-approval"


class JournalEntry(BaseModel):
    method: str  # HTTP method
    resource: str  # the resource path acted on, e.g. projects/p/locations/l/services/s
    body: dict[str, Any] | None = None
    query: dict[str, str] = Field(default_factory=dict)
    time: str  # simulated RFC 3339 time of the call
    caller: str | None = None  # User-Agent
    client: str | None = None  # x-goog-api-client
    approval: str | None = None  # the x-gemma-sre-approval header, when sent
    status: int = 200  # the HTTP status answered
    validate_only: bool = False


class Journal:
    def __init__(self) -> None:
        self._entries: list[JournalEntry] = []
        self._lock = threading.Lock()

    def record(self, entry: JournalEntry) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[JournalEntry]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.entries())

    def __getitem__(self, i: int) -> JournalEntry:
        return self.entries()[i]
