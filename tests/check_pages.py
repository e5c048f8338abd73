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
* a figure whose text the page draws under 9 px: attnlib.viz draws no text under 7 pt
  (9.7 px at 1:1), so a figure shown narrower than 0.93 of the width it was drawn for
  (a 2x PNG's ``width`` attribute, else its pixels) fails; the summary line gives each
  page's smallest figure text;
* an embedded ipywidget that does not render: a
  ``<script type="application/vnd.jupyter.widget-view+json">`` whose
  ``div.widget-subarea`` (inserted by the ipywidgets HTML manager) holds no
  visible ``.jupyter-widgets`` / ``.widget-*`` element, or a view tag on a page
  without embedded widget state.

* a code cell whose lines are wider than its box at a 1280-pixel-wide window (cut off
  or scrolled for the reader);
* any console error or uncaught page error (the browser's own favicon request aside).

Each page is then opened again in a phone-sized window (390x844, ``PHONE_VIEWPORT``), where it
fails on:

* a page that scrolls sideways (the document's ``scrollWidth`` wider than the window): the
  widest element that nothing clips is named (long inline code, a table or an output block
  that does not scroll in its own box);
* a chapter list that cannot be reached: no visible ☰ button (``.primary-toggle``), or clicking
  it does not show a link to another page of the book inside the window (pydata-sphinx-theme
  0.17 under sphinx-book-theme 1.3 hooked the click to a hidden button: issue 25);
* likewise the page's contents (``.secondary-toggle``) where the page has that button, and an
  open sidebar that a tap beside it does not close.

A full-page screenshot of each page is saved with ``--screenshots DIR``, and two of the window
at 390 pixels: ``NAME.390.png`` as the page opens and ``NAME.390-chapters.png`` with the
chapter list open.

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
#: The window of the desktop checks, and of the phone checks (CSS pixels; a 6.1-inch phone).
DESKTOP_VIEWPORT = {"width": 1280, "height": 900}
#: The smallest figure text at 1:1: attnlib.viz.MIN_FONT_PT (7 pt) at 100 dpi, in px.
MIN_FIGURE_TEXT_PX_DRAWN = 7 * 100 / 72
#: What a page must show of it at 1280 px (issue 25: text >= 9 px on the page).
MIN_FIGURE_TEXT_PX = 9.0
PHONE_VIEWPORT = {"width": 390, "height": 844}
#: At the phone width: the sidebar buttons, and the links each must bring into view.
PRIMARY_TOGGLE = "button.primary-toggle:visible"
CHAPTER_LINKS = 'nav.bd-docs-nav a.reference.internal:not([href^="#"])'  # another page of the book
SECONDARY_TOGGLE = "button.secondary-toggle:visible"
PAGE_TOC_LINKS = "nav.page-toc a"


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
    smallest_figure_text_px: float = float("inf")  # at 1280 px, from the floor of attnlib.viz
    n_widgets: int = 0
    n_widgets_rendered: int = 0
    screenshot: str | None = None
    phone_screenshots: list[str] = field(default_factory=list)  # the phone-sized window

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        status = "PASS" if self.ok else "FAIL"
        kind = "chapter" if self.is_chapter else "page"
        line = (
            f"{status} {self.page} ({kind}): math={self.n_math} images={self.n_images} "
            + (f"figure-text>={self.smallest_figure_text_px:.1f}px " if self.n_images else "")
            + f"widgets={self.n_widgets_rendered}/{self.n_widgets} "
            f"external_requests={len(self.external_requests)} "
            f"console_errors={len(self.console_errors)}"
        )
        lines = [line]
        lines += [f"    FAIL: {f}" for f in self.failures]
        lines += [f"    console: {c}" for c in self.console_errors]
        if self.screenshot:
            lines.append(f"    screenshot: {self.screenshot}")
        if self.phone_screenshots:
            lines.append(f"    screenshots at {PHONE_VIEWPORT['width']}px: {', '.join(self.phone_screenshots)}")
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
    // the width the figure was drawn for (a 2x "retina" PNG says so in its width attribute)
    const drawn = parseFloat(img.style.width) || parseFloat(img.getAttribute("width")) || img.naturalWidth;
    const box = img.getBoundingClientRect();
    out.push({src: img.getAttribute("src") || "", w: img.naturalWidth, h: img.naturalHeight, drawn: drawn,
              shown: box.width, shownHeight: box.height,
              ok: img.complete && img.naturalWidth > 0,
              // a link that opens the image itself, full size (the book wraps its figures in one)
              opens: (() => { const a = img.closest("a"); return !!a && !!img.getAttribute("src") &&
                       a.href === new URL(img.getAttribute("src"), document.baseURI).href; })(),
              // the page's own content, not the theme's (launch-button logos)
              content: img.closest("article, .bd-article") !== null});
  }
  return out;
}
"""

#: Tables wider than their box: each must scroll inside a box that shows a scroll cue (the book's
#: CSS draws a shadow at the edge that hides content); ``cue`` False where it does not.
_CUT_TABLES_JS = r"""
() => {
  const out = [];
  for (const table of document.querySelectorAll(".bd-article table")) {
    let box = table.parentElement;
    while (box && box !== document.body && getComputedStyle(box).overflowX === "visible") box = box.parentElement;
    if (!box || box === document.body) continue;
    if (table.scrollWidth <= box.clientWidth + 1) continue;
    const style = getComputedStyle(box);
    const scrolls = style.overflowX === "auto" || style.overflowX === "scroll";
    out.push({cue: scrolls && style.backgroundImage.includes("gradient"),
              text: (table.textContent || "").replace(/\s+/g, " ").trim().slice(0, 50),
              wide: table.scrollWidth, box: box.clientWidth});
  }
  return out;
}
"""

#: Widget controls that reach past the article's right edge (a phone: issue 51).
_WIDE_WIDGETS_JS = r"""
() => {
  const article = document.querySelector(".bd-article");
  if (!article) return [];
  const right = article.getBoundingClientRect().right + 1;
  return Array.from(article.querySelectorAll(".widget-inline-hbox, .widget-dropdown, .widget-slider, .widget-toggle-buttons"))
    .filter((el) => el.getBoundingClientRect().width > 0 && el.getBoundingClientRect().right > right)
    .map((el) => (el.textContent || el.className).replace(/\s+/g, " ").trim().slice(0, 50));
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

#: A page wider than the window (the reader scrolls it sideways): the element reaching furthest
#: right that no box clips or scrolls (fixed boxes, the closed sidebars, are not part of the page).
_SIDEWAYS_JS = r"""
() => {
  const width = window.innerWidth, scrollWidth = document.documentElement.scrollWidth;
  if (scrollWidth <= width + 1) return null;
  const unclipped = (el) => {
    for (let a = el; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.position === "fixed") return false;
      if (a !== el && s.overflowX !== "visible") return false;
    }
    return true;
  };
  let widest = null, right = width + 1;
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    const elRight = r.right + window.scrollX;
    if (r.width > 0 && elRight > right && unclipped(el)) { widest = el; right = elRight; }
  }
  let name = "?", text = "";
  if (widest) {
    name = widest.tagName.toLowerCase() + (widest.id ? "#" + widest.id : "") +
      Array.from(widest.classList).map((c) => "." + c).join("");
    text = (widest.textContent || "").replace(/\s+/g, " ").trim().slice(0, 60);
  }
  return {width, scrollWidth, name, text, right: Math.round(right)};
}
"""

#: The first link matching the selector that the reader can see: inside the window, and on top
#: at its centre (not under a backdrop, not off-canvas). Polled by wait_for_function.
_LINK_IN_VIEW_JS = r"""
(selector) => {
  const w = window.innerWidth, h = window.innerHeight;
  for (const a of document.querySelectorAll(selector)) {
    const r = a.getBoundingClientRect();
    if (r.width < 1 || r.height < 1 || r.left < 0 || r.top < 0 || r.right > w || r.bottom > h) continue;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (hit && (hit === a || a.contains(hit))) return a.textContent.trim() || a.href;
  }
  return false;
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
        res.failures += _image_failures(images, "")
        res.failures += _table_failures(pg.evaluate(_CUT_TABLES_JS), "")
        # The figures' text as the page draws it: attnlib.viz draws nothing under MIN_FONT_PT
        # (7 pt: 9.7 px at matplotlib's 100 dpi), so a figure shown at `shown` px of the `drawn`
        # px it was made for shows its smallest text at 9.7 * shown / drawn px.
        for img in images:
            if img["ok"] and img["content"] and img["drawn"] > 0 and img["shown"] > 0:
                smallest = MIN_FIGURE_TEXT_PX_DRAWN * img["shown"] / img["drawn"]
                res.smallest_figure_text_px = min(res.smallest_figure_text_px, smallest)
                if smallest < MIN_FIGURE_TEXT_PX:
                    res.failures.append(
                        f"figure text {smallest:.1f} px on the page (drawn {img['drawn']:.0f} px wide, "
                        f"shown at {img['shown']:.0f}): under {MIN_FIGURE_TEXT_PX} px: {img['src'][:80]}")

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


def _open_sidebar(pg, toggle: str, links: str, what: str, timeout_ms: int) -> str | None:
    """Click the visible ``toggle`` button; None when a link matching ``links`` then shows, else why not."""
    button = pg.locator(toggle)
    if button.count() == 0:
        return f"no visible button opens the {what}"
    try:
        button.first.click(timeout=timeout_ms)
    except Exception as e:  # noqa: BLE001 - covered, moving or detached: the reader cannot click it
        return f"the button that opens the {what} cannot be clicked: {str(e).splitlines()[0]}"
    try:
        pg.wait_for_function(_LINK_IN_VIEW_JS, arg=links, timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - timed out: nothing to see
        return f"clicking the button that opens the {what} shows none of its links in the window"
    return None


def _close_sidebar(pg, timeout_ms: int) -> str | None:
    """Tap beside the open sidebar (its backdrop), as a phone reader would; None once it is closed."""
    # The chapter list opens on the left, the page's contents on the right: tap the other side.
    on_left = pg.evaluate(
        "() => { const d = document.querySelector('dialog[open]');"
        " return !d || d.getBoundingClientRect().left < window.innerWidth / 4; }"
    )
    x = PHONE_VIEWPORT["width"] - 10 if on_left else 10
    pg.mouse.click(x, PHONE_VIEWPORT["height"] // 2)
    try:
        pg.wait_for_function("() => !document.querySelector('dialog[open]')", timeout=timeout_ms)
    except Exception:  # noqa: BLE001
        return "an open sidebar does not close when the reader taps beside it"
    return None


def _image_failures(images: list, where: str) -> list[str]:
    """A distorted figure (drawn at another aspect ratio than its PNG's)."""
    out = []
    for img in images:
        if img["ok"] and img["content"] and img["h"] > 0 and img["shownHeight"] > 0 and img["shown"] > 0:
            natural, shown = img["w"] / img["h"], img["shown"] / img["shownHeight"]
            if abs(shown / natural - 1) > 0.02:
                out.append(f"{where}distorted figure: shown at {shown:.2f} width/height, drawn at {natural:.2f}: "
                           f"{img['src'][:80]}")
    return out


def _table_failures(tables: list, where: str) -> list[str]:
    return [f"{where}table cut without a scroll cue ({t['wide']}px in a {t['box']}px box): {t['text']!r}"
            for t in tables if not t["cue"]]


def _check_phone(context, server: _Server, res: PageResult, screenshot_dir: Path | None,
                 timeout_ms: int) -> None:
    """Open the page in a phone-sized window (``context``); add what fails there to ``res``."""
    where = f"at {PHONE_VIEWPORT['width']}px"
    pg = context.new_page()
    errors: list[str] = []

    def on_route(route):  # the desktop pass reports requests that leave localhost
        if _is_local(route.request.url, server.origin):
            route.continue_()
        else:
            route.abort()

    def on_console(message):
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        if _is_local(url, server.origin) and urlsplit(url).path in IGNORED_LOCAL_404:
            return  # the browser's own favicon request, as in _check_page
        errors.append(message.text)

    pg.route("**/*", on_route)
    pg.on("console", on_console)
    pg.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))

    def shot(suffix: str) -> None:
        if screenshot_dir is not None:
            screenshot_dir.mkdir(parents=True, exist_ok=True)
            path = screenshot_dir / f"{res.page.replace('/', '__')}.{PHONE_VIEWPORT['width']}{suffix}.png"
            pg.screenshot(path=str(path))
            res.phone_screenshots.append(str(path))

    try:
        pg.goto(res.url, wait_until="load", timeout=timeout_ms)
        # Lay the page out as the reader sees it: math typeset and widgets drawn.
        pg.evaluate(_WAIT_MATHJAX_JS)
        if res.n_widgets:
            try:
                pg.wait_for_function(
                    "(js) => eval('(' + js + ')')().rendered.every(Boolean)",
                    arg=_WIDGET_STATE_JS,
                    timeout=min(timeout_ms, 10000),
                )
            except Exception:  # noqa: BLE001 - the desktop pass reports widgets that do not render
                pass

        wide = pg.evaluate(_SIDEWAYS_JS)
        if wide:
            res.failures.append(
                f"{where} the page scrolls sideways ({wide['scrollWidth']}px wide in a {wide['width']}px "
                f"window): widest element {wide['name']} reaches {wide['right']}px: {wide['text']!r}"
            )
        shot("")
        # Figures keep their shape; text under 9 px only where a tap opens the figure full size
        # (the book's CSS and figure links); tables wider than the column scroll with a cue; no
        # control runs past the column.
        images = pg.evaluate(_IMAGES_JS)
        res.failures += _image_failures(images, f"{where} ")
        for img in images:
            if img["ok"] and img["content"] and img["drawn"] > 0 and img["shown"] > 0:
                smallest = MIN_FIGURE_TEXT_PX_DRAWN * img["shown"] / img["drawn"]
                if smallest < MIN_FIGURE_TEXT_PX and not img["opens"]:  # a tap opens it full size: fine
                    res.failures.append(f"{where} figure text {smallest:.1f} px (shown at {img['shown']:.0f} of "
                                        f"{img['drawn']:.0f} px): under {MIN_FIGURE_TEXT_PX} px: {img['src'][:80]}")
        res.failures += _table_failures(pg.evaluate(_CUT_TABLES_JS), f"{where} ")
        res.failures += [f"{where} a widget control runs past the column: {w!r}" for w in pg.evaluate(_WIDE_WIDGETS_JS)]

        why = _open_sidebar(pg, PRIMARY_TOGGLE, CHAPTER_LINKS, "chapter list (☰)", timeout_ms=5000)
        if why:
            res.failures.append(f"{where} {why}")
        else:
            shot("-chapters")
            why = _close_sidebar(pg, timeout_ms=5000)
            if why:
                res.failures.append(f"{where} {why}")
            elif pg.locator(SECONDARY_TOGGLE).count():
                why = _open_sidebar(pg, SECONDARY_TOGGLE, PAGE_TOC_LINKS, "page's contents", timeout_ms=5000)
                if why:
                    res.failures.append(f"{where} {why}")
    except Exception as e:  # noqa: BLE001 - one broken page must not hide the others
        res.failures.append(f"{where} the page could not be checked: {type(e).__name__}: {e}")
    finally:
        pg.close()
    for text in dict.fromkeys(errors):
        if text not in res.console_errors:  # those the desktop pass saw are reported once
            res.failures.append(f"{where} console error: {text}")


def check_book(
    html_dir: str | Path,
    toc: str | Path | None = None,
    screenshot_dir: str | Path | None = None,
    chromium: str = CHROMIUM,
    timeout_s: float = 30.0,
    pages: list[str] | None = None,
    phone: bool = True,
) -> list[PageResult]:
    """Check the root page and every ``_toc.yml`` page of a built book; return one result each.

    ``phone``: also check each page in a 390x844 window (``_check_phone``).
    """
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
            context = browser.new_context(viewport=DESKTOP_VIEWPORT, service_workers="block")
            for page in pages:
                results.append(_check_page(context, server, html_dir, page, shots, int(timeout_s * 1000)))
            context.close()
            if phone:
                context = browser.new_context(viewport=PHONE_VIEWPORT, service_workers="block")
                for res in results:
                    if res.url and (html_dir / f"{res.page}.html").is_file():
                        _check_phone(context, server, res, shots, int(timeout_s * 1000))
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
    parser.add_argument("--no-phone", dest="phone", action="store_false",
                        help="skip the checks in a 390x844 window")
    args = parser.parse_args(argv)

    try:
        results = check_book(args.html_dir, toc=args.toc, screenshot_dir=args.screenshots,
                             chromium=args.chromium, timeout_s=args.timeout, phone=args.phone)
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
