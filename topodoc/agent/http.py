"""The agent's HTTP endpoints: ``/metrics``, ``/healthz`` (open), ``/findings``, ``/events``, ``/snapshot``
(behind the bearer token when the agent has one).

What a client can hold is bounded by construction, whatever it does:
- one event-loop thread (asyncio) reads every request and writes every answer, and :data:`RENDER_WORKERS`
  threads render: the agent's thread count does not depend on its clients;
- a request's head (request line and headers, at most :data:`MAX_HEAD` bytes) must arrive within
  ``head_timeout`` seconds, with no gap over ``idle_timeout`` between its bytes; an answer must be taken
  within ``write_timeout``; one request per connection (``Connection: close``);
- at most ``max_connections`` connections: at the cap, the oldest one still sending its head after
  :data:`EVICT_AFTER` seconds (an idle socket) is closed to make room; when none is, accepting pauses and
  the kernel's backlog holds new connections until one ends;
- one render per endpoint at a time, shared by every request that waits for it and kept
  :data:`CACHE_S`: a thousand scrapes at once render ``/metrics`` once;
- a client that goes away is dropped without a word (no traceback on stderr); an error is counted in
  ``/healthz``'s errors, and a renderer bug answers 500 while the agent carries on.

``/snapshot`` is the last probe's snapshot, redacted unless the agent runs with ``--no-redact``
(:mod:`topodoc.agent.redacted`). The token is compared in constant time; it is read from the agent on each
request, so a SIGHUP that re-reads ``--auth-token-file`` applies at once.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"
OPEN_PATHS = frozenset({"/metrics", "/healthz"})
PATHS = ("/metrics", "/healthz", "/findings", "/events", "/snapshot")
MAX_HEAD = 8192
BACKLOG = 1024  # connections the kernel queues before accept (capped by net.core.somaxconn)
ACCEPT_BATCH = 64  # accepted per turn of the loop
EVICT_AFTER = 0.5  # at the cap, a connection without a whole head this old makes room
RENDER_WORKERS = 2
CACHE_S = 1.0
RENDER_TIMEOUT = 30.0
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


class AgentHttp:
    """Binds at once (``OSError`` when the address is taken); :meth:`start` serves on its own thread."""

    def __init__(self, agent, host: str, port: int, *, max_connections: int = 512, head_timeout: float = 10.0,
                 idle_timeout: float = 5.0, write_timeout: float = 10.0) -> None:
        self.agent = agent
        self.max_connections = max_connections
        self.head_timeout, self.idle_timeout, self.write_timeout = head_timeout, idle_timeout, write_timeout
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self.sock.setblocking(False)
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_error)
        self.pool = ThreadPoolExecutor(RENDER_WORKERS, thread_name_prefix="topodoc-http-render")
        self.thread = threading.Thread(target=self._serve, name="topodoc-http", daemon=True)
        self._conns: dict[asyncio.Task, _Conn] = {}  # insertion order: oldest first
        self._cache: dict[str, tuple[float, tuple[int, str, bytes]]] = {}
        self._inflight: dict[str, asyncio.Future] = {}
        self._stopped = asyncio.Event()  # bound to the loop on first use (Python >= 3.10)
        self._paused = False  # accepting paused: at the cap, or out of descriptors
        self.evicted = 0  # idle connections closed at the cap to make room

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self._stopped.set)
            self.thread.join(timeout=3.0)
        elif not self.loop.is_running():
            self.loop.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.sock.close()

    # -- the loop ------------------------------------------------------------------------------------
    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.close()

    async def _main(self) -> None:
        fd = self.sock.fileno()
        self.loop.add_reader(fd, self._accept_ready)
        try:
            await self._stopped.wait()
        finally:
            self.loop.remove_reader(fd)
            for task in self._conns:
                task.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)

    def _loop_error(self, loop, context: dict) -> None:
        """asyncio's own complaints (a socket that failed under it) are counted, never printed."""
        err = context.get("exception")
        if isinstance(err, (ConnectionError, TimeoutError, asyncio.CancelledError)):
            return
        what = f"{type(err).__name__}: {err}" if err is not None else context.get("message", "?")
        self.agent.report_error("http", str(what)[:200])

    def _accept_ready(self) -> None:
        """Accept what waits (at most ACCEPT_BATCH a turn), holding the cap as each one is accepted: the
        agent's sockets stay under the cap whatever the clients do. At the cap, the
        oldest connection that has sent no whole head for EVICT_AFTER seconds is closed to make room;
        when there is none, accepting pauses (the kernel's backlog holds the rest) until one ends."""
        for _ in range(ACCEPT_BATCH):
            if len(self._conns) >= self.max_connections:
                self._evict_one()  # its slot frees when its task ends, which resumes accepting
                self._pause(EVICT_AFTER)
                return
            try:
                sock, _address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # out of descriptors (EMFILE/ENFILE), or an aborted connection
                self.agent.report_error("http", f"accept: {err.strerror or err}")
                self._pause(1.0)
                return
            sock.setblocking(False)
            conn = _Conn(sock, self.loop.time())
            self._conns[self.loop.create_task(self._connection(conn))] = conn

    def _pause(self, seconds: float) -> None:
        if not self._paused:
            self._paused = True
            self.loop.remove_reader(self.sock.fileno())
            self.loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        if self._paused and not self._stopped.is_set():
            self._paused = False
            self.loop.add_reader(self.sock.fileno(), self._accept_ready)

    def _evict_one(self) -> None:
        """Close the oldest connection that has been EVICT_AFTER seconds without a whole request head, in
        what it sent or in what waits unread in its socket (so a request the loop has not read yet stays).
        It keeps its slot until its task has closed the socket: descriptors never pass the cap."""
        stale = self.loop.time() - EVICT_AFTER
        for task, conn in self._conns.items():
            if conn.since > stale:
                return  # oldest first: the rest are younger
            if conn.reading and not task.cancelling() and not conn.head_waiting():
                self.evicted += 1
                task.cancel()
                return

    async def _connection(self, conn: _Conn) -> None:
        task = asyncio.current_task()
        try:
            await self._handle(conn)
        except (ConnectionError, TimeoutError, OSError, asyncio.CancelledError):
            pass  # the client went away or stalled, or the cap took it: nothing to tell anyone
        except Exception as err:  # a bug here must not end the loop
            self.agent.report_error("http", f"{type(err).__name__}: {err}")
        finally:
            conn.sock.close()
            if self._conns.pop(task, None) is not None:
                self._resume()

    async def _handle(self, conn: _Conn) -> None:
        head = await self._read_head(conn)
        conn.reading = False
        if head is None:
            return
        method, path, headers = head
        if method not in ("GET", "HEAD"):
            await self._send(conn, (405, TEXT, b"GET or HEAD only\n"), method, extra=("Allow: GET, HEAD",))
            return
        if path not in PATHS:
            await self._send(conn, (404, TEXT, ("try " + " ".join(PATHS) + "\n").encode()), method)
            return
        if path not in OPEN_PATHS and not self._authorized(headers.get("authorization", "")):
            body = b"this endpoint needs the agent's bearer token: Authorization: Bearer TOKEN\n"
            challenge = 'WWW-Authenticate: Bearer realm="topodoc"'
            await self._send(conn, (401, TEXT, body), method, extra=(challenge,))
            return
        variant = _metrics_variant(headers) if path == "/metrics" else ("", "")
        answer = await self._render(path, variant)
        extra = () if path in OPEN_PATHS else ("Cache-Control: no-store",)
        if path == "/metrics" and variant[1]:
            extra += ("Content-Encoding: gzip", "Vary: Accept, Accept-Encoding")
        await self._send(conn, answer, method, extra=extra)

    async def _read_head(self, conn: _Conn):
        """(method, path, headers) or None after answering a bad request; raises TimeoutError."""
        deadline = time.monotonic() + self.head_timeout
        while not _whole(conn.head):
            left = deadline - time.monotonic()
            if left <= 0 or len(conn.head) > MAX_HEAD:
                code = 408 if left <= 0 else 431
                await self._send(conn, (code, TEXT, f"{REASONS[code].lower()}\n".encode()), "GET")
                return None
            chunk = await asyncio.wait_for(self.loop.sock_recv(conn.sock, 4096), min(left, self.idle_timeout))
            if not chunk:
                return None  # closed before a whole head: nothing to answer
            conn.head += chunk
        data = conn.head
        lines = data.split(b"\n", 1)[0].decode("latin-1").strip().split(" ")
        if len(lines) != 3 or not lines[1].startswith("/") or not lines[2].startswith("HTTP/"):
            await self._send(conn, (400, TEXT, b"bad request line\n"), "GET")
            return None
        headers = {}
        for line in data.split(b"\n")[1:]:
            name, sep, value = line.decode("latin-1").partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return lines[0], lines[1].split("?", 1)[0], headers

    def _authorized(self, header: str) -> bool:
        token = getattr(self.agent, "auth_token", None)
        if not token:
            return True
        scheme, _sep, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())

    async def _send(self, conn: _Conn, answer: tuple[int, str, bytes], method: str, extra=()) -> None:
        code, content_type, body = answer
        lines = [f"HTTP/1.1 {code} {REASONS.get(code, 'Error')}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", "Connection: close", "Server: topodoc-agent", *extra]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body if method != "HEAD" else b"")
        await asyncio.wait_for(self.loop.sock_sendall(conn.sock, data), self.write_timeout)
        conn.sock.shutdown(socket.SHUT_WR)

    # -- rendering -----------------------------------------------------------------------------------
    async def _render(self, path: str, variant: tuple[str, str] = ("", "")) -> tuple[int, str, bytes]:
        """The answer for ``path`` (and ``/metrics``' format and encoding): cached for CACHE_S, one render
        at a time shared by every waiter."""
        key = (path, *variant)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        future = self._inflight.get(key)
        if future is None:
            future = asyncio.wrap_future(self.pool.submit(self._render_now, path, variant))
            self._inflight[key] = future
            future.add_done_callback(lambda done, k=key: self._rendered(k, done))
        try:
            return await asyncio.wait_for(asyncio.shield(future), RENDER_TIMEOUT)
        except TimeoutError:
            return 503, TEXT, b"busy: the answer is still being rendered, try again\n"

    def _rendered(self, key: tuple, future: asyncio.Future) -> None:
        self._inflight.pop(key, None)
        if not future.cancelled() and future.exception() is None:
            self._cache[key] = (time.monotonic() + CACHE_S, future.result())

    def _render_now(self, path: str, variant: tuple[str, str] = ("", "")) -> tuple[int, str, bytes]:
        """In a render worker: never raises (a renderer bug is a 500 and an error in /healthz)."""
        try:
            return render(self.agent, path, variant)
        except Exception as err:
            self.agent.report_error("http", f"{path}: {type(err).__name__}: {err}")
            return 500, TEXT, f"internal error: {type(err).__name__}\n".encode()


