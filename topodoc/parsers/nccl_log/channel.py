"""The channel/connection line, in one place: how it is recognised, keyed, counted and read.

Formats (REFERENCE.md §1.10): ``Channel CC/I : r[d] -> p[d] [send] via NET/<name>/<nic>`` with optional
``(proxy)`` (PXN), ``/GDRDMA``, ``(PCI)``, ``/Shared``; ``via P2P/IPC|CUMEM|MNNVL|direct pointer|
indirect/r[d]`` with ``/read`` and ``/CE``; ``via SHM/...`` (``direct shared memory`` <= 2.13); NCCL 2.4-2.6
print ``Ring`` instead of ``Channel``. A ``[receive]`` line names the peer first. Lines are also quoted
bare, without ``Channel NN/N :`` (``3[3d000] -> 11[3d000] [receive] via NET/IB/1/GDRDMA``).

The scanner keeps a big log's connection lines as counts under a :func:`key`: the line's *place* (host and
CUDA device from the prefix — not the pid, so a job restarted a hundred times folds into the same keys)
and the text after ``Channel NN/N :`` (the channel number dropped, so one rank's 32 channels to a peer are
one key). :func:`row` reads a key into a :class:`~topodoc.logmodel.Connection` once per distinct key.
"""

from __future__ import annotations

import re

from topodoc.logmodel import Connection, Evidence
from topodoc.parsers.nccl_log import prefix

WORDS = (b"Channel", b"Ring")  # the first word of a connection record's message
WORDS_TEXT = ("Channel", "Ring")
VIA = b" via "
KEY_LIMIT = 256  # bytes of a connection line kept in its key (real ones are under 100)
# a connection line cut before its transport (the rest follows on the next physical line)
INCOMPLETE = re.compile(r"^(?:Channel|Ring) \d{1,9}(?:/\d{1,9})? : \d{1,9}(?:\[\w{1,32}\])? ->(?!.* via \S)")
CONTINUATIONS = ("via", "NET/", "P2P/", "SHM", "COLLNET/", "[send]", "[receive]", "direct", "/")
# a bare connection line: "3[3d000] -> 11[3d000] [receive] via NET/IB/1/GDRDMA" (no prefix, no "Channel")
BARE_TEXT = re.compile(
    r"^\s{0,16}\d{1,9}\[\w{1,32}\] -> \d{1,9}\[\w{1,32}\](?: \[(?:send|receive)\])? via \S"
)

_CONN = re.compile(
    r"(\d{1,9})(?:\[\w{1,32}\])? -> (\d{1,9})(?:\[\w{1,32}\])?(?: \[(send|receive)\])? via (\S[^\n]{0,200})"
)
# NET/<name>/<nic>[(proxy)][flags]; the name may hold a space ("AWS Libfabric"); text after is cut
_NET = re.compile(r"NET/([^/\n]{1,64}?)/(\d{1,9})(?:\((\d{1,9})\))?((?:/[A-Za-z]{0,16}|\(PCI\)){0,8})")
_P2P = re.compile(r"P2P/(IPC|CUMEM|MNNVL|direct pointer|indirect/\d{1,9}\[\w{1,32}\])((?:/\w{0,16}){0,8})")
_NET_FLAGS = {"/GDRDMA", "/Shared", "(PCI)"}
_FLAG = re.compile(r"/[A-Za-z]*|\(PCI\)")
_PLACES: dict[bytes, bytes] = {}
_PLACES_LIMIT = 16384
_COLLNET = re.compile(r"^COLLNET/([^/\s]+)/(\d{1,9})")


def is_connection(msg: bytes) -> bool:
    """``msg`` (the text after ``NCCL INFO``) is a whole connection line."""
    return msg.startswith(WORDS) and VIA in msg


