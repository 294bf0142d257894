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


def parse_prefix(text: str) -> tuple[ET.Element, str | None]:
    if "<!ENTITY" in text:
        raise XmlError("XML with entity declarations is not read")
    parser = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    error: str | None = None
    try:
        parser.feed(text)
        root = _first(parser, root)
        parser.close()
    except ET.ParseError as err:
        error = str(err)
    root = _first(parser, root)
    if root is None:
        raise XmlError(f"broken XML: {error or 'no element'}")
    return root, error


def _first(parser: ET.XMLPullParser, root: ET.Element | None) -> ET.Element | None:
    try:
        for _event, elem in parser.read_events():
            if root is None:
                root = elem
    except ET.ParseError:
        pass
    return root
