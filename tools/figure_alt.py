"""Give each figure of a chapter's page its alt text: the description the kernel wrote into the PNG.

``attnlib.viz`` sends every figure from a notebook kernel as a PNG with a ``Description`` text
chunk (:func:`attnlib.viz.describe`: the figure's title, panels, axes, legend and colour bars).
MyST-NB writes each image output to a file and gives its ``<img>`` the file's path as alt text,
which a screen reader reads out as a hash. This Sphinx extension reads the chunk back from the
file and makes it the alt text, for images whose alt MyST-NB did not get from the cell. Used as
a local extension (``_config.yml``); tested in ``tests/test_tools.py``.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

from docutils import nodes

_PNG = b"\x89PNG\r\n\x1a\n"


def png_description(data: bytes) -> str | None:
    """The ``Description`` of a PNG's tEXt, zTXt or iTXt chunks, None when it has none."""
    if not data.startswith(_PNG):
        return None
    pos = len(_PNG)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IEND":
            break
        try:
            if kind == b"tEXt":
                key, _, text = body.partition(b"\0")
                if key == b"Description":
                    return text.decode("latin-1")
            elif kind == b"zTXt":
                key, _, rest = body.partition(b"\0")
                if key == b"Description":
                    return zlib.decompress(rest[1:]).decode("latin-1")
            elif kind == b"iTXt":
                key, _, rest = body.partition(b"\0")
                if key == b"Description":
                    compressed, _method = rest[0], rest[1]
                    _lang, _, rest = rest[2:].partition(b"\0")
                    _translated, _, text = rest.partition(b"\0")
                    return (zlib.decompress(text) if compressed else text).decode("utf-8")
        except (zlib.error, UnicodeDecodeError, IndexError):
            return None
    return None


def _paths(app, image) -> list[str]:
    """Where the image's file may be: Sphinx's image collector may already have made its uri
    relative to the source folder (``candidates``), else it is relative to the document."""
    found = [str(Path(app.srcdir) / c) for c in image.get("candidates", {}).values() if c != "?"]
    for uri in (image.get("original_uri"), image.get("uri")):
        if uri:
            found.append(app.env.relfn2path(uri, app.env.docname)[1])
    return found


def on_doctree_read(app, doctree) -> None:
    for image in doctree.findall(nodes.image):
        uri = image.get("uri", "")
        if not uri.lower().endswith(".png") or (image.get("alt") and image["alt"] != uri):
            continue
        text = None
        for path in _paths(app, image):
            try:
                text = png_description(Path(path).read_bytes())
            except OSError:
                continue
            break
        if text:
            image["alt"] = text


def setup(app) -> dict:
    app.connect("doctree-read", on_doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