def place(tail: bytes) -> bytes:
    """The part of a line in front of `` NCCL INFO `` that places a connection, as ``host [dev]``.

    The prefix grammar (:func:`.prefix.who`) reads the host and device out of whatever launcher decoration
    surrounds them; the pid and thread id are dropped, so restarts of a job fold together. Callers cache
    the answer per distinct ``tail``; this function caches it per prefix (the last two words), in a bounded
    table, so a timestamp on every line does not cost a parse per line."""
    end = tail.rfind(b" ")
    words = tail[tail.rfind(b" ", 0, end) + 1 :]  # "host:pid:tid [dev]": timestamps and tags left out
    found = _PLACES.get(words)
    if found is None:
        if len(_PLACES) >= _PLACES_LIMIT:
            _PLACES.clear()
        found = _PLACES[words] = _place(words)
    return found


def _place(tail: bytes) -> bytes:
    rec = prefix.who(tail.decode("utf-8", "replace"))
    if rec is None:  # not a prefix the grammar knows: kept apart, with no host
        return b" [" + tail[-64:].replace(b" ", b"_") + b"]"
    return f"{rec.host or ''} [{'' if rec.dev is None else rec.dev}]".encode()


def key(tail: bytes, msg: bytes) -> tuple[bytes, bytes]:
    """The counting key of the connection line ``tail + b" NCCL INFO " + msg``."""
    return place(tail), msg[msg.find(b" : ") + 3 :][:KEY_LIMIT]


def key_of(host: str | None, dev: int | None, msg: str) -> tuple[bytes, bytes] | None:
    """The same key for a record already parsed by the full grammar (``Channel ...`` or a bare line)."""
    at = msg.find(" : ")
    rest = msg[at + 3 :] if at > 0 and msg.startswith(WORDS_TEXT) else msg
    if " via " not in rest:
        return None
    return f"{host or ''} [{'' if dev is None else dev}]".encode(), rest.encode()[:KEY_LIMIT]


def host_of(place_key: bytes) -> str | None:
    host = place_key.rsplit(b" ", 1)[0].decode("utf-8", "replace")
    return host or None


def row(place_key: bytes, rest: bytes, ev: Evidence) -> Connection | None:
    """One connection key read into a row (``channels`` 1); ``None`` when the text is not a connection."""
    found = _CONN.match(rest.decode("utf-8", "replace")[:512])
    if found is None:
        return None
    src, dst, direction, via = int(found[1]), int(found[2]), found[3], found[4].rstrip()
    rank, peer = (dst, src) if direction == "receive" else (src, dst)
    transport, nic, gdr, proxy, flags = _via(via)
    return Connection(
        rank=rank,
        peer=peer,
        transport=transport,
        direction=direction,
        host=host_of(place_key),
        nic=nic,
        gdr=gdr,
        proxy_rank=proxy,
        flags=flags,
        channels=1,
        evidence=ev,
    )


def _via(via: str) -> tuple[str, int | None, bool | None, int | None, tuple[str, ...]]:
    net = _NET.match(via)
    if net:
        tokens = _FLAG.findall(net[4])
        flags = tuple(f for f in ("Shared", "PCI") if f in net[4])
        proxy = int(net[3]) if net[3] else None
        # a line cut inside its flags ("/GDR") cannot say whether GDR was used
        gdr = "/GDRDMA" in tokens if all(t in _NET_FLAGS for t in tokens) else None
        return f"NET/{net[1]}", int(net[2]), gdr, proxy, flags
    p2p = _P2P.match(via)
    if p2p:
        kind = p2p[1].split(" ")[0].split("/")[0]
        return f"P2P/{kind}", None, None, None, tuple(f for f in p2p[2].split("/") if f)
    if via.startswith("SHM") or via.startswith("direct shared"):
        return "SHM", None, None, None, ()
    coll = _COLLNET.match(via)
    if coll:
        return f"COLLNET/{coll[1]}", int(coll[2]), None, None, ()
    return via.split(" ", 1)[0], None, None, None, ()  # an unknown transport: its first token
