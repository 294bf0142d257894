"""Archives whose member sizes are negative (issue 22, item 2).

Python 3.11's tarfile reads a GNU base-256 negative size (and a PAX ``size`` record of ``-N``) and moves
its offset back by it. The extraction budget added the sizes, so +S / -S pairs kept the total near 0
while every return sent the gzip stream back to its start to decompress it again: the seesaw below (a
~140 KB archive) was accepted after 16 s and 1.3 GB RSS. Now a negative size, an offset that does not
grow, or a backward seek is refused at once, and the stream budget counts bytes actually decompressed.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import time

import pytest
from archives import build

from topodoc.probe import archive
from topodoc.probe.archive import ArchiveError


def _header(name: str, size: int, fmt=tarfile.GNU_FORMAT, pax: dict | None = None) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    if pax:
        info.pax_headers = pax
    return info.tobuf(format=fmt, encoding="utf-8", errors="surrogateescape")


def _gzip(path, body: bytes):
    with gzip.open(path, "wb", compresslevel=1) as gz:
        gz.write(body + b"\0" * 1024)
    return path


def seesaw(path, pairs: int = 40, pad: int = 31 << 20):
    """Forward headers ``h<i>`` jump over ``pad`` zero bytes to back headers ``b<i>`` whose negative
    sizes return to ``h<i+1>``: every name distinct, the sum of sizes near 0."""
    d_start, b_start = 512, 512 + pairs * 512 + pad
    forward, back = [], []
    for i in range(pairs):
        forward.append(_header(f"fs/h{i}", b_start + i * 512 - (d_start + i * 512 + 512)))
        target = d_start + (i + 1) * 512 if i + 1 < pairs else b_start + pairs * 512
        back.append(_header(f"fs/b{i}", target - (b_start + i * 512 + 512)))
    return _gzip(path, _header("fs/first", 0) + b"".join(forward) + b"\0" * pad + b"".join(back))


def _scan(path):
    with open(path, "rb") as raw:
        return archive.scan(raw)


def test_seesaw_of_negative_sizes_is_refused_at_once(tmp_path):
    path = seesaw(tmp_path / "seesaw.tar.gz")
    start = time.monotonic()
    with pytest.raises(ArchiveError, match="negative size"):
        _scan(path)
    assert time.monotonic() - start < 3  # was 16 s and 1.3 GB, then accepted


def test_negative_pax_size_is_refused(tmp_path):
    body = _header("fs/a", 0, tarfile.PAX_FORMAT, pax={"size": "-1024"}) + _header("fs/b", 0)
    with pytest.raises(ArchiveError, match="negative size|does not follow|sends the reader back"):
        _scan(_gzip(tmp_path / "pax.tar.gz", body))


def test_stream_budget_counts_bytes_read_not_claimed_sizes():
    """The bounded stream refuses a backward seek and counts forward skips as read."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
        gz.write(b"\0" * 4096)
    raw.seek(0)
    stream = archive._Bounded(gzip.GzipFile(fileobj=raw, mode="rb"))
    stream.seek(2048)
    assert stream._consumed == 2048
    stream.read(512)
    with pytest.raises(ArchiveError, match="back"):
        stream.seek(1024)


def test_ordinary_archives_still_extract(tmp_path):
    path = build(tmp_path / "ok.tar.gz", [("fs/a", "file", b"x" * 1000), ("fs/d", "dir", None),
                                          ("fs/d/b", "file", b""), ("fs/l", "sym", "a")])
    plan = _scan(path)
    assert [e.name for e in plan.entries] == ["fs/a", "fs/d", "fs/d/b", "fs/l"]
    assert plan.total_bytes == 1000
