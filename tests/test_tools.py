"""tools/zmq_poll_fix.py: the kernel client polls in slices, keeps get_msg's meaning, runs real notebooks."""
import asyncio
import sys
import time
from pathlib import Path
from queue import Empty

import nbformat
import pytest
import zmq
import zmq.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import zmq_poll_fix  # noqa: E402


class _Channel:
    """The two attributes get_msg uses, on a real zmq.asyncio socket."""

    def __init__(self, socket):
        self.socket = socket

    async def _recv(self):
        return await self.socket.recv_string()


async def _pair():
    ctx = zmq.asyncio.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    port = a.bind_to_random_port("tcp://127.0.0.1")
    b.connect(f"tcp://127.0.0.1:{port}")
    return a, b


def test_get_msg_returns_a_waiting_message_and_times_out_like_the_original():
    async def scenario():
        a, b = await _pair()
        channel = _Channel(b)
        try:
            await a.send_string("ready")
            assert await zmq_poll_fix._get_msg_in_slices(channel, timeout=5) == "ready"
            start = time.monotonic()
            with pytest.raises(Empty):
                await zmq_poll_fix._get_msg_in_slices(channel, timeout=0.3)
            assert 0.25 <= time.monotonic() - start < 2.0
            # no timeout: waits across several slices until the message comes
            asyncio.get_running_loop().call_later(2.5, lambda: asyncio.ensure_future(a.send_string("late")))
            start = time.monotonic()
            assert await zmq_poll_fix._get_msg_in_slices(channel, timeout=None) == "late"
            assert time.monotonic() - start >= 2.0
        finally:
            a.close(linger=0)
            b.close(linger=0)

    asyncio.run(scenario())


def test_apply_patches_jupyter_clients_async_channel_once():
    from jupyter_client.channels import AsyncZMQSocketChannel

    zmq_poll_fix.apply()
    zmq_poll_fix.apply()
    assert AsyncZMQSocketChannel.get_msg is zmq_poll_fix._get_msg_in_slices
    assert zmq_poll_fix.setup(None)["parallel_read_safe"]


def test_a_patched_client_executes_a_notebook_with_a_widget_cell():
    from nbclient import NotebookClient

    zmq_poll_fix.apply()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import ipywidgets as W\nW.IntSlider(value=3)"),
                nbformat.v4.new_code_cell("print(sum(range(10)))")]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert nb.cells[1].outputs[0]["text"] == "45\n"
    assert "application/vnd.jupyter.widget-view+json" in nb.cells[0].outputs[0]["data"]


# ------------------------------------------------------------ tools/dedupe_page_scripts.py
def test_dedupe_page_scripts_keeps_the_first_of_scripts_equal_up_to_a_none_name():
    """Sphinx 7.4 lists an inline script twice, once named None and once ''; one copy stays."""
    from sphinx.builders.html._assets import _JavaScript

    import dedupe_page_scripts

    thebe = "const THEBE_JS_URL = 'x'"
    scripts = [
        _JavaScript("_static/a.js"),
        _JavaScript(None, body=thebe),
        _JavaScript("_static/b.js", **{"async": "async"}),
        _JavaScript("", body=thebe),
        _JavaScript("_static/a.js", priority=200),  # another priority is another script
        _JavaScript("_static/a.js"),
    ]
    context = {"script_files": scripts}
    dedupe_page_scripts.dedupe_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] is scripts  # edited in place: the template reads this list
    assert [(s.filename, s.priority) for s in scripts] == [
        ("_static/a.js", 500), (None, 500), ("_static/b.js", 500), ("_static/a.js", 200)
    ]
    dedupe_page_scripts.dedupe_scripts(None, "page", "page.html", {}, None)  # no scripts: no error


def test_the_book_build_loads_the_script_deduplication():
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"]["dedupe_page_scripts"] == "tools/"


# ------------------------------------------------------------ tools/book_execution.py
def test_book_execution_mode_comes_from_the_environment():
    import book_execution

    assert book_execution.mode_from_environment({}) is None
    assert book_execution.mode_from_environment({"ATTNLIB_BOOK_EXECUTE": " "}) is None
    assert book_execution.mode_from_environment({"ATTNLIB_BOOK_EXECUTE": "off"}) == "off"
    with pytest.raises(ValueError, match="ATTNLIB_BOOK_EXECUTE"):
        book_execution.mode_from_environment({"ATTNLIB_BOOK_EXECUTE": "never"})

    class Config:
        nb_execution_mode = "force"

    config = Config()
    import os

    old = os.environ.get("ATTNLIB_BOOK_EXECUTE")
    os.environ["ATTNLIB_BOOK_EXECUTE"] = "off"
    try:
        book_execution.apply(None, config)
    finally:
        if old is None:
            del os.environ["ATTNLIB_BOOK_EXECUTE"]
        else:
            os.environ["ATTNLIB_BOOK_EXECUTE"] = old
    assert config.nb_execution_mode == "off"


