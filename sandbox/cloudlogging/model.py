"""The log store: LogEntry dicts in the wire format, kept in timestamp order, listed through a filter."""

from __future__ import annotations

import base64
import bisect
import hashlib
import itertools
import json
import threading
from typing import Any
from urllib.parse import quote

from sandbox.clock import parse_time, rfc3339
from sandbox.cloudlogging.filter import SEVERITY_RANK, FilterError, compile_filter
from sandbox.errors import ApiError, bad_request

DEFAULT_PAGE_SIZE = 50  # entries:list documents 50 as the default and 1000 as the maximum
MAX_PAGE_SIZE = 1000

#: Cloud Run's log ids (https://cloud.google.com/run/docs/logging)
STDOUT = "run.googleapis.com/stdout"
STDERR = "run.googleapis.com/stderr"
REQUESTS = "run.googleapis.com/requests"
SYSTEM = "run.googleapis.com/varlog/system"


def log_name(project: str, log_id: str) -> str:
    return f"projects/{project}/logs/{quote(log_id, safe='')}"


def run_resource(project: str, location: str, service: str, revision: str) -> dict[str, Any]:
    """The monitored resource of a Cloud Run revision's logs."""
    return {
        "type": "cloud_run_revision",
        "labels": {
            "project_id": project,
            "service_name": service,
            "revision_name": revision,
            "location": location,
            "configuration_name": service,
        },
    }


class LogStore:
    def __init__(self, clock: Any = None) -> None:
        self.clock = clock  # a SimClock: an upper time bound at the real "now" means the sandbox's now
        self._entries: list[dict[str, Any]] = []
        self._keys: list[tuple[float, int]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def append(
        self,
        *,
        project: str,
        log_id: str,
        timestamp: float,
        severity: str = "DEFAULT",
        text: str | None = None,
        json_payload: dict[str, Any] | None = None,
        resource: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        http_request: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        seq = next(self._seq)
        sev = severity.upper()
        if sev not in SEVERITY_RANK:
            sev = "DEFAULT"
        entry: dict[str, Any] = {
            "logName": log_name(project, log_id),
            "resource": resource or {"type": "global", "labels": {"project_id": project}},
            "timestamp": rfc3339(timestamp),
            "receiveTimestamp": rfc3339(timestamp + 0.012),
            "severity": sev,
            "insertId": f"{int(timestamp * 1e6):x}{seq:06x}"[-20:],
        }
        if text is not None:
            entry["textPayload"] = text
        elif json_payload is not None:
            entry["jsonPayload"] = json_payload
        if labels:
            entry["labels"] = labels
        if http_request:
            entry["httpRequest"] = http_request
        # private keys (stripped on the wire): pre-parsed time, project, sequence
        entry["_timestamp_s"] = timestamp
        entry["_receiveTimestamp_s"] = timestamp + 0.012
        entry["_project"] = project
        entry["_seq"] = seq
        entry["_severity_rank"] = SEVERITY_RANK[sev]
        if text is not None:
            entry["_text_lc"] = text.lower()
        entry["_json"] = json.dumps(wire(entry), separators=(",", ":")).encode()
        key = (timestamp, seq)
        with self._lock:
            i = bisect.bisect_right(self._keys, key)
            self._keys.insert(i, key)
            self._entries.insert(i, entry)
        return entry

    def _upper_bound(self, t: float) -> float:
        import time

        if t >= time.time() - 120.0:
            return max(t, float(self.clock.now_s()))
        return t

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)

    def list_entries(
        self,
        *,
        resource_names: list[str],
        filter_: str | None = None,
        order_by: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        raw: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of entries (wire dicts) and the next page token ('' or None at the end)."""
        if not resource_names:
            raise bad_request("resourceNames: at least one resource name is required", "resource_names")
        projects = set()
        for rn in resource_names:
            if not isinstance(rn, str):
                raise bad_request(f"resourceNames: not a string: {rn!r}", "resource_names")
            parts = rn.split("/")
            if len(parts) >= 2 and parts[0] == "projects" and parts[1]:
                projects.add(parts[1])
            elif len(parts) >= 2 and parts[0] in ("organizations", "folders", "billingAccounts") and parts[1]:
                continue  # valid name, but the sandbox holds no entries under it
            else:
                raise bad_request(f"resourceNames: invalid resource name {rn!r}", "resource_names")
        order = (order_by or "timestamp asc").strip().lower()
        order = " ".join(order.split())
        if order not in ("timestamp asc", "timestamp desc", "timestamp"):
            raise bad_request(
                f"orderBy: unsupported value {order_by!r} (only 'timestamp asc' and 'timestamp desc')",
                "order_by",
            )
        desc = order == "timestamp desc"
        size = DEFAULT_PAGE_SIZE if not page_size else int(page_size)
        if size < 0:
            raise bad_request("pageSize must not be negative", "page_size")
        size = min(size, MAX_PAGE_SIZE)
        try:
            pred = compile_filter(filter_, upper_bound=self._upper_bound if self.clock is not None else None)
        except FilterError as e:
            raise ApiError("INVALID_ARGUMENT", f"Unsupported or invalid filter: {e}") from None
        query_key = hashlib.sha256(
            json.dumps([sorted(resource_names), filter_ or "", desc]).encode()
        ).hexdigest()[:16]
        # the page token is a cursor (timestamp, sequence) just past the last entry returned, so a
        # page costs only the entries it scans, and entries arriving meanwhile do not shift pages
        with self._lock:
            entries = self._entries
            keys = self._keys
            if page_token:
                cursor = _decode_token(page_token, query_key)
                start = (
                    bisect.bisect_right(keys, cursor) if not desc else bisect.bisect_left(keys, cursor) - 1
                )
            else:
                start = 0 if not desc else len(entries) - 1
            n = len(entries)
            step = -1 if desc else 1
            out: list[dict[str, Any]] = []
            next_token: str | None = None
            i = start
            while 0 <= i < n:
                ent = entries[i]
                if ent["_project"] in projects and pred(ent):
                    if len(out) == size:
                        last = out[-1]
                        next_token = _encode_token((last["_timestamp_s"], last["_seq"]), query_key)
                        break
                    out.append(ent)
                i += step
        return (out if raw else [wire(x) for x in out]), next_token

    def list_entries_json(self, **kw: Any) -> bytes:
        """``list_entries`` as the response body, built from each entry's pre-serialized JSON."""
        kw["raw"] = True
        entries, token = self.list_entries(**kw)
        parts = [b'{"entries":[', b",".join(e["_json"] for e in entries), b"]"]
        if not entries:
            parts = [b"{"]
        if token:
            parts.append(
                ("," if entries else "").encode()
                + json.dumps({"nextPageToken": token}, separators=(",", ":"))[1:-1].encode()
            )
        parts.append(b"}")
        return b"".join(parts)


def wire(e: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in e.items() if not k.startswith("_")}


def _encode_token(cursor: tuple[float, int], key: str) -> str:
    return base64.urlsafe_b64encode(f"{key}:{cursor[0]!r}:{cursor[1]}".encode()).decode().rstrip("=")


def _decode_token(token: str, key: str) -> tuple[float, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        k, ts, seq = raw.split(":")
        cursor = (float(ts), int(seq))
    except (ValueError, UnicodeDecodeError):
        raise bad_request("pageToken: invalid page token", "page_token") from None
    if k != key:
        raise bad_request(
            "pageToken: the page token does not belong to this query (filter, order or resources changed)",
            "page_token",
        )
    return cursor


__all__ = ["LogStore", "log_name", "parse_time", "run_resource", "STDOUT", "STDERR", "REQUESTS", "SYSTEM"]
