"""Building test archives member by member (the hostile-archive and record-archive tests share it)."""

from __future__ import annotations

import io
import tarfile

KINDS = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "lnk": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
         "fifo": tarfile.FIFOTYPE}


def build(path, members):
    """members: (name, kind, payload); kind file (bytes), dir, sym / lnk (target), chr, fifo. Returns
    ``path`` as given."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
                continue
            info.type = KINDS[kind]
            if kind in ("sym", "lnk"):
                info.linkname = payload
            tar.addfile(info)
    return path