def test_the_landing_pages_times_are_written_from_a_run_not_typed(tmp_path):
    import execute_chapters

    page = execute_chapters.write_times_page({"02_measures": 19.2, "01_attention_classifier": 112.3}, 131.5,
                                             jobs=2, cores=2, path=tmp_path / "times.md")
    text = page.read_text()
    assert "2 CPU cores, 2 chapter(s) at a time" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "minutes" not in line]
    assert rows == ["| 1. attention classifier | 1.9 |", "| 2. measures | 0.3 |", "| the whole book | 2.2 |"]
    assert not list(tmp_path.glob("*.tmp"))  # written atomically
    # the committed page is such a table, and the landing page includes it
    committed = (Path(execute_chapters.ROOT) / "book" / "chapter_times.md").read_text()
    n_chapters = len(list((Path(execute_chapters.ROOT) / "chapters").glob("[0-9]*.ipynb")))
    listed = [line for line in committed.splitlines() if line.startswith("| ") and "minutes" not in line]
    assert len(listed) == n_chapters + 1, f"the times page lists {len(listed) - 1} of {n_chapters} chapters: re-run them cold"
    assert "chapter_times.md" in (Path(execute_chapters.ROOT) / "book" / "intro.md").read_text()


def test_a_cold_run_of_every_chapter_writes_the_times_unless_told_not_to(monkeypatch):
    """--no-times: a cold run made beside other work leaves the landing page's measurements alone."""
    import execute_chapters

    written = []
    monkeypatch.setattr(execute_chapters, "execute", lambda path: 1.0)  # no kernel: the bookkeeping only
    monkeypatch.setattr(execute_chapters, "write_times_page", lambda times, wall, **kw: written.append(times) or
                        execute_chapters.TIMES_PAGE)  # recorded, not written
    monkeypatch.delenv("ATTNLIB_CACHE_DIR", raising=False)
    assert execute_chapters.main(["--no-times"]) == 0 and written == []
    assert execute_chapters.main([]) == 0 and len(written) == 1
    n_chapters = len(list((Path(execute_chapters.ROOT) / "chapters").glob("[0-9]*.ipynb")))
    assert len(written[0]) == n_chapters


