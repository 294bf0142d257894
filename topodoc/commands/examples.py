"""``topodoc examples [--json]``: list the bundled host recordings (``topodoc._examples``) with the
one-line reason each exists, so anyone can try topodoc without a GPU server via
``--from example:<name>``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import click


@dataclass(frozen=True)
class Example:
    name: str
    why: str | None
    source: str  # what to pass to --from
    kind: str = "synthetic"  # "synthetic" (built to published specs) or "real" (recorded on a machine)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def command(as_json: bool) -> None:
    """List the bundled recordings of GPU servers; use one with `--from example:<name>`."""
    from topodoc import examples_index

    examples = [
        Example(name, why_line(examples_index.example_readme(name)), f"example:{name}",
                examples_index.example_kind(name))
        for name in examples_index.list_examples()
    ]
    if as_json:
        from topodoc.codec import to_data

        click.echo(json.dumps({"examples": to_data(examples)}, indent=2))
        return
    click.echo(render(examples))


def why_line(readme: str | None) -> str | None:
    """The first sentence of a README's first paragraph (after the heading): the example's why."""
    paragraph: list[str] = []
    for line in (readme or "").splitlines():
        text = line.strip()
        if text.startswith(("#", "<!--")) or (not text and not paragraph):
            continue
        if not text:
            break
        paragraph.append(text)
    joined = " ".join(paragraph)
    end = joined.find(". ")
    return (joined[: end + 1] if end >= 0 else joined) or None


def render(examples: list[Example]) -> str:
    if not examples:
        return "No bundled examples are installed."
    width = max(len(e.name) for e in examples)
    lines = [f"{e.name:<{width}}  {e.kind:<9}  {e.why or '(no README)'}" for e in examples]
    lines += ["", "synthetic: built by tools/fixtures/hosts/build.py to published specs and run through the "
              "real recorder; real: recorded on a machine with `topodoc record`.",
              "Try one: topodoc topo --from example:<name>"]
    return "\n".join(lines)
