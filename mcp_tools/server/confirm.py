"""Confirmation tokens for the two-step mutations: short-lived, single-use, bound to one change."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from typing import Any

from mcp_tools.errors import UserError

DEFAULT_CONFIRM_TTL_S = 300.0


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def fingerprint(tool: str, service: str, args: dict[str, Any], state: str) -> str:
    """What a confirmation token is bound to: the tool, the service, the arguments, its current state."""
    doc = json.dumps({"tool": tool, "service": service, "args": args, "state": state}, sort_keys=True)
    return digest(doc)


class ConfirmationStore:
    """Short-lived, single-use tokens, each bound to one change. Only digests are kept."""

    def __init__(self, ttl_s: float = DEFAULT_CONFIRM_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._live: dict[str, tuple[str, str, float]] = {}  # digest -> (tool, fingerprint, expires)
        self._spent: dict[str, float] = {}  # digest -> when it stops mattering

    def issue(self, tool: str, fp: str) -> str:
        token = "confirm-" + secrets.token_urlsafe(18)
        with self._lock:
            self._gc()
            self._live[digest(token)] = (tool, fp, time.monotonic() + self.ttl_s)
        return token

    def redeem(self, token: str, tool: str, fp: str) -> str:
        """Consume ``token`` for this change; the approval id to send. Any mismatch spends it."""
        d = digest(str(token))
        with self._lock:
            self._gc()
            entry = self._live.pop(d, None)
            if entry is None:
                if d in self._spent:
                    raise UserError(
                        f"confirmation token already used or expired: call {tool} again without a "
                        "token to get a fresh plan"
                    )
                raise UserError(
                    f"confirmation token not recognised: call {tool} again without a token to get one"
                )
            self._spent[d] = time.monotonic() + 3600
            t_tool, t_fp, expires = entry
            if time.monotonic() > expires:
                raise UserError(
                    f"confirmation token expired (valid {self.ttl_s:.0f} s): "
                    f"call {tool} again without a token"
                )
            if t_tool != tool or not hmac.compare_digest(t_fp, fp):
                raise UserError(
                    "confirmation token was issued for a different change (another tool, service or "
                    "arguments, or the service changed since the plan): plan again"
                )
        return "mcp-" + d[:24]

    def _gc(self) -> None:
        now = time.monotonic()
        for d, (_, _, exp) in list(self._live.items()):
            if exp < now:
                del self._live[d]
                self._spent[d] = now + 3600
        for d, until in list(self._spent.items()):
            if until < now:
                del self._spent[d]
