"""The bundled host recordings (``fixtures/hosts/<shape>/recording.tar.gz``, installed as the
``topodoc._examples`` package): list them and resolve ``example:<name>``."""

from __future__ import annotations

from pathlib import Path

RECORDING = "recording.tar.gz"


class ExampleNotFound(LookupError):
    pass


def examples_root() -> Path | None:
    here = Path(__file__).resolve().parent
    for root in (here / "_examples", here.parent / "fixtures" / "hosts"):  # installed; a source checkout
        if (root / "__init__.py").is_file():
            return root
    from importlib import resources  # anything else (a zip import): ~10 ms, so only when needed

    try:
        root = Path(str(resources.files("topodoc._examples")))
    except ModuleNotFoundError:
        return None
    return root if root.is_dir() else None


def list_examples() -> list[str]:
    root = examples_root()
    if root is None:
        return []
    return sorted(p.name for p in root.iterdir() if (p / RECORDING).is_file())


def example_path(name: str) -> Path:
    root = examples_root()
    path = root / name / RECORDING if root else None
    if path is None or not path.is_file():
        known = ", ".join(list_examples()) or "none"
        raise ExampleNotFound(f"no bundled example named {name!r} (known: {known})")
    return path


def example_readme(name: str) -> str | None:
    path = example_path(name).parent / "README.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def example_kind(name: str) -> str:
    """``synthetic`` (built by tools/fixtures/hosts/build.py from a declarative machine.json, to published
    specs) or ``real`` (recorded by ``topodoc record`` on a machine)."""
    return "synthetic" if (example_path(name).parent / "machine.json").is_file() else "real"
