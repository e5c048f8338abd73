"""The whole book as one PDF, offline: Sphinx's single-page build printed by Debian's Chromium.

    make pdf        # = ATTNLIB_BOOK_EXECUTE=off jupyter-book build . --builder singlehtml
                    #   then: .venv/bin/python tools/book_pdf.py _build/singlehtml _build/book.pdf

Every chapter's page, with its committed outputs (figures, tables, folded figure captions),
is laid out as one HTML page (``singlehtml``) and printed by headless Chromium
(``/usr/bin/chromium``, driven by playwright, as ``tests/check_pages.py`` does) to A4, after
MathJax has typeset the equations; nothing is fetched from the network (the page loads
MathJax from the book's own ``_static``). The interactive figures print their committed
state. The PDF is written under a temporary name and renamed.
"""
from __future__ import annotations

import argparse
import http.server
import os
import re
import sys
import threading
from functools import partial
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
#: how long MathJax may take to typeset the whole book, in milliseconds
TYPESET_MS = 300_000


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the build; the single page lives in book/ but its images and assets are in the
    build's root (``_images``, ``_static``), which its relative links miss: those are found
    there."""

    def translate_path(self, path):
        found = super().translate_path(path)
        if not os.path.exists(found):
            for root in ("/_images/", "/_static/"):
                if root in path:
                    return super().translate_path(root + path.split(root, 1)[1])
        return found

    def log_message(self, *args):
        pass


def _serve(folder: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def print_book(single: Path, out: Path, *, chromium: str = CHROMIUM) -> Path:
    """Print ``single``/index.html (a ``singlehtml`` build) to ``out`` (A4); the PDF's path."""
    from playwright.sync_api import sync_playwright

    index = Path(single) / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"no single-page build at {index}: run jupyter-book build . --builder singlehtml")
    # Jupyter Book's index.html only redirects to the root page, which holds the whole book
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', index.read_text(encoding="utf-8"), re.I)
    page_path = redirect.group(1) if redirect else "index.html"
    if not Path(chromium).exists():
        raise FileNotFoundError(f"{chromium} is missing: apt-get install chromium")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial_pdf = out.with_name(f".{out.name}.partial")
    server = _serve(Path(single))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
                    f"http://127.0.0.1:{server.server_port}/") or route.request.url.startswith("data:")
                    else route.abort())
                page.goto(f"http://127.0.0.1:{server.server_port}/{page_path}", wait_until="load", timeout=120_000)
                page.set_default_timeout(TYPESET_MS)
                page.evaluate("async () => { const m = window.MathJax; "
                              "if (m && m.startup && m.startup.promise) { await m.startup.promise; } }")
                page.emulate_media(media="print")
                page.pdf(path=str(partial_pdf), format="A4", print_background=True,
                         margin={"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"})
            finally:
                browser.close()
    finally:
        server.shutdown()
    os.replace(partial_pdf, out)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("single", nargs="?", default="_build/singlehtml", help="the singlehtml build")
    parser.add_argument("out", nargs="?", default="_build/book.pdf", help="the PDF to write")
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args(argv)
    try:
        path = print_book(Path(args.single), Path(args.out), chromium=args.chromium)
    except FileNotFoundError as e:
        print(f"book_pdf: {e}", file=sys.stderr)
        return 2
    print(f"book_pdf: {path} ({path.stat().st_size / 2**20:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
