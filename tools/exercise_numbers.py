"""Sphinx extension: exercises numbered per chapter, "Exercise 5.1", as the starters and the grader say.

sphinx-exercise numbers exercises with Sphinx's figure numbering (numfig). The book's table of
contents is not ``numbered`` (the chapters carry their number in their title, and the landing
and "Run it yourself" pages are not chapters), so numfig counts exercises across the whole book:
chapter 15's first exercise was "Exercise 30", while its starter raises "Exercise 15.1". After
Sphinx assigns the numbers (``env-get-updated``), this renumbers the exercises of each chapter
``chapters/NN_*`` as (NN, 1), (NN, 2), ... in the order the chapter shows them; sphinx-exercise
writes "Exercise NN.k" from that, in the exercise's title, its solution's "Solution to" title
and every reference to it.
"""
from __future__ import annotations

import re

#: A chapter's document name, and its number.
CHAPTER = re.compile(r"^chapters/(\d+)_")


def renumber(fignumbers: dict) -> None:
    """``env.toc_fignumbers`` in place: every chapter's exercises as (chapter, k) in their order."""
    for docname, kinds in fignumbers.items():
        found = CHAPTER.match(docname)
        numbers = kinds.get("exercise")
        if not found or not numbers:
            continue
        chapter = int(found.group(1))
        ordered = sorted(numbers, key=lambda ident: numbers[ident])
        kinds["exercise"] = {ident: (chapter, k) for k, ident in enumerate(ordered, start=1)}


def _on_env_updated(app, env):
    renumber(env.toc_fignumbers)
    return []


def setup(app):
    # after Sphinx's own TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", _on_env_updated, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
