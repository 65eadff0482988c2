"""Confirmation tokens for the two-step mutations: verified statelessly, single use, bound to one change.

A client may start a new server process for every call (the MCP Inspector's CLI does), so a token
cannot live in one process's memory. Instead it carries what it is bound to, signed:

    confirm-<base32: version, expiry (ms), nonce, change tag, state tag, HMAC>

- the **key** is 32 random bytes in ``<state_dir>/mcp/confirm.key`` (created mode 0600 on first use,
  never logged, never in a result); any process of this user with the same state dir verifies it;
- the **change tag** is a keyed digest of the tool, the service and the canonical arguments, the
  **state tag** one of the service's etag: a token presented for other arguments, or after the
  service changed, is refused with a line that says which;
- **single use** is a ledger, ``<state_dir>/mcp/confirm-ledger.sqlite``: a token's nonce is inserted
  under a unique key when it is redeemed (SQLite's file locking makes two processes at once safe; the
  insert is durable before anything is applied). A token refused for another change is spent too.

Lower-case base32 has no shape of a credential (``tests/secret_shapes.py``), and the result's
redaction keeps the ``confirmation_token`` field (``core.KEEP_FIELDS``), so a model reading the text
content can continue.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_tools.errors import UserError

if TYPE_CHECKING:
    import sqlite3

DEFAULT_CONFIRM_TTL_S = 300.0
PREFIX = "confirm-"
KEY_FILE = "confirm.key"
LEDGER_FILE = "confirm-ledger.sqlite"
_VERSION = 1
_LAYOUT = (1, 6, 6, 8, 6)  # version, expiry ms, nonce, change tag, state tag
_MAC_LEN = 10
_PAYLOAD_LEN = sum(_LAYOUT)
_SPENT_KEEP_S = 3600.0  # ledger rows outlive their token's expiry by this much (clock steps)


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def canonical_change(tool: str, service: str, args: dict[str, Any]) -> str:
    """What a token's change tag covers: the tool, the service and the arguments, canonical JSON."""
    return json.dumps({"tool": tool, "service": service, "args": args}, sort_keys=True, separators=(",", ":"))


