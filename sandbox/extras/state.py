"""State model of the emulated extras (Cloud Storage objects, Secret Manager, Cloud Quotas, Vertex
Model Registry), kept apart from the HTTP layer (moto's pattern). Methods raise ``ApiError`` with the
HTTP status and Google status name the real API would answer with."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class StoredObject:
    data: bytes
    content_type: str = "application/octet-stream"
    updated: str = field(default_factory=_now)
    # Reported size when it differs from len(data): lets tests describe 5 GB shards without 5 GB of RAM.
    size: int | None = None


@dataclass
class SecretRecord:
    name: str
    labels: dict[str, str]
    create_time: str
    versions: list[bytes] = field(default_factory=list)


@dataclass
class Fault:
    """Answer the next ``count`` matching requests with ``code`` / ``status``."""

    path_contains: str
    code: int
    status: str
    count: int = 1


class ExtrasState:
    """Everything the emulated extras APIs know. Thread-safe; the server runs in another thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forget everything (buckets, secrets, quotas, models, faults, the request log)."""
        self.buckets: dict[str, dict[str, StoredObject]] = {}
        self.secrets: dict[str, SecretRecord] = {}
        self.quota_infos: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.vertex_models: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request served

    # ------------------------------------------------------------ faults

    def inject_fault(
        self, path_contains: str, code: int = 503, status: str = "UNAVAILABLE", count: int = 1
    ) -> None:
        with self._lock:
            self.faults.append(Fault(path_contains, code, status, count))

    def take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.path_contains in path and fault.count > 0:
                    fault.count -= 1
                    return fault
            return None

    # ------------------------------------------------------------ Cloud Storage

    def add_bucket(self, bucket: str) -> None:
        with self._lock:
            self.buckets.setdefault(bucket, {})

    def put_object(
        self,
        bucket: str,
        name: str,
        data: bytes = b"",
        *,
        content_type: str | None = None,
        size: int | None = None,
    ) -> None:
        with self._lock:
            self.buckets.setdefault(bucket, {})[name] = StoredObject(
                data=data, content_type=content_type or "application/octet-stream", size=size
            )

    def list_objects(
        self, bucket: str, prefix: str, delimiter: str | None, start: int, max_results: int
    ) -> tuple[list[tuple[str, StoredObject]], list[str], int | None]:
        """(objects, prefixes, next offset or None), in name order like the real API."""
        with self._lock:
            if bucket not in self.buckets:
                raise ApiError(404, "NOT_FOUND", "The specified bucket does not exist.")
            names = sorted(n for n in self.buckets[bucket] if n.startswith(prefix))
            items: list[tuple[str, StoredObject]] = []
            prefixes: list[str] = []
            for name in names:
                rest = name[len(prefix) :]
                if delimiter and delimiter in rest:
                    p = prefix + rest.split(delimiter, 1)[0] + delimiter
                    if p not in prefixes:
                        prefixes.append(p)
                    continue
                items.append((name, self.buckets[bucket][name]))
            page = items[start : start + max_results]
            nxt = start + max_results if start + max_results < len(items) else None
            return page, (prefixes if start == 0 else []), nxt

    def get_object(self, bucket: str, name: str) -> StoredObject:
        with self._lock:
            if bucket not in self.buckets:
                raise ApiError(404, "NOT_FOUND", "The specified bucket does not exist.")
            obj = self.buckets[bucket].get(name)
            if obj is None:
                raise ApiError(404, "NOT_FOUND", f"No such object: {bucket}/{name}")
            return obj

    # ------------------------------------------------------------ Secret Manager

    def get_secret(self, name: str) -> SecretRecord:
        with self._lock:
            rec = self.secrets.get(name)
            if rec is None:
                raise ApiError(404, "NOT_FOUND", f"Secret [{name}] not found or has no versions.")
            return rec

    def create_secret(self, project: str, secret_id: str, labels: dict[str, str]) -> SecretRecord:
        with self._lock:
            name = f"projects/{project}/secrets/{secret_id}"
            if name in self.secrets:
                raise ApiError(409, "ALREADY_EXISTS", f"Secret [{name}] already exists.")
            rec = SecretRecord(name=name, labels=dict(labels), create_time=_now())
            self.secrets[name] = rec
            return rec

    def add_version(self, name: str, data: bytes) -> int:
        with self._lock:
            rec = self.get_secret(name)
            rec.versions.append(data)
            return len(rec.versions)

    def access_version(self, name: str, version: str) -> tuple[int, bytes]:
        with self._lock:
            rec = self.get_secret(name)
            if not rec.versions:
                raise ApiError(404, "NOT_FOUND", f"Secret [{name}] not found or has no versions.")
            n = len(rec.versions) if version == "latest" else int(version) if version.isdigit() else 0
            if not 1 <= n <= len(rec.versions):
                raise ApiError(404, "NOT_FOUND", f"Secret Version [{name}/versions/{version}] not found.")
            return n, rec.versions[n - 1]

    # ------------------------------------------------------------ Cloud Quotas

    def set_quota_infos(self, project: str, service: str, infos: list[dict[str, Any]]) -> None:
        with self._lock:
            self.quota_infos[(project, service)] = [dict(i) for i in infos]

    def list_quota_infos(self, project: str, service: str) -> list[dict[str, Any]]:
        with self._lock:
            if (project, service) not in self.quota_infos:
                raise ApiError(404, "NOT_FOUND", f"Service {service} not found for projects/{project}.")
            return list(self.quota_infos[(project, service)])

    # ------------------------------------------------------------ Vertex Model Registry

    def add_vertex_model(self, project: str, location: str, model: dict[str, Any]) -> None:
        with self._lock:
            self.vertex_models.setdefault((project, location), []).append(dict(model))

    def list_vertex_models(self, project: str, location: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.vertex_models.get((project, location), []))


def md5_b64(data: bytes) -> str:
    import base64

    return base64.b64encode(hashlib.md5(data).digest()).decode()
