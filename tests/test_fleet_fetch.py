"""Fleet fetching under attack, on real loopback HTTP servers (127.0.0.1) and real FIFOs: a dripping
server is cut off at the node's deadline, redirects leave neither scheme nor host, a FIFO is refused
without being opened for reading, endless nesting is one line, bodies are capped, and unread inputs make
the exit code 2 unless --allow-missing. Every test is bounded in time (issue 22, item 4)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from topodoc.fleet import fetch
from topodoc.fleet.nodes import expand, load_all, load_one


@pytest.fixture(scope="module")
def snapshot_bytes() -> bytes:
    from topodoc.codec import to_data
    from topodoc.probe.source import load_snapshot

    return json.dumps(to_data(load_snapshot("example:hgx-h100-8x400g-ib"))).encode()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def _serve(handle) -> tuple[_Server, str]:
    """A loopback server whose GET is ``handle(request_handler)``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                handle(self)

        def log_message(self, *args):
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def serve():
    servers = []

    def start(handle):
        server, url = _serve(handle)
        servers.append(server)
        return url

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _drip(req, seconds: float = 20.0):
    """Headers, then one byte every 0.2 s for ``seconds``: each read succeeds well within any read timeout."""
    req.send_response(200)
    req.send_header("Content-Type", "application/json")
    req.end_headers()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        req.wfile.write(b" ")
        req.wfile.flush()
        time.sleep(0.2)


def test_a_dripping_server_is_cut_off_at_the_node_deadline(serve, monkeypatch):
    import topodoc.fleet.nodes as nodes

    monkeypatch.setattr(nodes, "URL_TIMEOUT_S", 1.0)
    url = serve(_drip)
    start = time.monotonic()
    got = load_one(url)
    took = time.monotonic() - start
    assert took < 4, f"a byte every 0.2 s kept the fetch alive for {took:.1f} s"
    assert "deadline" in got.message and url in got.message


def test_the_whole_run_deadline_bounds_many_slow_nodes(serve):
    urls = [serve(_drip) for _ in range(3)]
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", *urls, "--deadline", "1.5", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - start
    assert took < 10, took  # start-up + 1.5 s, never the 20 s of dripping
    assert out.returncode == 2 and "could not be read" in out.stderr
    data = json.loads(out.stdout)
    assert data["nodes"] == 0 and len(data["errors"]) == 3


def _redirect_to(location: str):
    def handle(req):
        req.send_response(302)
        req.send_header("Location", location)
        req.send_header("Content-Length", "0")
        req.end_headers()

    return handle


@pytest.mark.parametrize(
    "where",
    [
        "ftp://127.0.0.1:{port}/snapshot",
        "http://localhost:{port}/snapshot",
        "http://127.0.0.1:{other}/snapshot",
    ],
)
def test_redirects_leave_neither_scheme_nor_host(serve, snapshot_bytes, where):
    hits = []

    def good(req):  # a server the redirect points at: it must never be asked
        hits.append(req.path)
        req.send_response(200)
        req.end_headers()
        req.wfile.write(snapshot_bytes)

    target = serve(good)
    port = target.rsplit(":", 1)[1]
    url = serve(_redirect_to(where.format(port=port, other=port)))
    got = load_one(url)
    assert "redirected to" in got.message and "same scheme and host" in got.message
    assert hits == []


def test_a_redirect_on_the_same_host_is_followed(serve, snapshot_bytes):
    def handle(req):
        if req.path == "/snapshot":
            _redirect_to("/v2/snapshot")(req)
            return
        req.send_response(200)
        req.send_header("Content-Length", str(len(snapshot_bytes)))
        req.end_headers()
        req.wfile.write(snapshot_bytes)

    ref, _fp = load_one(serve(handle))
    assert ref.kind == "agent"


def test_only_http_and_https_are_fetched():
    with pytest.raises(fetch.FetchError, match="not an http"):
        fetch.fetch("ftp://127.0.0.1/snapshot", time.monotonic() + 5, 1024)
    items, errors = expand(["file:///etc/passwd"])
    assert items == [] and "only http:// and https://" in errors[0].message


def test_bodies_are_capped(serve, monkeypatch):
    import topodoc.fleet.nodes as nodes

    monkeypatch.setattr(nodes, "MAX_URL_BYTES", 1 << 20)

    def declared(req):  # 10 GB announced: refused before a byte of body is read
        req.send_response(200)
        req.send_header("Content-Length", str(10 * 2**30))
        req.end_headers()
        req.wfile.write(b"[" * 4096)

    def endless(req):  # no length, a body that never ends
        req.send_response(200)
        req.end_headers()
        chunk = b" " * 65536
        for _ in range(1000):
            req.wfile.write(chunk)

    got = load_one(serve(declared))
    assert "larger than 1 MiB" in got.message and "10,737,418,240 bytes" in got.message
    start = time.monotonic()
    got = load_one(serve(endless))
    assert "larger than 1 MiB" in got.message and time.monotonic() - start < 5


