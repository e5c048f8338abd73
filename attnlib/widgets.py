"""ipywidgets for exploring the book's knobs. Each has a static figure twin in attnlib.viz.

In the rendered (static) book the sliders show at their default values but cannot
recompute without a kernel; run the chapter in Jupyter, Colab or Binder to move them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["measures_explorer", "temperature_explorer", "tempered", "sentence_explorer"]


def _normalise(w) -> np.ndarray:
    w = np.clip(np.asarray(w, dtype=float), 0.0, None)
    s = w.sum()
    return np.full(len(w), 1.0 / len(w)) if s <= 0 else w / s


def measures_explorer(p: Sequence[float], q: Sequence[float], tokens: Sequence[str]):
    """Sliders for every weight of p and q (renormalised); redraws :func:`attnlib.viz.measures_figure`."""
    import ipywidgets as W
    import matplotlib.pyplot as plt
    from IPython.display import display

    from .viz import measures_figure

    if not (len(p) == len(q) == len(tokens)):
        raise ValueError("p, q and tokens must have the same length")
    style = {"description_width": "45px"}
    layout = W.Layout(width="210px")
    ps = [W.FloatSlider(value=float(v), min=0, max=1, step=0.05, description=f"p[{t}]", style=style, layout=layout, continuous_update=False) for v, t in zip(p, tokens)]
    qs = [W.FloatSlider(value=float(v), min=0, max=1, step=0.05, description=f"q[{t}]", style=style, layout=layout, continuous_update=False) for v, t in zip(q, tokens)]
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            fig = measures_figure(_normalise([s.value for s in ps]), _normalise([s.value for s in qs]), tokens,
                                  title="p and q, renormalised")
            display(fig)
            plt.close(fig)

    for s in ps + qs:
        s.observe(redraw, names="value")
    redraw()
    return W.VBox([W.HBox([W.VBox(ps), W.VBox(qs)]), out])


def temperature_explorer(p: Sequence[float], tokens: Sequence[str], temperature: float = 1.0):
    """Sharpen or flatten p: q = softmax(log p / temperature). Rank (tau) stays, TVD/JSD move."""
    import ipywidgets as W
    import matplotlib.pyplot as plt
    from IPython.display import display

    from .viz import measures_figure

    p = _normalise(p)
    slider = W.FloatLogSlider(value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature", style={"description_width": "initial"}, continuous_update=False)
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            fig = measures_figure(p, tempered(p, slider.value), tokens, names=("p", "q"), title=f"q = p sharpened/flattened, temperature {slider.value:.2f}")
            display(fig)
            plt.close(fig)

    slider.observe(redraw, names="value")
    redraw()
    return W.VBox([slider, out])


def tempered(p, temperature: float) -> np.ndarray:
    """softmax(log p / temperature) over the entries where p > 0 (zeros stay zero)."""
    p = np.asarray(p, dtype=float)
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    out = np.zeros_like(p)
    pos = p > 0
    logits = np.log(p[pos]) / temperature
    e = np.exp(logits - logits.max())
    out[pos] = e / e.sum()
    return out


def sentence_explorer(models: dict, vocab, text: str = "a gorgeous , witty film with a dull ending"):
    """Type a sentence, pick a model: see its prediction and attention heatmap (Chapter 1).

    ``models`` maps a display name to an :class:`attnlib.models.AttentionClassifier`.
    """
    import ipywidgets as W
    import matplotlib.pyplot as plt
    import torch
    from IPython.display import display

    from .data import collate, tokenize
    from .viz import attention_heatmap

    if not models:
        raise ValueError("models must map at least one name to a model")
    box = W.Text(value=text, description="sentence", layout=W.Layout(width="90%"), continuous_update=False)
    choice = W.Dropdown(options=list(models), description="model")
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                tokens = tokenize(box.value)
            except ValueError as err:
                print(f"cannot read that sentence: {err}")
                return
            ids = vocab.encode(tokens)
            batch = collate([ids], labels=[0], index=[0])
            model = models[choice.value]
            with torch.no_grad():
                result = model(batch.to(next(model.parameters()).device))
            alpha = result.attention[0][result.encoded.mask[0]].cpu().numpy()
            p = float(result.probs[0, 1])
            shown = [t if vocab.stoi.get(t) is not None else f"{t}(unk)" for t in tokens]
            fig = attention_heatmap([shown], [alpha], titles=[f"{choice.value}: p(positive) = {p:.2f}"])
            display(fig)
            plt.close(fig)

    box.observe(redraw, names="value")
    choice.observe(redraw, names="value")
    redraw()
    return W.VBox([box, choice, out])
