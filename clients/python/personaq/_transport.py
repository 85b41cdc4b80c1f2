"""The synchronous HTTP/1.1 transport: http.client connections kept alive
in a small pool, one fresh connection for each event stream."""

from __future__ import annotations

import http.client
import ssl
import threading
from typing import Dict, List, Optional, Tuple

from ._wire import Endpoint, error_from, unreachable

Answer = Tuple[int, http.client.HTTPMessage, bytes]

# A kept-alive connection the server closed while idle fails this way
# before any answer: the call is repeated once on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class Transport:
    """Sends one request and returns (status, headers, body); raises
    :class:`~personaq.errors.Unavailable` when no answer came."""

    def __init__(self, ep: Endpoint, ssl_context: Optional[ssl.SSLContext], pool_size: int = 8) -> None:
        self._ep, self._ssl = ep, ssl_context
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pool_size = pool_size

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        if self._ep.tls:
            return http.client.HTTPSConnection(self._ep.host, self._ep.port, timeout=timeout,
                                               context=self._ssl or ssl.create_default_context())
        return http.client.HTTPConnection(self._ep.host, self._ep.port, timeout=timeout)

    def _take(self) -> Optional[http.client.HTTPConnection]:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def call(self, method: str, path: str, headers: Dict[str, str], body: Optional[bytes],
             timeout: float) -> Answer:
        """One request; non-2xx answers are returned, not raised."""
        conn = self._take()
        if conn is not None:
            try:
                return self._send(conn, method, path, headers, body, timeout)
            except _STALE:
                conn.close()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise unreachable(exc) from exc
        conn = self._new(timeout)
        try:
            return self._send(conn, method, path, headers, body, timeout)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise unreachable(exc) from exc

    def _send(self, conn: http.client.HTTPConnection, method: str, path: str, headers: Dict[str, str],
              body: Optional[bytes], timeout: float) -> Answer:
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        hdrs = dict(headers)
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        if resp.will_close:
            conn.close()
        else:
            self._give(conn)
        return resp.status, resp.headers, data

    def stream(self, path: str, headers: Dict[str, str], timeout: float
               ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Open a GET whose body is read as it comes (an event stream, a
        large output). Non-2xx answers are raised as APIError."""
        conn = self._new(timeout)
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise unreachable(exc) from exc
        if resp.status >= 300:
            try:
                body = resp.read()
            except (OSError, http.client.HTTPException):
                body = b""
            conn.close()
            raise error_from(resp.status, body, resp.headers.get("Retry-After"))
        return conn, resp

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
