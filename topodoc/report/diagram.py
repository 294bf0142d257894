"""Draw a :class:`topodoc.topology.Graph` as Graphviz DOT, Mermaid, or SVG (through Graphviz ``dot``).

Sockets (NUMA nodes) are boxes grouping their host bridges, root ports, switches, GPUs and NICs;
PCIe edges carry the trained link (red when it trained below what both ends support), NVLink edges
are bold green with their link count, the CPU interconnect is dashed.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from topodoc.topology.types import NVSWITCH, Edge, Graph, Node

FILL = {"gpu": "#b7e1a1", "nic": "#a9cce3", "switch": "#f9e79f", "root_port": "#e5e7e9",
        "host_bridge": "#d5d8dc", "numa": "#f5cba7", "nvswitch": "#d2b4de", "bridge": "#e5e7e9"}
SHAPE = {"numa": "box3d", "nvswitch": "hexagon", "gpu": "box", "nic": "box"}


class DiagramError(RuntimeError):
    """SVG was asked for and Graphviz could not make it (not installed, or it failed)."""


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dot_node(node: Node, indent: str) -> str:
    attrs = f'label="{_dot_text(node.label)}", fillcolor="{FILL.get(node.kind, "white")}"'
    if node.kind in SHAPE:
        attrs += f", shape={SHAPE[node.kind]}"
    return f'{indent}"{_dot_text(node.id)}" [{attrs}];'


def _dot_edge(edge: Edge) -> str:
    style = {"nvlink": 'color="#1e8449", penwidth=2.5, fontcolor="#1e8449"',
             "c2c": 'color="#7d3c98", penwidth=2.5, fontcolor="#7d3c98"',
             "smp": "style=dashed, penwidth=2", "internal": "style=dotted, arrowhead=none"}.get(edge.kind, "")
    if edge.kind == "nvlink" and NVSWITCH not in (edge.a, edge.b):
        style += ", constraint=false"  # keep bonded GPUs side by side
    if edge.degraded:
        style = 'color="#c0392b", fontcolor="#c0392b", penwidth=2'
    label = f'label="{_dot_text(edge.label)}"' if edge.label else ""
    attrs = ", ".join(x for x in (label, style) if x)
    return f'  "{_dot_text(edge.a)}" -- "{_dot_text(edge.b)}"' + (f" [{attrs}];" if attrs else ";")


def render_dot(graph: Graph, title: str = "") -> str:
    lines = ["graph topology {",
             f'  graph [rankdir=TB, fontname="Helvetica", labelloc=t, label="{_dot_text(title)}"];',
             '  node [style="rounded,filled", shape=box, fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    groups = [n for n in graph.nodes if n.kind == "numa"]
    for group in groups:
        lines.append(f'  subgraph "cluster_{_dot_text(group.id)}" {{')
        lines.append('    style="rounded,dashed"; color="#7f8c8d"; label="";')
        lines.append(_dot_node(group, "    "))
        lines += [_dot_node(n, "    ") for n in graph.nodes if n.parent == group.id]
        lines.append("  }")
    grouped = {g.id for g in groups}
    lines += [_dot_node(n, "  ") for n in graph.nodes if n.kind != "numa" and n.parent not in grouped]
    lines += [_dot_edge(e) for e in graph.edges]
    return "\n".join([*lines, "}"]) + "\n"


def _mermaid_id(node_id: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\n", "<br/>")


def _mermaid_edge_text(text: str) -> str:
    """An edge label, quoted, with the characters Mermaid's edge grammar reads as syntax (parentheses,
    brackets, braces, pipes) written as entity codes."""
    codes = {"(": "#40;", ")": "#41;", "[": "#91;", "]": "#93;", "{": "#123;", "}": "#125;", "|": "#124;"}
    return '"' + "".join(codes.get(c, c) for c in _mermaid_text(text)) + '"'


def _yaml_string(text: str) -> str:
    """A YAML double-quoted scalar: a title with ``:`` or ``#`` stays one string in the front matter."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def render_mermaid(graph: Graph, title: str = "") -> str:
    lines = (["---", f"title: {_yaml_string(title)}", "---"] if title else []) + ["flowchart TB"]
    groups = [n for n in graph.nodes if n.kind == "numa"]
    for group in groups:
        lines.append(f'  subgraph {_mermaid_id(group.id)}_box["socket"]')
        lines.append(f'    {_mermaid_id(group.id)}[("{_mermaid_text(group.label)}")]')
        lines += [f'    {_mermaid_id(n.id)}["{_mermaid_text(n.label)}"]' for n in graph.nodes
                  if n.parent == group.id]
        lines.append("  end")
    grouped = {g.id for g in groups}
    lines += [f'  {_mermaid_id(n.id)}{{{{"{_mermaid_text(n.label)}"}}}}' if n.kind == "nvswitch"
              else f'  {_mermaid_id(n.id)}["{_mermaid_text(n.label)}"]'
              for n in graph.nodes if n.kind != "numa" and n.parent not in grouped]
    arrows = {"nvlink": "===", "c2c": "===", "smp": "-.-", "internal": "-.-"}
    red = []
    for i, edge in enumerate(graph.edges):
        arrow = arrows.get(edge.kind, "---")
        label = f"|{_mermaid_edge_text(edge.label)}|" if edge.label else ""
        lines.append(f"  {_mermaid_id(edge.a)} {arrow}{label} {_mermaid_id(edge.b)}")
        red += [str(i)] if edge.degraded else []
    lines += [f"  classDef {kind} fill:{color}" for kind, color in FILL.items()]
    lines += [f"  class {_mermaid_id(n.id)} {n.kind}" for n in graph.nodes if n.kind in FILL]
    if red:
        lines.append(f"  linkStyle {','.join(red)} stroke:#c0392b,stroke-width:2px")
    return "\n".join(lines) + "\n"


def to_svg(dot_text: str, timeout: float = 60.0) -> str:
    """Graphviz ``dot -Tsvg``; :class:`DiagramError` when it is not installed or fails."""
    binary = shutil.which("dot")
    if binary is None:
        raise DiagramError("SVG needs Graphviz's `dot` program, which is not installed "
                           "(apt-get install graphviz); --format dot or mermaid work without it")
    try:
        done = subprocess.run([binary, "-Tsvg"], input=dot_text, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise DiagramError(f"Graphviz `dot` could not run: {err}") from err
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise DiagramError(f"Graphviz `dot` failed (exit {done.returncode}): {first}")
    return done.stdout