def test_progress_bars_leave_the_page_and_interactive_widgets_stay():
    """tools/hide_progress_bars.py on a real chapter's widget state (Chapter 14's interactive
    figure) with a live run's training bar added to it, as an executing book build has it (the
    committed chapters store no bar: tools/execute_chapters.py strips them)."""
    import json

    from docutils import nodes

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import hide_progress_bars as hpb

    path = Path(__file__).resolve().parents[1] / "chapters" / "14_rollout_and_flow.ipynb"
    nb = json.loads(path.read_text())
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]
    assert not hpb.progress_bar_ids(state)  # committed: no bar stored
    state["state"].update({  # tqdm's bar: an HBox of a label, a FloatProgress and a count
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_bar-text", "IPY_MODEL_bar-progress",
                                                                 "IPY_MODEL_bar-count"]}},
        "bar-text": {"model_name": "HTMLModel", "state": {"value": "training 6 models (2 at once): 100%"}},
        "bar-progress": {"model_name": "FloatProgressModel", "state": {"value": 6, "max": 6}},
        "bar-count": {"model_name": "HTMLModel", "state": {"value": " 6/6"}}})
    bars = hpb.progress_bar_ids(state)
    views = ["bar"] + [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
                       for c in nb["cells"] for o in c.get("outputs", [])
                       if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert bars == {"bar"} and set(views) - bars, "Chapter 14 shows an interactive figure"

    def view(model_id):
        box = nodes.container(classes=["cell_output"])
        box += nodes.raw(text='<script type="application/vnd.jupyter.widget-view+json">'
                              + json.dumps({"version_major": 2, "model_id": model_id}) + "</script>", format="html")
        return box

    doc = nodes.section()
    for model_id in views:
        doc += view(model_id)
    doc += nodes.paragraph(text="prose")
    assert hpb.remove_progress_bars(doc, state) == len(set(views) & bars)
    left = [hpb._view_id(r) for r in doc.findall(nodes.raw)]
    assert left == [v for v in views if v not in bars]
    assert len(doc.children) == len(left) + 1  # the bars' empty output boxes went too
    assert hpb.progress_bar_ids({}) == set() and hpb.remove_progress_bars(doc, {}) == 0


def test_a_figures_alt_text_is_the_description_the_kernel_wrote_into_its_png():
    """attnlib.viz's 2x PNG carries viz.describe(fig); tools/figure_alt.py reads it back (tEXt and iTXt)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import retina_figure

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import figure_alt

    from attnlib import viz

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="attention")
    ax.set(title="Kendall τ", xlabel="layer", ylabel="r")
    ax.legend()
    text = viz.describe(fig)
    assert text == "A figure of one panel. Kendall τ: x: layer; y: r. Legend: attention."
    png, size = retina_figure(fig, metadata={"Description": text})  # τ: not Latin-1, an iTXt chunk
    assert figure_alt.png_description(png) == text
    fig.suptitle("plain")
    png, _ = retina_figure(fig, metadata={"Description": viz.describe(fig, "Two lines.")})
    assert figure_alt.png_description(png) == "Two lines."
    assert figure_alt.png_description(b"not a png") is None
    plt.close(fig)


def test_the_notebooks_zip_holds_every_chapter_byte_for_byte_and_is_the_same_twice(tmp_path):
    import zipfile

    import notebooks_zip

    root = Path(__file__).resolve().parents[1]
    first = notebooks_zip.write_zip(root / "chapters", tmp_path / "a")
    second = notebooks_zip.write_zip(root / "chapters", tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()  # no timestamp of the build in it
    chapters = sorted((root / "chapters").glob("[0-9]*.ipynb"))
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
        assert names == [f"{notebooks_zip.FOLDER}/{p.name}" for p in chapters]
        assert all(archive.read(f"{notebooks_zip.FOLDER}/{p.name}") == p.read_bytes() for p in chapters)
    assert not list((tmp_path / "a").glob(".*partial"))
    with pytest.raises(FileNotFoundError, match="no chapter notebooks"):
        notebooks_zip.write_zip(tmp_path, tmp_path / "c")
    assert "notebooks_zip" in (root / "_config.yml").read_text() and 'href="notebooks.zip"' in (
        root / "book" / "intro.md").read_text()


def test_glossary_links_go_to_existing_entries_and_every_chapter_links_its_first_uses():
    import json

    import glossary_links as G

    known = G.entries()
    assert set(G.TERMS) <= set(known) and len(known) >= 20
    assert known["Kendall tau"] == "kendall-tau" and known["Within noise"] == "within-noise"
    root = Path(__file__).resolve().parents[1]
    linked = 0
    for path in sorted((root / "chapters").glob("[0-9]*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert G.broken_links(nb, known) == [], path.name
        assert G.link_chapter(nb, known) == [], f"{path.name}: run tools/glossary_links.py"
        linked += sum("".join(c["source"]).count(G.TARGET) for c in nb["cells"])
    assert linked >= 40


def test_a_glossary_link_goes_to_the_first_plain_use_only():
    import glossary_links as G

    known = {"TVD": "tvd", "JSD": "jsd"}
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# TVD in a heading\n", "`TVD` in code and $TVD$ in math\n"]},
        {"cell_type": "markdown", "metadata": {"tags": ["solution"]}, "source": ["TVD in a solution"]},
        {"cell_type": "code", "metadata": {"tags": ["prose"]}, "source": ["prose(r\"\"\"\n{ch_tvd} and the TVD here\n\"\"\")"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["TVD again, [JSD](x) linked elsewhere"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["## A heading\n", "\n", "the JSD in the body"]},
    ]}
    saved = dict(G.TERMS)
    G.TERMS.clear()
    G.TERMS.update({"TVD": r"\bTVD\b", "JSD": r"\bJSD\b"})
    try:
        assert G.link_chapter(nb, known) == ["TVD", "JSD"]  # a heading protects its own line only
    finally:
        G.TERMS.clear()
        G.TERMS.update(saved)
    assert "".join(nb["cells"][2]["source"]) == 'prose(r"""\n{ch_tvd} and the [TVD](../book/glossary.md#tvd) here\n""")'
    assert "".join(nb["cells"][0]["source"]).count("glossary") == 0
    assert "".join(nb["cells"][3]["source"]) == "TVD again, [JSD](x) linked elsewhere"
    assert "".join(nb["cells"][4]["source"]) == "## A heading\n\nthe [JSD](../book/glossary.md#jsd) in the body"


def test_a_prose_line_a_link_made_too_wide_breaks_the_same_in_its_template_and_its_output():
    import glossary_links as G

    link = "[JSD](../book/glossary.md#jsd)"
    template = "x\nthe median gap between the two erasures is {ch10_gap:.4f} (" + link + ") for the BiLSTM and more words\n"
    wrapped, made = G.wrap_link(template, link)
    assert all(len(line) <= G.CODE_WIDTH for line in wrapped.split("\n")) and made[0]
    assert wrapped.count("\n") > template.count("\n")
    output = template.replace("{ch10_gap:.4f}", "0.0123")  # the paragraph prose() made from it
    out, _ = G.wrap_link(output, link, made)  # the template's breaks, whatever the width
    assert out == wrapped.replace("{ch10_gap:.4f}", "0.0123")
    # no break where a field lies between the space and the link: the output could break elsewhere
    glued = "w " * 40 + "{ch_x}" + link + " tail"
    text, made = G.wrap_link(glued, link)
    assert made == (False, True) and text.split("\n") == [glued[:-len(" tail")], "tail"]
    short = "a " + link + " b"
    assert G.wrap_link(short, link) == (short, (False, False))
