#!/usr/bin/env python3
"""Open the built book in headless Chromium and check that every page renders offline.

Usage (after ``make book``)::

    .venv/bin/python tests/check_pages.py _build/html --screenshots _build/screenshots

The pages checked are the root page and every file listed in ``_toc.yml`` (found
next to ``_build``, or given with ``--toc``), so a chapter added to the table of
contents is checked without touching this script. For each page it fails on:

* a missing page (listed in ``_toc.yml`` but not in the build);
* any request to a host other than the local test server (the URL is recorded;
  the request is aborted, the machine has no network anyway), and any local
  request that fails or answers 4xx/5xx (a file missing from ``book/_vendor``);
* math that is not typeset: after ``MathJax.startup.promise`` resolves, a visible
  text node outside code blocks that still holds ``\\(``, ``\\[``, ``$$`` or
  ``\\begin{``;
* a missing figure: an ``<img>`` that does not decode (``naturalWidth == 0``);
  chapter pages (those under ``chapters/``) must show at least one image;
* an embedded ipywidget that does not render: a
  ``<script type="application/vnd.jupyter.widget-view+json">`` whose
  ``div.widget-subarea`` (inserted by the ipywidgets HTML manager) holds no
  visible ``.jupyter-widgets`` / ``.widget-*`` element, or a view tag on a page
  without embedded widget state.

* a code cell whose lines are wider than its box at a 1280-pixel-wide window (cut off
  or scrolled for the reader);
* any console error or uncaught page error (the browser's own favicon request aside).

A full-page
screenshot of each page is saved with ``--screenshots DIR``.

The browser is Debian's ``/usr/bin/chromium`` driven by Python playwright
(playwright's own browser download needs a network). The core is importable::

    from tests.check_pages import check_book          # or via importlib
    results = check_book("_build/html", toc="_toc.yml")
    assert all(r.ok for r in results)
"""
from __future__ import annotations