class _Conn:
    __slots__ = ("sock", "since", "head", "reading")

    def __init__(self, sock: socket.socket, since: float) -> None:
        self.sock, self.since = sock, since
        self.head = b""  # what it sent of its request head so far
        self.reading = True  # its head not read yet: the kind a full agent closes first

    def head_waiting(self) -> bool:
        """True when the bytes it sent, with those unread in the socket, hold a whole request head."""
        try:
            unread = self.sock.recv(MAX_HEAD, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:  # nothing waits (BlockingIOError), or the socket failed: nothing to keep it for
            return False
        return _whole(self.head + unread)


def _whole(head: bytes) -> bool:
    return b"\r\n\r\n" in head or b"\n\n" in head


def _metrics_variant(headers: dict[str, str]) -> tuple[str, str]:
    """What a scrape negotiates: ("openmetrics" or "", "gzip" or "") from Accept and Accept-Encoding."""
    accept = headers.get("accept", "")
    wants = "openmetrics" if "application/openmetrics-text" in accept else ""
    return wants, "gzip" if "gzip" in headers.get("accept-encoding", "").lower() else ""


def render(agent, path: str, variant: tuple[str, str] = ("", "")) -> tuple[int, str, bytes]:
    """(status, content type, body) of one endpoint, from the agent's current state; ``/metrics`` in the
    format and encoding the scraper asked for (prometheus_client's exposition)."""
    if path == "/metrics":
        from topodoc.report.prometheus import exposition

        accept = "application/openmetrics-text; version=1.0.0" if variant[0] else ""
        content_type, body, _zipped = exposition(agent.view(), accept, variant[1])
        return 200, content_type, body
    if path == "/healthz":
        doc = agent.health_document()
        return (200 if doc["status"] == "ok" else 503), JSON, _json(doc)
    if path == "/findings":
        doc = agent.findings_document()
        return (200 if doc["ready"] else 503), JSON, _json(doc)
    if path == "/events":
        return 200, JSON, _json(agent.events_document())
    doc = agent.snapshot_document()
    if doc is None:
        return 503, TEXT, b"no probe has finished yet\n"
    return 200, JSON, _json(doc)


def _json(data) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()
