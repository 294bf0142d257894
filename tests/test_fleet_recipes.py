"""Every collection recipe in docs/FLEET.md and `fleet --help` runs as written (issue 24, section 4).

The Slurm and pdsh lines run through bash exactly as printed, with stand-ins for ``srun`` and ``pdsh``
that do what those tools do for the part that matters: srun runs the command once per node with
``SLURMD_NODENAME`` set in the task's environment (srun expands ``%N`` only in --output/--error/--input
file names, never in the command's arguments: that was the bug), pdsh hands the quoted command to a
shell on each node (where ``$(hostname)`` is that node's name). ``/shared`` is mapped to a scratch folder.
The kubectl line runs with a stand-in ``kubectl`` that answers only when its namespace and label
selector are the agent DaemonSet's own (read from deploy/kubernetes/topodoc-agent.yaml), pointing at
agents served on loopback.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "FLEET.md").read_text()
MANIFEST = (ROOT / "deploy" / "kubernetes" / "topodoc-agent.yaml").read_text()
NODES = ("node-a", "node-b")

SRUN = r"""#!/bin/bash
# stand-in srun: drop srun's own options, run the command once per node as srun's tasks do
while [[ "$1" == -* ]]; do shift; done
for node in $FAKE_NODES; do SLURMD_NODENAME=$node "$@" || exit $?; done
"""
PDSH = r"""#!/bin/bash
# stand-in pdsh/clush: -w HOSTS CMD; each node's shell runs CMD (hostname answers that node's name)
shift 2
for node in $FAKE_NODES; do FAKE_HOST=$node bash -c "$1" || exit $?; done
"""
HOSTNAME = """#!/bin/bash
echo "${FAKE_HOST:-$(/bin/hostname)}"
"""
KUBECTL = r"""#!/usr/bin/env python3
# stand-in kubectl get pods: the pods exist only in WANT_NS with WANT_SELECTOR's label; the jsonpath
# template's {range .items[*]}...{end} body is printed once per pod with {.status.podIP} filled in
import os, re, sys
args = sys.argv[1:]
ns = args[args.index("-n") + 1] if "-n" in args else "default"
sel = args[args.index("-l") + 1] if "-l" in args else None
if ns != os.environ["WANT_NS"] or sel != os.environ["WANT_SELECTOR"]:
    print("No resources found in %s namespace." % ns, file=sys.stderr)
    sys.exit(0)
template = next(a for a in args if a.startswith("jsonpath=")).split("=", 1)[1]
body = re.fullmatch(r"\{range \.items\[\*\]\}(.*)\{end\}", template).group(1)
print("".join(body.replace("{.status.podIP}", ip) for ip in os.environ["FAKE_PODS"].split()), end="")
"""


def _recipes(prefix: str) -> list[str]:
    return [line.strip() for line in DOC.splitlines() if line.startswith("    " + prefix)]


def _bin(tmp_path: Path) -> dict[str, str]:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, text in (
        ("srun", SRUN),
        ("pdsh", PDSH),
        ("clush", PDSH),
        ("hostname", HOSTNAME),
        ("kubectl", KUBECTL),
    ):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    path = f"{tools}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "FAKE_NODES": " ".join(NODES), "N": str(len(NODES))}


def _run(line: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    shared = tmp_path / "shared"
    for sub in ("recs", "snaps"):
        (shared / sub).mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["bash", "-c", line.replace("/shared/", f"{shared}/")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize("line", _recipes("srun") + _recipes("pdsh") + _recipes("clush"))
def test_each_collection_recipe_writes_one_file_per_node(tmp_path, line):
    env = _bin(tmp_path)
    out = _run(line, tmp_path, env)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "shared" / ("recs" if "record" in line else "snaps")
    written = sorted(p.name for p in folder.iterdir())
    suffix = ".tar.gz" if "record" in line else ".json"
    assert written == [f"{node}{suffix}" for node in NODES], written  # never one literal "%N.tar.gz"
    fleet = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fleet.returncode == 0, fleet.stderr
    assert sorted(n for g in json.loads(fleet.stdout)["groups"] for n in g["nodes"]) == list(NODES)


def test_the_slurm_recipes_were_found():
    assert len(_recipes("srun")) == 2 and all("%N" not in line for line in _recipes("srun"))
    assert (
        "%N"
        not in subprocess.run(
            [sys.executable, "-m", "topodoc", "fleet", "--help"], capture_output=True, text=True, timeout=60
        ).stdout
    )


def _daemonset() -> tuple[str, str]:
    """The agent DaemonSet's namespace and its pod template's label selector, from the manifest."""
    doc = next(d for d in MANIFEST.split("\n---") if re.search(r"^kind: DaemonSet", d, re.M))
    namespace = re.search(r"^  namespace: (\S+)", doc, re.M).group(1)
    template = doc[doc.index("  template:") :]
    labels = re.search(r"labels: \{([^}]*)\}", template).group(1)
    selector = ",".join(part.strip().replace(": ", "=") for part in labels.split(","))
    return namespace, selector


def _agent(snapshot: bytes, address: str, port: int):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/snapshot" else 404)
            self.send_header("Content-Length", str(len(snapshot)))
            self.end_headers()
            self.wfile.write(snapshot)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_kubectl_recipe_selects_the_agent_pods(tmp_path):
    from topodoc.codec import dump
    from topodoc.probe.source import load_snapshot

    namespace, selector = _daemonset()
    assert (namespace, selector) == ("topodoc", "app.kubernetes.io/name=topodoc-agent")
    (line,) = _recipes("kubectl")
    assert f"-n {namespace}" in line and f"-l {selector}" in line
    help_text = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert f"-n {namespace}" in help_text and f"-l {selector}" in help_text
    body = dump(load_snapshot("example:hgx-h100-8x400g-ib")).encode()
    pods = ("127.0.0.2", "127.0.0.3")  # two pod IPs on loopback, each with an agent on the recipe's port
    try:
        servers = [_agent(body, ip, 9612) for ip in pods]
    except OSError as err:
        pytest.skip(f"cannot listen on port 9612 of a loopback address here: {err}")
    try:
        env = {**_bin(tmp_path), "WANT_NS": namespace, "WANT_SELECTOR": selector, "FAKE_PODS": " ".join(pods)}
        out = _run(line, tmp_path, env)
    finally:
        for server in servers:
            server.shutdown()
    assert out.returncode == 0, out.stderr + out.stdout
    assert "fleet: 2 nodes, all alike" in out.stdout


def test_the_help_recipe_runs_as_written(tmp_path):
    help_text = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    example = help_text.split("Example:", 1)[1]
    joined = re.sub(r"\\\n\s*", "", example)  # the shell's line continuations
    (line,) = [x.strip() for x in joined.splitlines() if x.strip().startswith("srun")]
    out = _run(line, tmp_path, _bin(tmp_path))
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "shared" / "recs").iterdir()) == [f"{n}.tar.gz" for n in NODES]
