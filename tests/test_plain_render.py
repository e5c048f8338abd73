"""The chapters as a plain notebook front end shows them: Colab, JupyterLab without jupyterlab-myst,
VS Code, GitHub. nbconvert renders the committed notebooks (markdown cells and outputs, no MyST),
and nothing the reader sees may be MyST syntax: no ``{glue}`` or ``{cite}`` role, no
``{exercise}`` fence, no option line. The prose that quotes the run is the Markdown output of a
``prose`` cell (attnlib.presentation.glue.prose), so it must be there, resolved, in the outputs.
"""
import re
import sys
from pathlib import Path

import nbformat
import pytest

nbconvert = pytest.importorskip("nbconvert", reason="nbconvert is in the [test] extra")

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import execute_chapters  # noqa: E402
import grade  # noqa: E402

#: What a plain front end would show raw: MyST roles and directives, their option lines, and the
#: placeholder of a prose field that was never filled.
RAW = re.compile(
    r"\{(?:glue|cite|exercise|solution|ref|numref|doc|eq|term|download)[\w:-]*\}"
    r"|^:(?:label|class|name):"
    r"|\{ch\d\d_\w+(?::[^{}]*)?\}",
    re.MULTILINE,
)
EXERCISE = re.compile(r'^> <a id="(ex-[\w-]+)"></a>\*\*Exercise (\d+)\.(\d+): [^*\n]+\*\*', re.MULTILINE)


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _visible_text(path: Path) -> tuple[str, str]:
    """(html, its text) of the chapter as nbconvert renders it without inputs."""
    exporter = nbconvert.HTMLExporter(template_name="basic", exclude_input=True)
    html, _ = exporter.from_notebook_node(nbformat.read(path, as_version=4))
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S))
    return html, text


def test_progress_bars_are_recognised_and_stripped():
    bar = {"output_type": "display_data", "metadata": {},
           "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "ab"},
                    "text/plain": ["training 6 models (2 at once):   0%|          | 0/6 [00:00<?, ?model/s]"]}}
    stream = {"output_type": "stream", "name": "stderr", "text": "x:  50%|#####     | 1/2 [00:01<00:01]\r"
                                                                 "x: 100%|##########| 2/2 [00:02<00:00]\n"}
    text = {"output_type": "stream", "name": "stdout", "text": "accuracy 95%| and 3/4 of the rest\nmore text\n"}
    table = {"output_type": "execute_result", "metadata": {}, "execution_count": 1, "data": {"text/plain": ["50%|a| 1/2"]}}
    assert execute_chapters.is_progress_bar(bar) and execute_chapters.is_progress_bar(stream)
    assert not execute_chapters.is_progress_bar(text) and not execute_chapters.is_progress_bar(table)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    nb.cells[0].outputs = [nbformat.from_dict(o) for o in (bar, text, stream, table)]
    assert execute_chapters.strip_progress_bars(nb) == 2
    assert [o["output_type"] for o in nb.cells[0].outputs] == ["stream", "execute_result"]


