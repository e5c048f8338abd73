"""tools/exercise_numbers.py: each chapter's exercises numbered (chapter, k) in their order, as the starters say."""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import exercise_numbers  # noqa: E402


def test_renumber_per_chapter_in_document_order():
    numbers = {
        "chapters/05_adversarial_attention": {"exercise": {"b": (10,), "a": (9,)}, "figure": {"f": (3,)}},
        "chapters/15_which_explanation": {"exercise": {"x": (30,)}},
        "book/intro": {"exercise": {"y": (1,)}},
    }
    exercise_numbers.renumber(numbers)
    assert numbers["chapters/05_adversarial_attention"]["exercise"] == {"a": (5, 1), "b": (5, 2)}
    assert numbers["chapters/05_adversarial_attention"]["figure"] == {"f": (3,)}  # only exercises
    assert numbers["chapters/15_which_explanation"]["exercise"] == {"x": (15, 1)}
    assert numbers["book/intro"]["exercise"] == {"y": (1,)}  # not a chapter: unchanged


def test_starters_name_the_number_the_book_shows():
    """Each starter's "Exercise N.k" is its chapter's number and its place among the chapter's exercises."""
    for path in sorted((ROOT / "chapters").glob("[0-9]*.ipynb")):
        chapter = int(path.name.split("_")[0])
        cells = json.loads(path.read_text())["cells"]
        starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and "{exercise-start}" in "".join(c["source"])]
        for k, start in enumerate(starts, start=1):
            end = next(i for i in range(start, len(cells)) if "{exercise-end}" in "".join(cells[i]["source"]))
            said = {m for i in range(start, end) if cells[i]["cell_type"] == "code"
                    for m in re.findall(r"Exercise (\d+\.\d+)", "".join(cells[i]["source"]))}
            assert said <= {f"{chapter}.{k}"}, f"{path.name}: exercise {k} says Exercise {sorted(said)}"