import argparse
import functools
import http.server
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["PageResult", "toc_pages", "check_book", "main", "CHROMIUM", "CHROMIUM_ARGS"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
#: Pages whose source path starts with one of these are chapters (need a figure).
CHAPTER_PREFIXES = ("chapters/",)
#: Local paths a browser may ask for on its own; a 404 there is not a failure.
IGNORED_LOCAL_404 = ("/favicon.ico",)


@dataclass
class PageResult:
    """What the check found on one page."""

    page: str  # source path from _toc.yml, without suffix, e.g. "chapters/01_x"
    url: str = ""
    is_chapter: bool = False
    failures: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    n_math: int = 0
    n_images: int = 0  # images in the page's content that loaded
    n_widgets: int = 0
    n_widgets_rendered: int = 0
    screenshot: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        status = "PASS" if self.ok else "FAIL"
        kind = "chapter" if self.is_chapter else "page"
        line = (
            f"{status} {self.page} ({kind}): math={self.n_math} images={self.n_images} "
            f"widgets={self.n_widgets_rendered}/{self.n_widgets} "
            f"external_requests={len(self.external_requests)} "
            f"console_errors={len(self.console_errors)}"
        )
        lines = [line]
        lines += [f"    FAIL: {f}" for f in self.failures]
        lines += [f"    console: {c}" for c in self.console_errors]
        if self.screenshot:
            lines.append(f"    screenshot: {self.screenshot}")
        return "\n".join(lines)


# --------------------------------------------------------------------- table of contents
def _strip_suffix(path: str) -> str:
    for suffix in (".ipynb", ".md", ".rst", ".myst"):
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


def toc_pages(toc: str | Path) -> list[str]:
    """Source paths (no suffix) of the root and every ``file:`` entry of a jb-book ToC."""
    import yaml

    data = yaml.safe_load(Path(toc).read_text(encoding="utf8"))
    pages: list[str] = [_strip_suffix(data["root"])]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(_strip_suffix(entry["file"]))
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk([{k: data[k] for k in ("parts", "chapters", "sections") if k in data}])
    return list(dict.fromkeys(pages))


def _find_toc(html_dir: Path) -> Path:
    # _build/html -> repository root
    for candidate in (html_dir.parent.parent / "_toc.yml", Path("_toc.yml")):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no _toc.yml next to {html_dir.parent.parent} or in the cwd; pass --toc")


# --------------------------------------------------------------------- local server
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


class _Server:
    """http.server on 127.0.0.1 (free port) serving ``root`` from a thread."""

    def __init__(self, root: Path):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


# --------------------------------------------------------------------- in-page checks
_RAW_MATH_JS = r"""
() => {
  const SKIP = new Set(["SCRIPT", "STYLE", "CODE", "PRE", "TEXTAREA", "NOSCRIPT",
                        "MJX-CONTAINER", "MJX-ASSISTIVE-MML", "TEMPLATE"]);
  const pat = /\\\(|\\\[|\$\$|\\begin\{/;
  const dollar = /\$[^$\s][^$]*\$/;  // $...$: only judged inside widgets (labels)
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const inWidget = node.parentElement && node.parentElement.closest(".widget-subarea");
    if (!pat.test(node.nodeValue) && !(inWidget && dollar.test(node.nodeValue))) continue;
    let el = node.parentElement, skip = false;
    while (el) {
      if (SKIP.has(el.tagName) || el.classList.contains("highlight")) { skip = true; break; }
      el = el.parentElement;
    }
    if (skip) continue;
    const p = node.parentElement;
    const style = p ? getComputedStyle(p) : null;
    if (style && (style.display === "none" || style.visibility === "hidden")) continue;
    bad.push(node.nodeValue.trim().slice(0, 120));
  }
  return bad;
}
"""

_WAIT_MATHJAX_JS = r"""
async () => {
  if (!window.MathJax || !window.MathJax.startup || !window.MathJax.startup.promise) {
    return document.querySelectorAll("mjx-container").length;
  }
  await window.MathJax.startup.promise;
  return document.querySelectorAll("mjx-container").length;
}
"""

#: Code cells whose lines do not fit their box (the reader would see them cut off or scrolled).
_CLIPPED_CODE_JS = r"""
() => Array.from(document.querySelectorAll("div.cell div.cell_input div.highlight pre"))
  .filter((pre) => pre.scrollWidth > pre.clientWidth + 1)
  .map((pre) => pre.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), ""))
"""

_IMAGES_JS = r"""
async () => {
  const imgs = Array.from(document.querySelectorAll("img"));
  const out = [];
  for (const img of imgs) {
    img.loading = "eager";
    try { await Promise.race([img.decode(), new Promise((_, r) => setTimeout(r, 10000))]); }
    catch (e) { /* judged by naturalWidth below */ }
    out.push({src: img.getAttribute("src") || "", w: img.naturalWidth,
              ok: img.complete && img.naturalWidth > 0,
              // the page's own content, not the theme's (launch-button logos)
              content: img.closest("article, .bd-article") !== null});
  }
  return out;
}
"""

_WIDGET_STATE_JS = r"""
() => {
  const views = Array.from(document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]'));
  const hasState = document.querySelector(
      'script[type="application/vnd.jupyter.widget-state+json"]') !== null;
  const rendered = views.map((s) => {
    const area = s.previousElementSibling;
    if (!area || !area.classList.contains("widget-subarea")) return false;
    const els = area.querySelectorAll('.jupyter-widgets, [class*="widget-"]');
    for (const el of els) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.height > 0) return true;
    }
    return false;
  });
  let model = [];
  for (const s of views) {
    try { model.push(JSON.parse(s.textContent).model_id || "?"); } catch (e) { model.push("?"); }
  }
  return {n: views.length, hasState, rendered, model,
          hasRequire: typeof window.requirejs === "function"};
}
"""


def _is_local(url: str, origin: str) -> bool:
    scheme = urlsplit(url).scheme
    if scheme in ("data", "blob", "about", "chrome-error"):
        return True
    return url == origin or url.startswith(origin + "/")


def _check_page(context, server: _Server, html_dir: Path, page: str, screenshot_dir: Path | None,
                timeout_ms: int) -> PageResult:
    res = PageResult(page=page, is_chapter=page.startswith(CHAPTER_PREFIXES))
    html_file = html_dir / f"{page}.html"
    res.url = f"{server.origin}/{page}.html"
    if not html_file.is_file():
        res.failures.append(f"page missing from the build: {html_file}")
        return res

    pg = context.new_page()
    bad_local: dict[str, str] = {}  # url -> what went wrong (first report wins)

    def on_route(route):
        url = route.request.url
        if _is_local(url, server.origin):
            route.continue_()
        else:
            res.external_requests.append(url)
            route.abort()

    def on_response(response):
        url = response.url
        if _is_local(url, server.origin) and response.status >= 400:
            if urlsplit(url).path not in IGNORED_LOCAL_404:
                bad_local.setdefault(url, f"HTTP {response.status}")

    def on_failed(request):
        url = request.url
        if _is_local(url, server.origin) and not url.startswith(("data:", "blob:")):
            if urlsplit(url).path not in IGNORED_LOCAL_404:
                bad_local.setdefault(url, f"failed ({request.failure})")

    pg.route("**/*", on_route)
    pg.on("response", on_response)
    pg.on("requestfailed", on_failed)
    def on_console(message):
        if message.type != "error":
            return
        where = (message.location or {}).get("url", "")
        if _is_local(where, server.origin) and urlsplit(where).path in IGNORED_LOCAL_404:
            return  # the browser's own favicon request, not the page's
        res.console_errors.append(message.text)

    pg.on("console", on_console)
    pg.on("pageerror", lambda e: res.console_errors.append(f"uncaught: {e}"))

    try:
        pg.goto(res.url, wait_until="load", timeout=timeout_ms)
        try:
            pg.wait_for_load_state("networkidle", timeout=timeout_ms)
        except Exception:  # noqa: BLE001 - keep checking; requests are judged below
            pass

        # Widgets: wait until every view tag has a rendered widget (or time out).
        state = pg.evaluate(_WIDGET_STATE_JS)
        if state["n"]:
            try:
                pg.wait_for_function(
                    "(js) => eval('(' + js + ')')().rendered.every(Boolean)",
                    arg=_WIDGET_STATE_JS,
                    timeout=timeout_ms,
                )
            except Exception:  # noqa: BLE001 - reported per widget below
                pass
            state = pg.evaluate(_WIDGET_STATE_JS)
        res.n_widgets = state["n"]
        res.n_widgets_rendered = sum(state["rendered"])
        if state["n"] and not state["hasState"]:
            res.failures.append(
                f"{state['n']} widget view(s) but no embedded widget state "
                "(the notebook's metadata.widgets was not saved at execution)"
            )
        if state["n"] and not state["hasRequire"]:
            res.failures.append("widget view(s) but RequireJS is not loaded (nb_ipywidgets_js)")
        for ok, model_id in zip(state["rendered"], state["model"]):
            if not ok:
                res.failures.append(f"widget {model_id} did not render")

        # Math: wait for MathJax's first typeset (and the widget labels chained onto
        # MathJax.startup.promise), then look for raw TeX.
        try:
            res.n_math = int(pg.evaluate(_WAIT_MATHJAX_JS))
        except Exception as e:  # noqa: BLE001
            res.failures.append(f"MathJax did not finish: {e}")
        raw = pg.evaluate(_RAW_MATH_JS)
        for text in raw:
            res.failures.append(f"raw (un-typeset) math in the page: {text!r}")
        has_math_markup = pg.evaluate(
            "() => document.querySelectorAll('.math, span.math, div.math').length"
        )
        if has_math_markup and res.n_math == 0:
            res.failures.append(
                f"{has_math_markup} math element(s) but no mjx-container: MathJax did not typeset"
            )

        # Code that does not fit the page's width.
        for line in pg.evaluate(_CLIPPED_CODE_JS):
            res.failures.append(f"code cell wider than the page ({len(line)} characters): {line.strip()[:70]!r}")

        # Figures.
        images = pg.evaluate(_IMAGES_JS)
        res.n_images = sum(1 for i in images if i["ok"] and i["content"])
        for img in images:
            if not img["ok"]:
                res.failures.append(f"image did not load: {img['src'][:120]}")
        if res.is_chapter and not any(i["content"] for i in images):
            res.failures.append("chapter page has no figure (every chapter shows at least one image)")

        if screenshot_dir is not None:
            screenshot_dir.mkdir(parents=True, exist_ok=True)
            shot = screenshot_dir / (page.replace("/", "__") + ".png")
            pg.screenshot(path=str(shot), full_page=True)
            res.screenshot = str(shot)
    except Exception as e:  # noqa: BLE001 - one broken page must not hide the others
        res.failures.append(f"page could not be checked: {type(e).__name__}: {e}")
    finally:
        pg.close()

    for text in dict.fromkeys(res.console_errors):
        res.failures.append(f"console error: {text}")
    for url in dict.fromkeys(res.external_requests):
        res.failures.append(f"request left localhost: {url}")
    for url, what in bad_local.items():
        res.failures.append(f"local request failed: {what} {url}")
    return res


def check_book(
    html_dir: str | Path,
    toc: str | Path | None = None,
    screenshot_dir: str | Path | None = None,
    chromium: str = CHROMIUM,
    timeout_s: float = 30.0,
    pages: list[str] | None = None,
) -> list[PageResult]:
    """Check the root page and every ``_toc.yml`` page of a built book; return one result each."""
    from playwright.sync_api import sync_playwright

    html_dir = Path(html_dir).resolve()
    if not html_dir.is_dir():
        raise FileNotFoundError(f"no built book at {html_dir}")
    if pages is None:
        pages = toc_pages(Path(toc) if toc else _find_toc(html_dir))
    if not Path(chromium).exists():
        raise FileNotFoundError(f"{chromium} is missing: install Debian's browser with `apt-get install chromium`")
    shots = Path(screenshot_dir) if screenshot_dir else None

    results = []
    with _Server(html_dir) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
            for page in pages:
                results.append(_check_page(context, server, html_dir, page, shots, int(timeout_s * 1000)))
            context.close()
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", help="the built book, e.g. _build/html")
    parser.add_argument("--toc", help="the _toc.yml (default: next to _build, else ./_toc.yml)")
    parser.add_argument("--screenshots", metavar="DIR", help="save a full-page PNG of each page here")
    parser.add_argument("--chromium", default=CHROMIUM, help=f"browser binary (default {CHROMIUM})")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait per page step")
    args = parser.parse_args(argv)

    try:
        results = check_book(args.html_dir, toc=args.toc, screenshot_dir=args.screenshots,
                             chromium=args.chromium, timeout_s=args.timeout)
    except FileNotFoundError as e:
        print(f"check_pages: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"check_pages: {e}; install the test extra: pip install -e '.[test]'", file=sys.stderr)
        return 2
    for r in results:
        print(r.summary())
    n_fail = sum(not r.ok for r in results)
    print(f"\n{len(results) - n_fail} pages passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