def test_stripping_a_bar_drops_its_widget_state_and_keeps_what_is_shown():
    view = "application/vnd.jupyter.widget-view+json"
    bar = {"output_type": "display_data", "metadata": {},
           "data": {view: {"model_id": "b1"}, "text/plain": ["x:  100%|##########| 2/2 [00:02<00:00]"]}}
    slider = {"output_type": "display_data", "metadata": {}, "data": {view: {"model_id": "a1"}, "text/plain": ["s"]}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    nb.cells[0].outputs = [nbformat.from_dict(o) for o in (bar, slider)]
    state = {"b1": {"state": {"layout": "IPY_MODEL_b2", "value": "x: 100%"}}, "b2": {"state": {}},
             "a1": {"state": {"children": ["IPY_MODEL_a2"]}}, "a2": {"state": {"style": "IPY_MODEL_a3"}},
             "a3": {"state": {}}}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2}}
    assert execute_chapters.strip_progress_bars(nb) == 1
    assert sorted(nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]) == ["a1", "a2", "a3"]
    nb.cells[0].outputs = []
    assert execute_chapters.prune_widget_state(nb) == 3 and "widgets" not in nb.metadata


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_committed_chapter_shows_no_progress_bar(path):
    """A committed bar is frozen at 0% in JupyterLab, Colab and the built pages: none is kept."""
    nb = nbformat.read(path, as_version=4)
    frozen = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for out in cell.get("outputs", []) if execute_chapters.is_progress_bar(out)
              or re.search(r"\d+%\|", "".join(out.get("data", {}).get("text/plain", "")))]
    assert not frozen, f"{path.name}: progress bars committed in cells {frozen}; re-execute with tools/execute_chapters.py"
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    stale = [m for m, w in state.items() if w.get("model_name") in ("FloatProgressModel", "IntProgressModel")]
    assert not stale, f"{path.name}: a bar's widget state is stored ({len(stale)}); re-execute or prune it"


def test_there_are_chapters():
    assert len(CHAPTERS) >= 16


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_plain_render_shows_no_myst_syntax(path):
    html, text = _visible_text(path)
    raw = sorted({m.group(0) for m in RAW.finditer(text)})
    assert not raw, f"{path.name} shows raw MyST syntax in a plain front end: {raw[:8]}"
    fences = re.findall(r'class="language-\{[^"]*"', html)
    assert not fences, f"{path.name}: a MyST directive fence renders as a code block: {fences}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_prose_cells_are_hidden_and_their_paragraphs_are_in_the_outputs(path):
    """The book shows the paragraph alone (remove-input); JupyterLab and Colab fold the code."""
    nb = nbformat.read(path, as_version=4)
    prose = [c for c in nb.cells if "prose" in _tags(c)]
    assert prose, f"{path.name}: no prose cell"
    for cell in prose:
        assert cell.cell_type == "code" and "prose(" in cell.source, cell.source[:60]
        assert "remove-input" in _tags(cell), f"{path.name}: a prose cell shows its input in the book"
        assert cell.metadata.get("jupyter", {}).get("source_hidden"), "JupyterLab shows its input"
        assert cell.metadata.get("cellView") == "form", "Colab shows its input"
        outs = [o for o in cell.get("outputs", []) if o.get("output_type") in ("execute_result", "display_data")]
        assert len(outs) == 1 and len(cell.outputs) == 1, f"{path.name}: {cell.source[:60]!r}"
        data = outs[0]["data"]
        # nbval compares text/plain: it is the paragraph itself, numbers included
        assert data["text/markdown"] == data["text/plain"] and data["text/markdown"].strip()
    # a markdown cell never quotes the run: only prose cells do
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert not RAW.search(cell.source), f"{path.name}: {cell.source[:80]!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_prose_quoting_an_unchecked_value_is_unchecked_too(path):
    """A value glued in an nbval-ignore-output cell (a timing) follows the machine and its load:
    a paragraph that quotes it is nbval-ignore-output as well, so nbval checks the rest."""
    nb = nbformat.read(path, as_version=4)
    unchecked = {name for c in nb.cells if c.cell_type == "code" and "nbval-ignore-output" in _tags(c)
                 for name in re.findall(r'glue\(\s*"(\w+)"', c.source)}
    for cell in nb.cells:
        if "prose" in _tags(cell) and "nbval-ignore-output" not in _tags(cell):
            quoted = set(re.findall(r"\{(\w+)(?::[^{}]*)?\}", cell.source))
            assert not quoted & unchecked, f"{path.name}: nbval would compare {sorted(quoted & unchecked)}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_exercises_are_numbered_per_chapter_as_the_starters_say(path):
    """Exercise N.k: N the chapter, k its place; its starter says the same; labels unique."""
    nb = nbformat.read(path, as_version=4)
    chapter = int(path.name.split("_")[0])
    opening = [(i, m) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
               for m in [EXERCISE.search(c.source)] if m]
    assert len(opening) >= 2, f"{path.name}: fewer than two exercises"
    labels = [m.group(1) for _, m in opening]
    assert len(set(labels)) == len(labels), f"{path.name}: labels repeat: {labels}"
    assert labels == grade.labels_of(nb), "the grader reads other labels"
    for k, (start, m) in enumerate(opening, start=1):
        assert (int(m.group(2)), int(m.group(3))) == (chapter, k), m.group(0)
        end = opening[k][0] if k < len(opening) else len(nb.cells)
        said = {s for c in nb.cells[start:end] if c.cell_type == "code"
                for s in re.findall(r"Exercise (\d+\.\d+)", c.source)}
        assert said == {f"{chapter}.{k}"}, f"{path.name}: exercise {chapter}.{k}'s starter says {said}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_grader_runs_no_prose_cell(path):
    """The grader runs the opening cells and the exercises' cells, never prose that quotes the middle."""
    nb = nbformat.read(path, as_version=4)
    ran = grade.setup_cells(nb) + grade.exercise_cells(nb)
    assert ran and not [i for i in ran if "prose" in _tags(nb.cells[i])]