def _b32(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=").lower()


def _unb32(text: str) -> bytes:
    body = text.strip().upper()
    return base64.b32decode(body + "=" * (-len(body) % 8))


class ConfirmationStore:
    """Issue and redeem tokens; the key and the ledger live in ``<state_dir>/mcp`` (made on first use,
    so listing tools touches no file)."""

    def __init__(self, state_dir: Path | str, ttl_s: float = DEFAULT_CONFIRM_TTL_S) -> None:
        self.dir = Path(state_dir) / "mcp"
        self.ttl_s = ttl_s
        self._key: bytes | None = None
        self._lock = threading.Lock()

    # --- the key -------------------------------------------------------------------------------------

    def _load_key(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._read_or_create_key()
            return self._key

    def _read_or_create_key(self) -> bytes:
        path = self.dir / KEY_FILE
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                # Written whole to a private file, then linked into place: two processes creating it
                # at once end with one key (the loser's link fails and it reads the winner's).
                tmp = self.dir / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    os.write(fd, secrets.token_bytes(32))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    pass
                finally:
                    tmp.unlink()
            mode = path.stat().st_mode & 0o777
            if mode & 0o077:
                raise UserError(
                    f"{path} (the MCP confirmation key) is readable by others (mode {mode:o}): chmod 600 it"
                )
            key = path.read_bytes()
        except OSError as e:
            why = e.strerror or e
            raise UserError(f"cannot keep the MCP confirmation key in {self.dir}: {why}") from None
        if len(key) != 32:
            raise UserError(f"{path} is not a confirmation key (32 bytes): remove it, a new one is made")
        return key

    def _tag(self, key: bytes, what: bytes, n: int) -> bytes:
        return hmac.new(key, what, hashlib.sha256).digest()[:n]

    def _change_tag(self, key: bytes, tool: str, service: str, args: dict[str, Any]) -> bytes:
        return self._tag(key, b"change\x00" + canonical_change(tool, service, args).encode(), _LAYOUT[3])

    def _state_tag(self, key: bytes, state: str) -> bytes:
        return self._tag(key, b"state\x00" + state.encode(), _LAYOUT[4])

    # --- issue and redeem ------------------------------------------------------------------------------

    def issue(self, tool: str, service: str, args: dict[str, Any], state: str) -> str:
        """A token for exactly this change of a service in this state, valid ``ttl_s`` seconds."""
        key = self._load_key()
        expires_ms = int((time.time() + self.ttl_s) * 1000)
        payload = (
            bytes([_VERSION])
            + expires_ms.to_bytes(6, "big")
            + secrets.token_bytes(6)
            + self._change_tag(key, tool, service, args)
            + self._state_tag(key, state)
        )
        return PREFIX + _b32(payload + self._tag(key, b"token\x00" + payload, _MAC_LEN))

    def redeem(self, token: str, tool: str, service: str, args: dict[str, Any], state: str) -> str:
        """Spend ``token`` on this change; the approval id to send with it. Refused (one clear line)
        when the token is not ours, expired, already used, for another change, or the service changed."""
        again = f"call {tool} again without confirmation_token to get a fresh plan and token"
        key = self._load_key()
        payload = self._payload(key, str(token))
        if payload is None:
            raise UserError(
                f"confirmation token not recognised (not issued by this server, or altered): {again}"
            )
        _ver, exp, nonce, ctag, stag = _split(payload)
        expires = int.from_bytes(exp, "big") / 1000
        now = time.time()
        if now > expires:
            raise UserError(f"confirmation token expired {now - expires:.0f} s ago: {again}")
        used = UserError(f"confirmation token already used (each token works once): {again}")
        with closing(self._ledger()) as db:
            if db.execute("SELECT 1 FROM spent WHERE nonce = ?", (nonce.hex(),)).fetchone():
                raise used
        change_ok = hmac.compare_digest(ctag, self._change_tag(key, tool, service, args))
        state_ok = hmac.compare_digest(stag, self._state_tag(key, state))
        spent = self._spend(nonce, expires)  # a token shown for another change is spent as well
        if not change_ok:
            raise UserError(
                "confirmation token was issued for a different change (another tool, service or "
                f"arguments); it is now spent: {again}"
            )
        if not state_ok:
            raise UserError(
                f"service {service!r} changed since this plan was made (its etag differs); the token is "
                f"now spent: {again}"
            )
        if not spent:
            raise used
        return "mcp-" + digest(str(token).strip())[:24]

    def _payload(self, key: bytes, token: str) -> bytes | None:
        token = token.strip()
        if not token.startswith(PREFIX):
            return None
        try:
            raw = _unb32(token[len(PREFIX) :])
        except ValueError:
            return None
        if len(raw) != _PAYLOAD_LEN + _MAC_LEN or raw[0] != _VERSION:
            return None
        payload, mac = raw[:_PAYLOAD_LEN], raw[_PAYLOAD_LEN:]
        if not hmac.compare_digest(mac, self._tag(key, b"token\x00" + payload, _MAC_LEN)):
            return None
        return payload

    # --- the ledger --------------------------------------------------------------------------------------

    def _ledger(self) -> sqlite3.Connection:
        import sqlite3  # on first use: listing tools needs no ledger

        try:
            db = sqlite3.connect(self.dir / LEDGER_FILE, timeout=30, isolation_level=None)
            db.execute("PRAGMA synchronous=FULL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS spent (nonce TEXT PRIMARY KEY, forget_after REAL NOT NULL)"
            )
        except sqlite3.Error as e:
            raise UserError(f"cannot open the MCP confirmation ledger in {self.dir}: {e}") from None
        return db

    def _spend(self, nonce: bytes, expires: float) -> bool:
        """Record ``nonce`` as used; False when another call (any process) spent it first."""
        import sqlite3

        db = self._ledger()
        try:
            db.execute("BEGIN IMMEDIATE")  # one writer at a time across processes
            db.execute("DELETE FROM spent WHERE forget_after < ?", (time.time(),))
            try:
                db.execute("INSERT INTO spent VALUES (?, ?)", (nonce.hex(), expires + _SPENT_KEEP_S))
            except sqlite3.IntegrityError:
                db.execute("ROLLBACK")
                return False
            db.execute("COMMIT")  # durable (synchronous=FULL) before the change is applied
            return True
        except sqlite3.Error as e:
            raise UserError(f"cannot record the confirmation token as used in {self.dir}: {e}") from None
        finally:
            db.close()


def _split(payload: bytes) -> list[bytes]:
    out, at = [], 0
    for n in _LAYOUT:
        out.append(payload[at : at + n])
        at += n
    return out
