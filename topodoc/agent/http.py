"""The agent's HTTP endpoints on a thread: ``/metrics``, ``/findings``, ``/events``, ``/healthz``,
``/snapshot``.

``http.server`` from the standard library (one request at a time is plenty for a scrape every 15-60 s);
each handler renders from one consistent :class:`~topodoc.agent.runner.View` taken under the agent's
lock. Binds to loopback unless ``--listen`` names another address.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class AgentHttp:
    def __init__(self, agent, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"agent": agent})
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="topodoc-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.server.server_address[:2]

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    agent = None
    server_version = "topodoc-agent"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        routes = {"/metrics": self._metrics, "/findings": self._findings, "/events": self._events,
                  "/healthz": self._health, "/snapshot": self._snapshot}
        route = routes.get(path)
        if route is None:
            self._send(404, "text/plain; charset=utf-8",
                       b"try /metrics /findings /events /healthz /snapshot\n")
            return
        try:
            route()
        except Exception as err:  # a renderer bug answers 500 and the agent carries on
            self.agent.report_error("http", f"{path}: {type(err).__name__}: {err}")
            self._send(500, "text/plain; charset=utf-8", f"internal error: {type(err).__name__}\n".encode())

    def _metrics(self) -> None:
        from topodoc.report.prometheus import render

        self._send(200, PROMETHEUS_TYPE, render(self.agent.view()))

    def _findings(self) -> None:
        self._json(self.agent.findings_document())

    def _snapshot(self) -> None:
        """The last probe's snapshot (``probe --json``), what ``topodoc fleet http://node:9400`` reads."""
        doc = self.agent.snapshot_document()
        if doc is None:
            self._send(503, "text/plain; charset=utf-8", b"no probe has finished yet\n")
        else:
            self._json(doc)

    def _events(self) -> None:
        self._json(self.agent.events_document())

    def _health(self) -> None:
        doc = self.agent.health_document()
        self._json(doc, 200 if doc["status"] == "ok" else 503)

    def _json(self, data, code: int = 200) -> None:
        self._send(code, "application/json", (json.dumps(data, indent=2) + "\n").encode())

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet: a scrape per interval is noise
        pass
