"""XML that may have been cut: parse what is there, say where it stopped.

Pastes of ``nvidia-smi -q -x`` or an NCCL topology dump are often cut mid-document. :func:`parse_prefix`
returns the root element built from everything before the cut (elements already opened keep the
children and text read so far) and the parse error, or ``None`` when the document is whole. Entity
declarations are refused (no expansion attacks).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET


class XmlError(ValueError):
    """Nothing usable: no root element before the error, or entity declarations."""


MAX_DEPTH = 64  # nvidia-smi -q -x, NCCL and hwloc topologies nest under 20 deep; 1,000 is an attack
_CHUNK = 1 << 16


def parse_prefix(text: str) -> tuple[ET.Element, str | None]:
    """The root and the parse error (``None`` when whole). Fed in chunks with the nesting depth counted
    as elements open, so a deep document is refused (:class:`XmlError`) before any walker recurses."""
    if "<!ENTITY" in text:
        raise XmlError("XML with entity declarations is not read")
    parser = ET.XMLPullParser(events=("start", "end"))
    root: ET.Element | None = None
    error: str | None = None
    depth = 0
    try:
        for at in range(0, len(text), _CHUNK):
            parser.feed(text[at : at + _CHUNK])
            root, depth = _events(parser, root, depth)
        parser.close()
    except ET.ParseError as err:
        error = str(err)
    root, depth = _events(parser, root, depth)
    if root is None:
        raise XmlError(f"broken XML: {error or 'no element'}")
    return root, error


def _events(parser: ET.XMLPullParser, root: ET.Element | None, depth: int) -> tuple[ET.Element | None, int]:
    try:
        for event, elem in parser.read_events():
            if event == "end":
                depth -= 1
                continue
            depth += 1
            if depth > MAX_DEPTH:
                raise XmlError(f"XML nested deeper than {MAX_DEPTH} elements: "
                               "not a topology or an nvidia-smi file")
            if root is None:
                root = elem
    except ET.ParseError:
        pass
    return root, depth
