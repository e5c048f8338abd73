"""Link each chapter's first use of a glossary term to book/glossary.md (idempotent).

The glossary's entries are its ``## `` headings; a link is ``[word](../book/glossary.md#slug)``
with the slug GitHub, MyST (``myst_heading_anchors``) and JupyterLab all make from a heading:
lower case, spaces to hyphens. For each term of :data:`TERMS`, the first plain-text match in
a chapter's markdown cells and ``prose`` cells (the paragraphs that quote the run, whose output
is Markdown), in order, becomes the link, once per chapter (not in a heading, code, math, a
quoted field ``{...}``, an exercise's title line, an HTML tag or an existing link, nor in a folded solution); a chapter that links the entry
already is left alone. Usage: ``python tools/glossary_links.py [--check]`` (``--check``: exit
1 when a link would be added, or a glossary link names no entry). Tested in tests/test_tools.py.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
TARGET = "../book/glossary.md"

#: glossary heading -> the pattern of its first use in a chapter
TERMS = {
    "TVD": r"\bTVD\b",
    "JSD": r"\bJSD\b",
    "Kendall tau": r"\bKendall\b",
    "Feature importance": r"\bfeature[- ]importance\b",
    "Permuted attention": r"\bpermut(?:ed|ing|ation of the) attention\b",
    "Adversarial attention": r"\badversarial attention\b",
    "Uniform attention": r"\buniform attention\b",
    "Training seed": r"\btraining seeds?\b",
    "Adversarial training": r"\badversarial training\b",
    "Degenerate": r"\bdegenerate\b",
    "Diagnostic classifier": r"\bdiagnostic (?:classifier|model|MLP)s?\b",
    "Decision flip": r"\bdecision flips?\b",
    "Null space": r"\bnull space\b",
    "Effective attention": r"\beffective attention\b",
    "Head importance": r"\bhead importance\b",
    "Deceptive attention": r"\bdeceptive attention\b",
    "Attention rollout": r"\brollout\b",
    "Attention flow": r"\battention flow\b",
    "Plausibility": r"\bplausibility\b",
    "Faithfulness": r"\bfaithfulness\b",
    "Comprehensiveness": r"\bcomprehensiveness\b",
    "Sufficiency": r"\bsufficiency\b",
    "AOPC": r"\bAOPC\b",
    "Within noise": r"\bwithin noise\b",
    "Norm-based attention": r"\bnorm-based attention\b",
    "Value zeroing": r"\b[Vv]alue zeroing\b",
    "Attention relevance": r"\battention relevance\b",
    "GlobEnc": r"\bGlobEnc\b",
    "Model-parameter randomisation": r"\b(?:cascading|model-parameter) randomisation\b",
    "Feature agreement": r"\bfeature agreement\b",
}

#: what a link must not go into: fenced code, code spans, display and inline math, links, HTML, headings, URLs
_PROTECTED = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|\[[^\]]*\]\([^)]*\)|<[^>\n]+>|^#[^\n]*$"
                        r"|^> <a id=[^\n]*$|https?://\S+|\{[^{}\n]*\}|^prose\($|^\s*r?\"\"\"$|^\"\"\"$|^\)$", re.S | re.M)
_LINK = re.compile(re.escape(TARGET) + r"#([\w-]+)")


def slug(heading: str) -> str:
    """The anchor of a heading, as GitHub and MyST make it (ASCII headings)."""
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def entries(text: str | None = None) -> dict[str, str]:
    """heading -> slug of every glossary entry."""
    text = GLOSSARY.read_text(encoding="utf-8") if text is None else text
    return {h: slug(h) for h in re.findall(r"^## (.+)$", text, re.M)}


def _link_first(source: str, pattern: re.Pattern, anchor: str) -> str | None:
    """``source`` with the first unprotected match linked, or None when there is none."""
    start = 0
    for protected in [*_PROTECTED.finditer(source), None]:
        stop = protected.start() if protected is not None else len(source)
        match = pattern.search(source, start, stop)
        if match:
            return f"{source[:match.start()]}[{match.group(0)}]({TARGET}#{anchor}){source[match.end():]}"
        if protected is None:
            return None
        start = protected.end()
    return None


#: a code line's width in the chapters (tests/test_viz_widgets_exercises.py): a prose cell is code
CODE_WIDTH = 88


def wrap_link(text: str, link: str, splits: tuple | None = None) -> tuple[str, tuple]:
    """``text`` with the line holding ``link`` broken around it, and the breaks made.

    Without ``splits``, where that line is wider than :data:`CODE_WIDTH`: the last space
    before the link, then (if still too wide) the first space after it, becomes a line break,
    where only literal text (no ``{field}``) lies between that space and the link. With
    ``splits`` (``(before, after)``, from the template): those breaks, whatever the width,
    so a prose cell's output gets the breaks its template got (the link and the text beside
    it are literal in both). In Markdown a line break inside a paragraph is a space: the
    paragraph reads the same."""
    lines = text.split("\n")
    made = (False, False)
    for k, line in enumerate(lines):
        at = line.find(link)
        if at < 0 or (splits is None and len(line) <= CODE_WIDTH):
            continue
        parts, before, after_made = [line], False, False
        cut = line.rfind(" ", 0, at)  # the last space before the link
        if (splits[0] if splits else True) and cut > 0 and not set(line[cut:at]) & set("{}"):
            parts, before = [line[:cut], line[cut + 1:]], True
        tail = parts[-1]
        end = tail.find(link) + len(link)
        after = tail.find(" ", end)  # the first space after it
        wanted = splits[1] if splits else len(tail) > CODE_WIDTH
        if wanted and after > 0 and not set(tail[end:after]) & set("{}"):
            parts[-1:], after_made = [tail[:after], tail[after + 1:]], True
        lines[k] = "\n".join(parts)
        made = (before, after_made)
        break
    return "\n".join(lines), made


def _set_source(cell: dict, text: str) -> None:
    lines = text.split("\n")
    cell["source"] = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def wrap_prose_links(nb: dict) -> int:
    """Break the lines of ``prose`` cells that a glossary link made wider than :data:`CODE_WIDTH`
    (:func:`wrap_link`), in the template and in its committed Markdown output alike; how many
    links were wrapped."""
    done = 0
    for cell in nb["cells"]:
        if "prose" not in cell.get("metadata", {}).get("tags", []):
            continue
        source = _text(cell["source"])
        for link in re.findall(r"\[[^\[\]\n]*\]\(" + re.escape(TARGET) + r"#[\w-]+\)", source):
            source, made = wrap_link(source, link)
            if not any(made):
                continue
            for out in cell.get("outputs", []):
                for mime in ("text/markdown", "text/plain"):
                    if mime in out.get("data", {}):
                        text, _ = wrap_link(_text(out["data"][mime]), link, made)
                        out["data"][mime] = text.splitlines(keepends=True)
            done += 1
        _set_source(cell, source)
    return done


def link_chapter(nb: dict, known: dict[str, str]) -> list[str]:
    """Add the missing first-use links to a notebook (in place); the headings linked."""
    cells = [c for c in nb["cells"] if "solution" not in c.get("metadata", {}).get("tags", [])
             and (c["cell_type"] == "markdown" or "prose" in c.get("metadata", {}).get("tags", []))]
    linked = {m for c in nb["cells"] for m in _LINK.findall("".join(c["source"]))}
    added = []
    for heading, pattern in TERMS.items():
        anchor = known[heading]
        if anchor in linked:
            continue
        regex = re.compile(pattern)
        for cell in cells:
            new = _link_first("".join(cell["source"]), regex, anchor)
            if new is not None:
                _set_source(cell, new)
                added.append(heading)
                break
    return added


def broken_links(nb: dict, known: dict[str, str]) -> list[str]:
    anchors = set(known.values())
    return sorted({m for c in nb["cells"] for m in _LINK.findall("".join(c["source"])) if m not in anchors})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a link is missing or broken")
    args = parser.parse_args(argv)
    known = entries()
    missing = [h for h in TERMS if h not in known]
    if missing:
        print(f"glossary.md has no entry for {missing}", file=sys.stderr)
        return 1
    bad = 0
    for path in sorted((ROOT / "chapters").glob("[0-9]*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        broken = broken_links(nb, known)
        added = link_chapter(nb, known)
        wrapped = wrap_prose_links(nb)
        if broken or (args.check and (added or wrapped)):
            bad += 1
            print(f"{path.name}: broken {broken}, missing {added}, too wide {wrapped}", file=sys.stderr)
        elif added or wrapped:
            tmp = path.with_suffix(".ipynb.tmp")
            tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            tmp.replace(path)
            print(f"{path.name}: linked {', '.join(added) or 'nothing new'}; {wrapped} lines wrapped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
