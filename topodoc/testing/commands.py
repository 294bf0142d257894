"""Command replay: executables that print what a recording's commands printed (a PATH shim).

:func:`write_shims` writes one small Python script per recorded program (``nvidia-smi``...) into a
directory; put it first on ``PATH`` and code under test that runs ``nvidia-smi topo -m`` gets the
recorded stdout, stderr and exit status. An invocation the recording does not hold exits 97 with a
message naming it, so a test never passes on output nobody recorded.
"""

from __future__ import annotations

import json
import os
import sys

NOT_RECORDED_EXIT = 97

_SCRIPT = """#!{python}
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "commands.json")) as fh:
    tape = json.load(fh)
argv = [os.path.basename(sys.argv[0])] + sys.argv[1:]
for entry in tape["commands"]:
    if [os.path.basename(entry["argv"][0])] + entry["argv"][1:] == argv:
        sys.stdout.write(entry.get("stdout") or "")
        sys.stderr.write(entry.get("stderr") or "")
        if entry.get("missing"):
            sys.exit(127)
        rc = entry.get("returncode")
        sys.exit(124 if entry.get("timed_out") or rc is None else rc)
sys.stderr.write("topodoc command replay: '%s' was not recorded on %s\\n" % (" ".join(argv), tape["machine"]))
sys.exit({not_recorded})
"""


def write_shims(directory: str, command_tape: dict, machine: str) -> list[str]:
    """Write the shims for every program in ``command_tape`` into ``directory``; their names."""
    os.makedirs(directory, exist_ok=True)
    commands = [c for c in command_tape.get("commands", []) if c.get("argv")]
    with open(os.path.join(directory, "commands.json"), "w") as fh:
        json.dump({"machine": machine, "commands": commands}, fh)
    names = sorted({os.path.basename(c["argv"][0]) for c in commands})
    for name in names:
        path = os.path.join(directory, name)
        with open(path, "w") as fh:
            fh.write(_SCRIPT.format(python=sys.executable, not_recorded=NOT_RECORDED_EXIT))
        os.chmod(path, 0o755)
    return names
