"""The asyncio HTTP/1.1 transport: asyncio streams, no thread and no
third-party package, so thousands of long-polls cost one socket each and
never block the event loop. Connections are kept alive in a small pool."""

from __future__ import annotations

import asyncio
import ssl
from typing import Dict, List, Optional, Tuple

from ._wire import Endpoint, error_from, unreachable

AsyncAnswer = Tuple[int, Dict[str, str], bytes]

_NO_ANSWER = (OSError, EOFError, asyncio.TimeoutError, asyncio.LimitOverrunError, ValueError)
_MAX_CHUNK = 1 << 16


class Conn:
    """One HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()


class Response:
    """An answer whose body is read as it comes (whole, in chunks or by line)."""

    def __init__(self, conn: Conn, status: int, headers: Dict[str, str]) -> None:
        self.conn, self.status, self.headers = conn, status, headers
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: Optional[int] = int(length) if length is not None and not self._chunked else None
        self._done = self._left == 0
        self._buf = b""
        self.reusable = headers.get("connection", "").lower() != "close" and (self._chunked or self._left is not None)

    async def chunk(self) -> bytes:
        """The next piece of the body; ``b""`` at its end."""
        if self._buf:
            data, self._buf = self._buf, b""
            return data
        if self._done:
            return b""
        r = self.conn.reader
        if self._chunked:
            size = int((await r.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await r.readuntil(b"\r\n")) != b"\r\n":
                    pass
                self._done = True
                return b""
            data = await r.readexactly(size)
            await r.readexactly(2)
            return data
        if self._left is None:
            data = await r.read(_MAX_CHUNK)
            self._done = not data
            return data
        data = await r.read(min(self._left, _MAX_CHUNK))
        if not data:
            raise asyncio.IncompleteReadError(b"", self._left)
        self._left -= len(data)
        self._done = self._left == 0
        return data

    async def read(self) -> bytes:
        parts = []
        while True:
            data = await self.chunk()
            if not data:
                return b"".join(parts)
            parts.append(data)

    async def readline(self) -> bytes:
        """The next line of the body, with its newline; ``b""`` at its end."""
        buf = self._buf
        self._buf = b""
        while b"\n" not in buf:
            data = await self.chunk()
            if not data:
                return buf
            buf += data
        line, _, self._buf = buf.partition(b"\n")
        return line + b"\n"


class AsyncTransport:
    """Sends one request and returns (status, headers, body); raises
    :class:`~personaq.errors.Unavailable` when no answer came."""

    def __init__(self, ep: Endpoint, ssl_context: Optional[ssl.SSLContext], pool_size: int = 32) -> None:
        self._ep, self._pool_size = ep, pool_size
        self._ssl = (ssl_context or ssl.create_default_context()) if ep.tls else None
        self._idle: List[Conn] = []

    async def _connect(self) -> Conn:
        reader, writer = await asyncio.open_connection(
            self._ep.host, self._ep.port, ssl=self._ssl,
            server_hostname=self._ep.host if self._ssl else None, limit=1 << 20)
        return Conn(reader, writer)

    async def call(self, method: str, path: str, headers: Dict[str, str], body: Optional[bytes],
                   timeout: float) -> AsyncAnswer:
        """One request; non-2xx answers are returned, not raised."""
        if self._idle:
            conn = self._idle.pop()
            try:
                return await asyncio.wait_for(self._exchange(conn, method, path, headers, body), timeout)
            except (ConnectionError, EOFError):
                conn.close()  # closed by the server while idle: once more on a new connection
            except _NO_ANSWER as exc:
                conn.close()
                raise unreachable(exc) from exc
        try:
            return await asyncio.wait_for(self._fresh(method, path, headers, body), timeout)
        except _NO_ANSWER as exc:
            raise unreachable(exc) from exc

    async def _fresh(self, method: str, path: str, headers: Dict[str, str], body: Optional[bytes]) -> AsyncAnswer:
        return await self._exchange(await self._connect(), method, path, headers, body)

    async def _exchange(self, conn: Conn, method: str, path: str, headers: Dict[str, str],
                        body: Optional[bytes]) -> AsyncAnswer:
        try:
            resp = await self._send(conn, method, path, headers, body)
            data = await resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.reusable and len(self._idle) < self._pool_size:
            self._idle.append(conn)
        else:
            conn.close()
        return resp.status, resp.headers, data

    async def _send(self, conn: Conn, method: str, path: str, headers: Dict[str, str],
                    body: Optional[bytes]) -> Response:
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % (self._ep.host, self._ep.port)]
        lines += ["%s: %s" % kv for kv in headers.items()]
        if body is not None:
            lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
        conn.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        await conn.writer.drain()
        head = await conn.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        hdrs: Dict[str, str] = {}
        for h in header_lines:
            if h:
                k, _, v = h.partition(":")
                hdrs[k.strip().lower()] = v.strip()
        return Response(conn, status, hdrs)

    async def stream(self, path: str, headers: Dict[str, str], timeout: float) -> Response:
        """Open a GET whose body is read as it comes. Non-2xx answers are
        raised as APIError; close ``resp.conn`` when done."""
        conn: Optional[Conn] = None
        try:
            conn = await asyncio.wait_for(self._connect(), timeout)
            resp = await asyncio.wait_for(self._send(conn, "GET", path, headers, None), timeout)
        except _NO_ANSWER as exc:
            if conn is not None:
                conn.close()
            raise unreachable(exc) from exc
        if resp.status >= 300:
            try:
                body = await asyncio.wait_for(resp.read(), timeout)
            except _NO_ANSWER:
                body = b""
            conn.close()
            raise error_from(resp.status, body, resp.headers.get("retry-after"))
        return resp

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