def test_endless_nesting_is_one_line_not_a_recursion_error(serve, tmp_path):
    body = b"[" * 200_000

    def deep(req):
        req.send_response(200)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    got = load_one(serve(deep))
    assert "nested deeper than 64 levels" in got.message
    path = tmp_path / "deep.json"
    path.write_bytes(b'{"a": ' * 100_000)
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "nested deeper" in out.stdout and "Traceback" not in out.stderr
    assert fetch.depth(b'{"a": "[[[[", "b": [[1], {"c": "]]"}]}') == 3  # brackets in strings do not count


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_json_is_refused_not_read(tmp_path, snapshot_bytes):
    recs = tmp_path / "recs"
    recs.mkdir()
    os.mkfifo(recs / "evil.json")
    (recs / "good.json").write_bytes(snapshot_bytes)
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(recs), "--allow-missing"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "evil.json: not a regular file (a FIFO): refused" in out.stdout
    direct = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(recs / "evil.json"), str(recs / "good.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.returncode == 2 and "a FIFO" in direct.stdout
    with pytest.raises(fetch.FetchError, match="a FIFO"):  # the reader itself never blocks on one
        fetch.read_file(str(recs / "evil.json"), 1024)


def test_unreadable_inputs_make_exit_2_unless_allow_missing(tmp_path, snapshot_bytes):
    for name in ("a", "b"):
        (tmp_path / f"{name}.json").write_bytes(snapshot_bytes)
    args = [
        sys.executable,
        "-m",
        "topodoc",
        "fleet",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "http://127.0.0.1:9/",
    ]
    strict = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert strict.returncode == 2
    assert "Inputs that could not be read (1" in strict.stdout and "http://127.0.0.1:9/" in strict.stdout
    lenient = subprocess.run([*args, "--allow-missing"], capture_output=True, text=True, timeout=60)
    assert lenient.returncode == 0 and "http://127.0.0.1:9/" in lenient.stdout


def test_load_all_honours_a_deadline_already_past(tmp_path, snapshot_bytes):
    (tmp_path / "a.json").write_bytes(snapshot_bytes)
    groups, errors = load_all([str(tmp_path / "a.json")], jobs=1, deadline_s=-1)
    assert not groups and "deadline" in errors[0].message


def test_eight_endless_bodies_stay_small(serve):
    """The operator's case: eight agents answering endless bodies (one announcing 10 GB). Each answer is cut
    at the cap, so the process stays far below the 602 MB measured before the fix."""
    import psutil

    def endless(req):
        req.send_response(200)
        if req.path.endswith("x"):
            req.send_header("Content-Length", str(10 * 2**30))
        req.end_headers()
        chunk = b" " * 65536
        while True:
            req.wfile.write(chunk)
            time.sleep(0.005)

    urls = [serve(endless) for _ in range(8)]
    proc = psutil.Popen(
        [sys.executable, "-m", "topodoc", "fleet", *urls, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    peak, start = 0, time.monotonic()
    while proc.poll() is None and time.monotonic() - start < 60:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, proc.memory_info().rss)
        time.sleep(0.02)
    out, _err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert all("larger than 8 MiB" in e["message"] for e in json.loads(out)["errors"])
    assert peak < 250e6, f"peak RSS {peak / 1e6:.0f} MB"


def test_a_bearer_token_from_a_file_reaches_the_agent(serve, snapshot_bytes, tmp_path):
    seen = []

    def guarded(req):
        seen.append(req.headers.get("Authorization"))
        ok = req.headers.get("Authorization") == "Bearer s3cret"
        req.send_response(200 if ok else 401)
        body = snapshot_bytes if ok else b"{}"
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    url = serve(guarded)
    assert "bearer token" in load_one(url).message
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", url, "--auth-token-file", str(token), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["nodes"] == 1 and seen[-1] == "Bearer s3cret"


def test_a_server_dripping_its_headers_is_cut_off_too(serve, monkeypatch):
    """Each byte of the status line arrives within any read timeout; only a deadline on the sum stops it."""
    import topodoc.fleet.nodes as nodes

    monkeypatch.setattr(nodes, "URL_TIMEOUT_S", 1.0)

    def drip_headers(req):
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
            req.wfile.write(bytes([byte]))
            req.wfile.flush()
            time.sleep(0.1)

    start = time.monotonic()
    got = load_one(serve(drip_headers))
    assert time.monotonic() - start < 4 and "deadline" in got.message
