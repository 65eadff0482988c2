"""A lean HTTP/1.1 keep-alive client for the benchmark's hot path (streaming POSTs), on asyncio streams.

httpx's connection pool costs about a millisecond of CPU per request and degrades with hundreds of
connections, which made the client, not the server, the bottleneck at concurrency 256. This client
does one thing: send a POST with a JSON body over a pooled keep-alive connection (TLS when the URL
is https) and hand back the status, the headers and the body pieces as they arrive (chunked,
content-length or until close). Everything else (discovery, /tokenize, health) stays on httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

#: An idle connection older than this that fails before any response byte is retried once.
STALE_AFTER_S = 1.0


class HTTPStatusLineError(Exception):
    """The server's answer was not HTTP/1.x."""


class _Conn:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already closed
            self.writer.close()


class Response:
    """A response whose body is read with :meth:`iter_body`; call :meth:`release` when done."""

    __slots__ = ("status", "headers", "_pool", "_conn", "_chunked", "_length", "_keep", "_done")

    def __init__(self, pool: Http1Pool, conn: _Conn, status: int, headers: dict[bytes, bytes]) -> None:
        self.status = status
        self.headers = headers
        self._pool = pool
        self._conn: _Conn | None = conn
        te = headers.get(b"transfer-encoding", b"").lower()
        self._chunked = b"chunked" in te
        cl = headers.get(b"content-length")
        self._length = int(cl) if cl is not None and not self._chunked else None
        self._keep = headers.get(b"connection", b"").lower() != b"close" and (self._chunked or cl is not None)
        self._done = False

    async def iter_body(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        reader = conn.reader
        if self._chunked:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                        pass
                    break
                data = await reader.readexactly(size + 2)
                yield data[:-2]
        elif self._length is not None:
            remaining = self._length
            while remaining > 0:
                data = await reader.read(min(remaining, 262_144))
                if not data:
                    raise asyncio.IncompleteReadError(b"", remaining)
                remaining -= len(data)
                yield data
        else:
            while True:
                data = await reader.read(262_144)
                if not data:
                    break
                yield data
        self._done = True

    async def read(self, limit: int = 65_536) -> bytes:
        out = b""
        async for piece in self.iter_body():
            if len(out) < limit:
                out += piece
        return out

    def release(self) -> None:
        """Return the connection to the pool when the body was read in full; close it otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._keep:
            conn.idle_since = time.monotonic()
            self._pool._idle.append(conn)
        else:
            conn.close()


class Http1Pool:
    """Keep-alive connections to one origin. Not thread-safe; use from one event loop."""

    def __init__(
        self, base_url: str, connect_timeout_s: float = 30.0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = u.hostname
        self.tls = u.scheme == "https"
        self.port = u.port or (443 if self.tls else 80)
        default = (self.tls and self.port == 443) or (not self.tls and self.port == 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default else f"{host}:{self.port}"
        self.base_path = u.path.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self._ssl = (ssl_context or ssl.create_default_context()) if self.tls else None
        self._idle: deque[_Conn] = deque()

    async def _connect(self) -> _Conn:
        async with asyncio.timeout(self.connect_timeout_s):
            reader, writer = await asyncio.open_connection(
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self.tls else None,
                limit=1 << 20,
            )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Response:
        """Send the request on an idle connection (or a new one) and read the status line and headers.

        A connection the server closed while it sat idle in the pool (keep-alive timeout) is replaced
        by a fresh one; a connection that was in use a moment ago is not retried, so a server that
        drops requests is counted, not hidden.
        """
        head = [f"POST {self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (0, 1):
            conn = None
            while self._idle:
                candidate = self._idle.pop()
                if candidate.reader.at_eof() or candidate.writer.is_closing():
                    candidate.close()
                    continue
                conn = candidate
                break
            retryable = conn is not None and time.monotonic() - conn.idle_since > STALE_AFTER_S
            if conn is None:
                conn = await self._connect()
            try:
                conn.writer.write(data)
                await conn.writer.drain()
                block = await conn.reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                conn.close()
                if retryable and attempt == 0:
                    continue  # the server closed a long-idle keep-alive connection: try a fresh one
                if isinstance(e, asyncio.IncompleteReadError) and not e.partial:
                    raise ConnectionAbortedError("server closed the connection without a response") from e
                raise
            except BaseException:
                conn.close()
                raise
            lines = block.split(b"\r\n")
            status_line = lines[0].split(b" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
                conn.close()
                raise HTTPStatusLineError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
            hdrs: dict[bytes, bytes] = {}
            for line in lines[1:]:
                if not line:
                    continue
                k, _, v = line.partition(b":")
                hdrs[k.strip().lower()] = v.strip()
            return Response(self, conn, int(status_line[1]), hdrs)
        raise ConnectionAbortedError("unreachable")  # pragma: no cover

    async def prewarm(self, n: int) -> int:
        """Open up to ``n`` idle connections at once (so a run does not time its connection set-up)."""
        missing = max(0, n - len(self._idle))
        results = await asyncio.gather(*[self._connect() for _ in range(missing)], return_exceptions=True)
        opened = 0
        now = time.monotonic()
        for r in results:
            if isinstance(r, _Conn):
                r.idle_since = now
                self._idle.append(r)
                opened += 1
        return opened

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()
