"""Google's error wire format (google.rpc.Status as JSON), so the official clients raise their usual
exceptions (``from_http_response`` picks the class from the HTTP status code)."""

from __future__ import annotations

from typing import Any

#: canonical status name -> (HTTP status, gRPC code)
STATUS: dict[str, tuple[int, int]] = {
    "INVALID_ARGUMENT": (400, 3),
    "FAILED_PRECONDITION": (400, 9),
    "OUT_OF_RANGE": (400, 11),
    "UNAUTHENTICATED": (401, 16),
    "PERMISSION_DENIED": (403, 7),
    "NOT_FOUND": (404, 5),
    "ABORTED": (409, 10),
    "ALREADY_EXISTS": (409, 6),
    "RESOURCE_EXHAUSTED": (429, 8),
    "CANCELLED": (499, 1),
    "INTERNAL": (500, 13),
    "UNKNOWN": (500, 2),
    "NOT_IMPLEMENTED": (501, 12),
    "UNIMPLEMENTED": (501, 12),
    "UNAVAILABLE": (503, 14),
    "DEADLINE_EXCEEDED": (504, 4),
}

HTTP_TO_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class ApiError(Exception):
    """An error answered as ``{"error": {"code", "message", "status", "details"}}``."""

    def __init__(self, status: str, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        if status not in STATUS:
            raise ValueError(f"unknown status {status}")
        self.status = status
        self.message = message
        self.details = details or []

    @property
    def http_status(self) -> int:
        return STATUS[self.status][0]

    @property
    def grpc_code(self) -> int:
        return STATUS[self.status][1]

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.http_status, "message": self.message, "status": self.status}
        if self.details:
            err["details"] = self.details
        return {"error": err}


def bad_request(message: str, field: str | None = None) -> ApiError:
    details = []
    if field:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": message}],
            }
        )
    return ApiError("INVALID_ARGUMENT", message, details)


def not_found(message: str) -> ApiError:
    return ApiError("NOT_FOUND", message)


def status_for_http(code: int) -> str:
    return HTTP_TO_STATUS.get(code, "UNKNOWN" if code >= 500 else "INVALID_ARGUMENT")
