"""topodoc: how a GPU server is wired, which transport NCCL uses, and why collectives are slow.

The public API (documented in docs/API.md; everything else is internal and may change):

- :func:`load` a machine (live, a recording, ``example:NAME``, a ``probe --json`` file),
- :func:`derive` its topology, :func:`analyze_logs` NCCL logs, :func:`diagnose` both,
- :func:`examples` lists the bundled recordings; :class:`TopodocError` is every input error,
- ``topodoc.testing`` gives recorded machines to other projects' tests (and the pytest plugin).

Importing ``topodoc`` loads nothing else: the functions import what they need when called.
"""

__version__ = "0.1.0"
__all__ = ["load", "derive", "analyze_logs", "diagnose", "examples", "TopodocError", "__version__"]


def __getattr__(name: str):
    if name in __all__ and name != "__version__":
        from topodoc import api

        return getattr(api, name)
    raise AttributeError(f"module 'topodoc' has no attribute {name!r}")
