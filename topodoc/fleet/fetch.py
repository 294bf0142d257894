"""Bounded reading of fleet inputs: regular files, agent URLs, JSON — each with a limit it cannot pass.

- :func:`read_file`: regular files only (a FIFO, socket or device named ``*.json`` is refused with one
  line, never opened for a blocking read: ``O_NONBLOCK`` then ``fstat``), at most ``cap`` bytes.
- :func:`fetch`: ``http``/``https`` only; a redirect is followed only to the same scheme and host (at
  most :data:`MAX_REDIRECTS`); every socket read waits at most the time left before ``deadline`` (a
  ``time.monotonic()`` instant) and a watchdog shuts the socket down at the deadline, so a server that
  drips its headers or body a byte every few seconds is cut off there, not kept alive by each byte (the
  TCP connect and TLS handshake are bounded by the socket timeout alone); the body is capped (a
  ``Content-Length`` above the cap is refused before reading).
- :func:`loads`: JSON whose nesting is bounded before ``json.loads`` sees it (a scan of the brackets
  outside strings), so an endless ``[[[[`` is one clear error, never a RecursionError.

Errors are :class:`FetchError`, one line each.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import re
import socket
import stat
import threading
import time
import urllib.parse

MAX_REDIRECTS = 3
MAX_DEPTH = 64  # a snapshot nests about 8 deep
_CHUNK = 1 << 16


class FetchError(ValueError):
    """An input could not be read within its limits; the message is one line."""


def read_file(path: str, cap: int) -> bytes:
    """The bytes of regular file ``path`` (at most ``cap``; more is an error)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise FetchError(f"cannot open: {err.strerror or err}") from err
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise FetchError(f"not a regular file ({file_kind(kind)}): refused")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(cap + 1)
    except OSError as err:
        raise FetchError(f"cannot read: {err.strerror or err}") from err
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise FetchError(f"larger than {cap // 2**20} MiB: not a snapshot")
    return raw


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def fetch(url: str, deadline: float, cap: int, token: str | None = None) -> bytes:
    """The body of a GET of ``url`` by ``deadline`` (``time.monotonic()``), at most ``cap`` bytes; with
    ``token``, sent as ``Authorization: Bearer`` (to ``url``'s own host only: no redirect leaves it)."""
    origin = urllib.parse.urlsplit(url)
    _check_scheme(origin, url)
    target = origin
    for _hop in range(MAX_REDIRECTS + 1):
        status, location, body = _get(target, deadline, cap, token)
        if status in (301, 302, 303, 307, 308):
            if not location:
                raise FetchError(f"HTTP {status} without a Location")
            nxt = urllib.parse.urlsplit(urllib.parse.urljoin(target.geturl(), location))
            if (nxt.scheme, nxt.netloc) != (origin.scheme, origin.netloc):
                raise FetchError(
                    f"redirected to {nxt.scheme}://{nxt.netloc}: only redirects to the same scheme and "
                    "host are followed"
                )
            target = nxt
            continue
        if status == 401:
            raise FetchError("HTTP 401: the agent wants a bearer token (--auth-token-file)")
        if status != 200:
            raise FetchError(f"HTTP {status}")
        return body
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _check_scheme(parts: urllib.parse.SplitResult, url: str) -> None:
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(f"not an http(s) URL: {url}")


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchError("deadline reached before the answer was complete")
    return left


def _get(
    target: urllib.parse.SplitResult, deadline: float, cap: int, token: str | None
) -> tuple[int, str | None, bytes]:
    kind = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    conn = kind(target.hostname, target.port, timeout=_left(deadline))
    watchdog = None
    fired = threading.Event()
    try:
        conn.connect()  # one bounded step (the timeout); everything after is under the watchdog
        sock = conn.sock  # kept: the connection lets go of it once the answer says it closes
        # A socket timeout bounds each read, not their sum: a server that drips its status line or headers
        # a byte at a time would pass every read. At the deadline the watchdog shuts the socket down.
        watchdog = threading.Timer(_left(deadline), _cut, (sock, fired))
        watchdog.daemon = True
        watchdog.start()
        path = (target.path or "/") + (f"?{target.query}" if target.query else "")
        headers = {"Accept": "application/json", "Connection": "close"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        if resp.status in (301, 302, 303, 307, 308):
            return resp.status, resp.getheader("Location"), b""
        length = resp.getheader("Content-Length")
        if length and length.isdigit() and int(length) > cap:
            raise FetchError(f"answer of {int(length):,} bytes is larger than {cap // 2**20} MiB")
        body = bytearray()
        while chunk := resp.read1(_CHUNK):
            body += chunk
            if len(body) > cap:
                raise FetchError(f"answer larger than {cap // 2**20} MiB")
        if fired.is_set():
            raise FetchError("deadline reached before the answer was complete")
        return resp.status, None, bytes(body)
    except (OSError, http.client.HTTPException) as err:
        if fired.is_set() or isinstance(err, TimeoutError) or "timed out" in str(err):
            raise FetchError("deadline reached before the answer was complete") from err
        raise FetchError(str(getattr(err, "strerror", None) or err or type(err).__name__)) from err
    finally:
        if watchdog is not None:
            watchdog.cancel()
        conn.close()


def _cut(sock: socket.socket, fired: threading.Event) -> None:
    fired.set()
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))


def depth(raw: bytes) -> int:
    """The deepest nesting of ``raw``'s arrays and objects (brackets inside strings not counted)."""
    brackets = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKET).translate(_DEPTH_STEP)
    return max(itertools.accumulate(b - 1 for b in brackets), default=0)


def loads(raw: bytes, max_depth: int = MAX_DEPTH) -> object:
    """JSON with its nesting bounded before it is parsed."""
    if depth(raw) > max_depth:
        raise FetchError(f"JSON nested deeper than {max_depth} levels: not a snapshot")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FetchError(f"not JSON: {err}") from err