def _shown_outputs(nb) -> list[list[dict]]:
    """Each run of outputs a reader sees in order: a code cell's, and each interactive figure's
    (an Output widget's, stored in the notebook's widget state)."""
    runs = [list(cell.get("outputs", [])) for cell in nb.cells if cell.cell_type == "code"]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    runs += [list(w["state"].get("outputs", [])) for w in state.values() if w.get("model_name") == "OutputModel"]
    return runs


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_has_its_text_alternative_in_every_front_end(path):
    """Colab and JupyterLab show a PNG with no alt text: each figure output carries its
    description as nbconvert's alt (output metadata) and is followed by the folded caption
    (attnlib.viz.caption) that every front end shows; the plain render has one per image."""
    from attnlib.presentation import viz

    nb = nbformat.read(path, as_version=4)
    figures = 0
    for outputs in _shown_outputs(nb):
        for k, out in enumerate(outputs):
            if "image/png" not in out.get("data", {}):
                continue
            figures += 1
            alt = out.get("metadata", {}).get("image/png", {}).get("alt", "")
            assert len(alt.split()) >= 5, f"{path.name}: a figure without a description: {alt!r}"
            # a front end that cannot show the image shows its text/plain: the description, not "<Figure size ...>"
            assert "".join(out["data"].get("text/plain", "")) == f"Figure: {alt}", f"{path.name}: {alt[:60]!r}"
            after = outputs[k + 1] if k + 1 < len(outputs) else {}
            assert after.get("data") == viz.caption(alt), f"{path.name}: no caption after the figure {alt[:60]!r}"
    html, _ = _visible_text(path)
    images = len(re.findall(r"<img\b", html))
    captions = len(re.findall(r'<details class="figure-words"><summary>' + viz.CAPTION_TITLE, html))
    assert images == captions, f"{path.name}: {images} images, {captions} captions in the plain render"
    assert 'alt="No description' not in html


def test_a_caption_is_folded_escaped_and_says_the_description():
    from attnlib.presentation import viz

    made = viz.caption("F1 <by> guide:\n 0.80 & 0.75")
    assert made["text/plain"] == f"{viz.CAPTION_TITLE}: F1 <by> guide: 0.80 & 0.75"
    assert made["text/markdown"].startswith('<details class="figure-words">')
    assert "F1 &lt;by&gt; guide: 0.80 &amp; 0.75</details>" in made["text/markdown"]
    assert "\n" not in made["text/markdown"]  # one raw-HTML line: no Markdown inside it
    with pytest.raises(ValueError, match="description"):
        viz.caption("  ")
